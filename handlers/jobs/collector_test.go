package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/sql/pgtest"
)

// m0 is the first minute the collector tests write.
var m0 = time.Date(2030, 3, 4, 10, 0, 0, 0, time.UTC)

type workerRow struct {
	PushRequests, PushMessages, PopRequests, PopMessages, LagCount, LagSumMs, MaxLagMs int64
	Samples                                                                            int
}

func (b *testBundle) workerRow(host string, bucket time.Time) workerRow {
	b.t.Helper()
	var w workerRow
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), `SELECT push_request_count, push_message_count,
		pop_request_count, pop_message_count, lag_count, lag_sum_ms, max_lag_ms, sample_count
		FROM queen.worker_metrics WHERE hostname = $1 AND bucket = $2`, host, bucket).Scan(
		&w.PushRequests, &w.PushMessages, &w.PopRequests, &w.PopMessages, &w.LagCount, &w.LagSumMs, &w.MaxLagMs, &w.Samples))
	return w
}

type queueRow struct {
	Bucket                                  time.Time
	Queue                                   string
	PushRequests, PushMessages, PopMessages int64
	LagSumMs, MaxLagMs                      int64
	Parked                                  float64
}

func (b *testBundle) queueRows(host string) []queueRow {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT bucket, queue_name, push_request_count, push_message_count,
		pop_count, lag_sum_ms, max_lag_ms, parked_count
		FROM queen.queue_lag_metrics WHERE hostname = $1 ORDER BY bucket, queue_name`, host)
	require.NoError(b.t, err)
	defer rows.Close()
	out := []queueRow{}
	for rows.Next() {
		var r queueRow
		require.NoError(b.t, rows.Scan(&r.Bucket, &r.Queue, &r.PushRequests, &r.PushMessages, &r.PopMessages,
			&r.LagSumMs, &r.MaxLagMs, &r.Parked))
		r.Bucket = r.Bucket.UTC()
		out = append(out, r)
	}
	require.NoError(b.t, rows.Err())
	return out
}

func push(reg *metrics.Registry, queue string, n int) {
	reg.Request(metrics.OpPush)
	reg.Pushed(queue, n)
}

func pop(reg *metrics.Registry, queue string, n int, lagSum, lagMax time.Duration) {
	reg.Request(metrics.OpPop)
	reg.Popped(queue, n, lagSum, lagMax)
}

// Counters land in the minute they were counted in, once: a flush writes
// what grew since the last write (added to the row), a repeated flush adds
// nothing, and what is counted after a flush reaches the same minute's row
// when the next minute begins. Gauges (sample_count) are replaced.
func TestCollectorWritesEachCountOnce(t *testing.T) {
	t.Parallel()
	reg := metrics.New()
	b := setup(t, Config{Metrics: reg, Hostname: "h1", Port: 6632, PID: 42})
	ctx := t.Context()
	m1 := m0.Add(time.Minute)
	sec := func(s int) time.Time { return m0.Add(time.Duration(s) * time.Second) }

	require.NoError(t, b.svc.Tick(ctx, sec(1)))
	push(reg, "qa", 3)
	push(reg, "qb", 2)
	pop(reg, "qa", 2, 300*time.Millisecond, 200*time.Millisecond)
	require.NoError(t, b.svc.Tick(ctx, sec(2)))
	require.NoError(t, b.svc.Flush(ctx, sec(20)))
	require.Equal(t, workerRow{PushRequests: 2, PushMessages: 5, PopRequests: 1, PopMessages: 2, LagCount: 2, LagSumMs: 300, MaxLagMs: 200, Samples: 2},
		b.workerRow("h1", m0))

	push(reg, "qa", 4)
	pop(reg, "qa", 1, 50*time.Millisecond, 50*time.Millisecond)
	require.NoError(t, b.svc.Tick(ctx, sec(25)))
	require.NoError(t, b.svc.Flush(ctx, sec(30)))
	require.NoError(t, b.svc.Flush(ctx, sec(31))) // nothing new
	push(reg, "qa", 1)                            // still minute m0
	require.NoError(t, b.svc.Tick(ctx, sec(59)))
	require.NoError(t, b.svc.Tick(ctx, sec(61))) // m1 begins: the rest of m0 is written
	push(reg, "qb", 7)
	require.NoError(t, b.svc.Flush(ctx, sec(90)))

	require.Equal(t, workerRow{PushRequests: 4, PushMessages: 10, PopRequests: 2, PopMessages: 3, LagCount: 3, LagSumMs: 350, MaxLagMs: 200, Samples: 4},
		b.workerRow("h1", m0))
	require.Equal(t, workerRow{PushRequests: 1, PushMessages: 7, Samples: 1}, b.workerRow("h1", m1))
	require.Equal(t, []queueRow{
		{Bucket: m0, Queue: "qa", PushRequests: 3, PushMessages: 8, PopMessages: 3, LagSumMs: 350, MaxLagMs: 200},
		{Bucket: m0, Queue: "qb", PushRequests: 1, PushMessages: 2},
		{Bucket: m1, Queue: "qb", PushRequests: 1, PushMessages: 7},
	}, b.queueRows("h1"), "no row for a queue without traffic in the minute")

	var pushed, pushRequests, popped int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT push_messages, push_requests, pop_messages
		FROM queen.worker_metrics_summary`).Scan(&pushed, &pushRequests, &popped))
	require.Equal(t, []int64{17, 5, 3}, []int64{pushed, pushRequests, popped}, "lifetime totals: every count once")

	var samples []int
	rows, err := b.pool.Query(ctx, `SELECT sample_count FROM queen.system_metrics WHERE hostname = 'h1' ORDER BY bucket`)
	require.NoError(t, err)
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		samples = append(samples, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{4, 1}, samples, "one system row per minute, replaced by each write")
	var tree map[string]any
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT metrics FROM queen.system_metrics WHERE bucket = $1`, m0).Scan(&tree))
	for _, path := range [][]string{{"cpu", "user_us"}, {"memory", "rss_bytes"}, {"database", "pool_size"}, {"uptime_seconds"}} {
		node := tree
		for _, p := range path[:len(path)-1] {
			require.IsType(t, map[string]any{}, node[p], "%v", path)
			node = node[p].(map[string]any)
		}
		leaf, ok := node[path[len(path)-1]].(map[string]any)
		require.True(t, ok, "%v in %s", path, mustJSON(t, tree))
		require.ElementsMatch(t, []string{"avg", "min", "max", "last"}, keys(leaf))
	}
}

// Parked long-polls are a gauge: the minute's average over its samples,
// written for a queue even without traffic.
func TestCollectorAveragesParkedConsumers(t *testing.T) {
	t.Parallel()
	reg := metrics.New()
	b := setup(t, Config{Metrics: reg, Hostname: "h1"})
	ctx := t.Context()
	unpark := reg.Park("idle")
	require.NoError(t, b.svc.Tick(ctx, m0.Add(time.Second)))
	require.NoError(t, b.svc.Tick(ctx, m0.Add(2*time.Second)))
	unpark()
	require.NoError(t, b.svc.Tick(ctx, m0.Add(3*time.Second)))
	require.NoError(t, b.svc.Tick(ctx, m0.Add(4*time.Second)))
	require.NoError(t, b.svc.Tick(ctx, m0.Add(time.Minute)))
	require.Equal(t, []queueRow{{Bucket: m0, Queue: "idle", Parked: 0.5}}, b.queueRows("h1"))
}

// Two brokers on one database write their own rows; the lifetime totals
// add both up.
func TestCollectorBrokersWriteTheirOwnRows(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	regA, regB := metrics.New(), metrics.New()
	a := setup(t, Config{Pool: poolOn(t, url), Metrics: regA, Hostname: "a", Port: 1, PID: 1})
	b := setup(t, Config{Pool: poolOn(t, url), Metrics: regB, Hostname: "b", Port: 1, PID: 1})
	ctx := t.Context()
	push(regA, "q", 2)
	push(regB, "q", 5)
	require.NoError(t, a.svc.Flush(ctx, m0))
	require.NoError(t, b.svc.Flush(ctx, m0))
	require.NoError(t, a.svc.Flush(ctx, m0)) // a repeated flush adds nothing
	require.Equal(t, int64(2), a.workerRow("a", m0).PushMessages)
	require.Equal(t, int64(5), a.workerRow("b", m0).PushMessages)
	require.Equal(t, 2, a.count(`SELECT count(*) FROM queen.queue_lag_metrics WHERE queue_name = 'q' AND bucket = $1`, m0))
	require.Equal(t, 7, a.count(`SELECT push_messages FROM queen.worker_metrics_summary`))
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}
