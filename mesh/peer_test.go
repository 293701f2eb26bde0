package mesh

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A peer that goes away is reported down once, and when it comes back on
// the same address both directions reconnect by themselves.
func TestPeerRestartRejoins(t *testing.T) {
	t.Parallel()
	addrA, addrB := freeAddr(t, "127.0.0.2"), freeAddr(t, "127.0.0.3")
	a := startNode(t, testConfig("a", addrA, []string{addrB}, testSecret))
	cfgB := testConfig("b", addrB, []string{addrA}, testSecret)
	b := startNode(t, cfgB)
	waitConnected(t, a, b)
	require.Equal(t, 1, a.logs.count("mesh peer up b"))

	require.NoError(t, b.m.Stop(context.Background()))
	require.Eventually(t, func() bool {
		s := a.m.Stats()
		return !s.Peers[0].Connected && s.ServersDead == 1 && s.ServersAlive == 0
	}, waitFor, tick)
	require.Eventually(t, func() bool { return a.logs.count("mesh peer down b") == 1 }, waitFor, tick)
	a.m.QueuesReady(testTenant, []string{"while-down"})
	require.Eventually(t, func() bool { return framesDropped(a.m, FrameMessageAvailable) >= 1 }, waitFor, tick,
		"a frame for a peer that is down is dropped and counted")

	b2 := startNode(t, cfgB)
	waitConnected(t, a, b2)
	require.Equal(t, 2, a.logs.count("mesh peer up b"))
	require.Equal(t, 1, a.logs.count("mesh peer down b"), "logged once per outage")
	a.m.QueuesReady(testTenant, []string{"after"})
	b2.m.QueuesReady(testTenant, []string{"back"})
	require.Eventually(t, func() bool { return b2.rec.readyQueues(testTenant)["after"] }, waitFor, tick)
	require.Eventually(t, func() bool { return a.rec.readyQueues(testTenant)["back"] }, waitFor, tick)
	require.False(t, b2.rec.readyQueues(testTenant)["while-down"], "nothing stale is replayed")
}

// stuckPeer completes the open handshake and then never reads again.
func stuckPeer(t *testing.T) string {
	t.Helper()
	ln := serveTCP(t, "127.0.0.4", func(c net.Conn, _ func(net.Conn), _ *sync.WaitGroup) {
		_, _ = c.Write(challengeFrame(challengeMsg{V: protocolVersion, ServerID: "stuck", Instance: "stuck", Nonce: hexNonce(), Auth: AuthOff}))
		if _, _, err := (&frameReader{r: c}).next(maxHandshakeLen); err != nil {
			return
		}
		_, _ = c.Write(appendFrame(nil, FrameWelcome, []byte(`{}`)))
	})
	return ln.Addr().String()
}

// A peer that accepts but never reads fills its own queue and loses frames;
// the caller never waits, and the other peers are served.
func TestSlowPeerDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	addrA, addrB := freeAddr(t, "127.0.0.2"), freeAddr(t, "127.0.0.3")
	stuck := stuckPeer(t)
	cfgA := testConfig("a", addrA, []string{stuck, addrB}, "")
	cfgA.SendQueue = 4
	cfgA.DeadThreshold = time.Minute // the stuck writer stays blocked for the whole test
	a := startNode(t, cfgA)
	b := startNode(t, testConfig("b", addrB, []string{addrA}, ""))
	require.Eventually(t, func() bool {
		s := a.m.Stats()
		return s.Peers[0].Connected && s.Peers[1].Connected
	}, waitFor, tick)

	// Big frames fill the socket buffers quickly; every call is new names.
	filler := strings.Repeat("x", 100)
	round := 0
	require.Eventually(t, func() bool {
		queues := make([]string, 2000)
		for i := range queues {
			queues[i] = fmt.Sprintf("r%d-%d-%s", round, i, filler)
		}
		round++
		a.m.QueuesReady(testTenant, queues)
		return a.m.Stats().Peers[0].Dropped > 0
	}, waitFor, tick)

	s := a.m.Stats()
	require.Positive(t, s.Frames["MESSAGE_AVAILABLE"].Dropped)
	require.Positive(t, s.MessagesDropped)
	require.True(t, s.Peers[0].Connected, "the stuck peer's writer is still blocked, not the caller")
	// The healthy peer keeps up once the burst is over (during it, it may
	// itself have been slower than the burst).
	require.Eventually(t, func() bool {
		a.m.QueuesReady(testTenant, []string{"marker"})
		return b.rec.readyQueues(testTenant)["marker"]
	}, waitFor, tick)
}
