package mesh

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// wakeSignal is a Handler that signals every ready announcement.
type wakeSignal struct{ ch chan struct{} }

func (w wakeSignal) QueuesReady(string, []string) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
func (wakeSignal) QueueConfigChanged(string, string, bool) {}
func (wakeSignal) PushMaintenanceChanged(bool)             {}
func (wakeSignal) PopMaintenanceChanged(bool)              {}

// BenchmarkWake measures one wake from QueuesReady on one broker to the
// handler on another, over loopback: the transport's share of a parked
// long-poll's latency. With the default window, back-to-back wakes are
// paced by the coalescing window; with a 1 µs window the number is the
// transport alone. Numbers in docs/mesh.md.
func BenchmarkWake(b *testing.B) {
	for _, secret := range []string{"", testSecret} {
		for _, window := range []time.Duration{CoalesceDefault, time.Microsecond} {
			b.Run(fmt.Sprintf("auth=%s/window=%s", map[bool]string{true: AuthOff, false: AuthHMAC}[secret == ""], window), func(b *testing.B) {
				addrA, addrB := freeAddr(b, "127.0.0.2"), freeAddr(b, "127.0.0.3")
				cfgA := testConfig("a", addrA, []string{addrB}, secret)
				cfgA.Coalesce = window
				a := startNode(b, cfgA)
				cfgB := testConfig("b", addrB, nil, secret)
				sig := wakeSignal{ch: make(chan struct{}, 1)}
				m := mustNew(b, cfgB)
				if err := m.Start(context.Background(), sig); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = m.Stop(context.Background()) })
				for !a.m.Stats().Peers[0].Connected {
					a.m.QueuesReady(testTenant, []string{"warm-up"})
					select {
					case <-sig.ch:
					case <-time.After(10 * time.Millisecond):
					}
				}
				queues := []string{"orders"}
				b.ResetTimer()
				for b.Loop() {
					a.m.QueuesReady(testTenant, queues)
					<-sig.ch
				}
			})
		}
	}
}

// BenchmarkQueuesReadyCall measures what a push pays to announce: the
// caller's side only.
func BenchmarkQueuesReadyCall(b *testing.B) {
	addrA := freeAddr(b, "127.0.0.2")
	a := startNode(b, testConfig("a", addrA, []string{freeAddr(b, "127.0.0.3")}, testSecret))
	queues := []string{"orders"}
	for b.Loop() {
		a.m.QueuesReady(testTenant, queues)
	}
}
