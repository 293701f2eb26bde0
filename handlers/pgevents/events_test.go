package pgevents

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	waitFor = 30 * time.Second
	tick    = 5 * time.Millisecond
)

// recorder is a Handler that keeps every call.
type recorder struct {
	mu      sync.Mutex
	ready   map[string]map[string]bool // tenant → queues
	configs []string                   // "tenant/queue/deleted"
	push    []bool
	pop     []bool
}

func newRecorder() *recorder { return &recorder{ready: map[string]map[string]bool{}} }

func (r *recorder) QueuesReady(tenant string, queues []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready[tenant] == nil {
		r.ready[tenant] = map[string]bool{}
	}
	for _, q := range queues {
		r.ready[tenant][q] = true
	}
}

func (r *recorder) QueueConfigChanged(tenant, queue string, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.configs = append(r.configs, fmt.Sprintf("%s/%s/%v", tenant, queue, deleted))
}

func (r *recorder) PushMaintenanceChanged(enabled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.push = append(r.push, enabled)
}

func (r *recorder) PopMaintenanceChanged(enabled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pop = append(r.pop, enabled)
}

func (r *recorder) readyCount(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ready[tenant])
}

func (r *recorder) isReady(tenant, queue string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready[tenant][queue]
}

func (r *recorder) snapshot() (configs []string, push, pop []bool, tenants int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.configs...), append([]bool(nil), r.push...), append([]bool(nil), r.pop...), len(r.ready)
}

type broker struct {
	ev   *Events
	rec  *recorder
	pool *pgxpool.Pool
}

// twoBrokers starts two Events on one database, each with its own pool,
// and waits until both listen.
func twoBrokers(t *testing.T) (a, b broker) {
	t.Helper()
	url := pgtest.NewDB(t)
	start := func(id string) broker {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		ev, err := New(Config{Pool: pool, ServerID: id, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
		require.NoError(t, err)
		rec := newRecorder()
		require.NoError(t, ev.Start(context.Background(), rec))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			require.NoError(t, ev.Stop(ctx))
		})
		return broker{ev: ev, rec: rec, pool: pool}
	}
	a, b = start("broker-a"), start("broker-b")
	require.Eventually(t, func() bool { return a.ev.Listening() && b.ev.Listening() }, waitFor, tick)
	return a, b
}

func TestBrokersSeeEachOthersEvents(t *testing.T) {
	t.Parallel()
	a, b := twoBrokers(t)

	a.ev.QueuesReady(testTenant, []string{"orders", "billing"})
	a.ev.QueuesReady("", []string{"default-queue"})
	require.Eventually(t, func() bool {
		return b.rec.isReady(testTenant, "orders") && b.rec.isReady(testTenant, "billing") &&
			b.rec.isReady(DefaultTenant, "default-queue")
	}, waitFor, tick)

	b.ev.QueueConfigChanged(testTenant, "orders", false)
	b.ev.QueueConfigChanged(testTenant, "gone", true)
	b.ev.MaintenanceChanged(true, false)
	require.Eventually(t, func() bool {
		configs, push, pop, _ := a.rec.snapshot()
		return len(configs) == 2 && len(push) == 1 && len(pop) == 1
	}, waitFor, tick)
	configs, push, pop, _ := a.rec.snapshot()
	require.Equal(t, []string{testTenant + "/orders/false", testTenant + "/gone/true"}, configs)
	require.Equal(t, []bool{true}, push)
	require.Equal(t, []bool{false}, pop)

	// Each heard only the other: its own notifications came back and were
	// skipped.
	require.Eventually(t, func() bool { return a.ev.Stats().IgnoredOwn >= 1 && b.ev.Stats().IgnoredOwn >= 3 }, waitFor, tick)
	require.Zero(t, a.rec.readyCount(testTenant))
	configs, push, _, _ = b.rec.snapshot()
	require.Empty(t, configs)
	require.Empty(t, push)

	s := a.ev.Stats()
	require.Equal(t, Channel, s.Channel)
	require.True(t, s.Listening)
	require.NotZero(t, s.ListenerPID)
	require.GreaterOrEqual(t, s.Published, uint64(2))
	require.Zero(t, s.PublishErrors)
	require.Zero(t, s.Malformed)
}

// The SQL API notifies without "from"; every broker takes it. A
// notification that is not an event is counted and the listener goes on.
func TestEventsFromSQL(t *testing.T) {
	t.Parallel()
	a, b := twoBrokers(t)
	q := db.New(a.pool)
	ctx := context.Background()
	require.NoError(t, q.EventNotify(ctx, `not an event`))
	require.NoError(t, q.EventNotify(ctx, `{"v":1,"type":"ready","queues":["any-tenant"]}`))
	require.NoError(t, q.EventNotify(ctx, `{"v":1,"type":"ready","tenant":"`+testTenant+`","queues":["from-sql"]}`))
	for _, br := range []broker{a, b} {
		require.Eventually(t, func() bool {
			return br.rec.isReady(testTenant, "from-sql") && br.rec.isReady("", "any-tenant")
		}, waitFor, tick)
		require.Equal(t, uint64(1), br.ev.Stats().Malformed)
		require.Zero(t, br.ev.Stats().IgnoredOwn)
	}
}

// The listener's backend is killed: it reconnects by itself and hears the
// next events.
func TestListenerSurvivesTerminatedBackend(t *testing.T) {
	t.Parallel()
	a, b := twoBrokers(t)
	oldPID := b.ev.Stats().ListenerPID

	var killed bool
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", oldPID).Scan(&killed))
	require.True(t, killed)
	require.Eventually(t, func() bool {
		s := b.ev.Stats()
		return s.Listening && s.ListenerPID != oldPID && s.Reconnects == 1
	}, waitFor, tick)

	a.ev.QueuesReady(testTenant, []string{"after-reconnect"})
	require.Eventually(t, func() bool { return b.rec.isReady(testTenant, "after-reconnect") }, waitFor, tick)
}

// A batch too big for one notification arrives whole, in several.
func TestLargeBatchIsSplit(t *testing.T) {
	t.Parallel()
	a, b := twoBrokers(t)
	queues := make([]string, 3000)
	for i := range queues {
		queues[i] = fmt.Sprintf("queue-%05d-%s", i, strings.Repeat("z", 20))
	}
	before := a.ev.Stats().Published
	a.ev.QueuesReady(testTenant, queues)
	require.Eventually(t, func() bool { return b.rec.readyCount(testTenant) == len(queues) }, waitFor, tick)
	require.GreaterOrEqual(t, a.ev.Stats().Published-before, uint64(3000*30/MaxPayload))
	require.Zero(t, a.ev.Stats().Dropped)
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	_, err := New(Config{ServerID: "x"})
	require.Error(t, err)
	pool := pgtest.NewPool(t)
	_, err = New(Config{Pool: pool})
	require.Error(t, err)

	ev, err := New(Config{Pool: pool, ServerID: "x"})
	require.NoError(t, err)
	require.NoError(t, ev.Stop(context.Background()), "Stop without Start")
	require.Error(t, ev.Start(context.Background(), newRecorder()))
	ev.QueuesReady(testTenant, []string{"q"}) // a no-op, not a panic

	ev, err = New(Config{Pool: pool, ServerID: "x"})
	require.NoError(t, err)
	require.Error(t, ev.Start(context.Background(), nil))
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, ev.Start(ctx, newRecorder()))
	require.Error(t, ev.Start(ctx, newRecorder()))
	require.Eventually(t, ev.Listening, waitFor, tick)
	cancel() // the Start context ends it too
	require.Eventually(t, func() bool { return !ev.Listening() }, waitFor, tick)
	require.NoError(t, ev.Stop(context.Background()))
	require.NoError(t, ev.Stop(context.Background()), "idempotent")
}

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

// BenchmarkWake measures one wake through NOTIFY, from QueuesReady on one
// broker to the handler of another on the same database. With the default
// window, back-to-back wakes are paced by the coalescing window; with a
// 1 µs window the number is the NOTIFY round trip alone. Numbers in
// docs/mesh.md.
func BenchmarkWake(b *testing.B) {
	for _, window := range []time.Duration{CoalesceDefault, time.Microsecond} {
		b.Run("window="+window.String(), func(b *testing.B) {
			url := pgtest.NewDB(b)
			start := func(id string, h Handler) *Events {
				pool, err := pgxpool.New(context.Background(), url)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(pool.Close)
				ev, err := New(Config{Pool: pool, ServerID: id, Coalesce: window})
				if err != nil {
					b.Fatal(err)
				}
				if err := ev.Start(context.Background(), h); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = ev.Stop(context.Background()) })
				return ev
			}
			sig := wakeSignal{ch: make(chan struct{}, 1)}
			a, bb := start("a", newRecorder()), start("b", sig)
			for !a.Listening() || !bb.Listening() {
				select {
				case <-sig.ch:
				case <-time.After(10 * time.Millisecond):
				}
			}
			queues := []string{"orders"}
			for b.Loop() {
				a.QueuesReady(testTenant, queues)
				<-sig.ch
			}
		})
	}
}
