package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The watch re-analyzes a table whose statistics were recorded empty and
// then refilled, leaves fresh and small tables alone, and runs on one
// broker at a time.
func TestStatsWatchReanalyzesTablesRecordedEmpty(t *testing.T) {
	b := setup(t, Config{})
	ctx := t.Context()
	part := b.partition(b.queue("stats", queueOpts{}), "P")
	reltuples := func() float64 {
		var n float64
		require.NoError(t, b.pool.QueryRow(ctx,
			"SELECT reltuples FROM pg_class WHERE oid = 'queen.messages'::regclass").Scan(&n))
		return n
	}
	liveAtLeast := func(n int) func() bool {
		return func() bool {
			return b.count("SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'queen.messages'::regclass") >= n
		}
	}

	b.messages(part, 5000, t0)
	b.exec("ANALYZE queen.messages")
	b.exec("DELETE FROM queen.messages")
	b.exec("ANALYZE queen.messages")
	require.Zero(t, reltuples(), "the statistics record the empty moment")
	tables, err := b.svc.RunStatsWatch(ctx)
	require.NoError(t, err)
	require.Empty(t, tables, "an empty table is what its statistics say")

	b.messages(part, 5000, t0)
	eventually(t, "the live-row count of the refill", liveAtLeast(5000))

	// Another broker's watch is running: this one leaves it alone.
	other, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = other.Exec(ctx, "SELECT pg_advisory_xact_lock(8175552223618818353)")
	require.NoError(t, err)
	tables, err = b.svc.RunStatsWatch(ctx)
	require.NoError(t, err)
	require.Empty(t, tables)
	require.NoError(t, other.Rollback(ctx))
	require.Zero(t, reltuples())

	tables, err = b.svc.RunStatsWatch(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"messages"}, tables)
	require.InDelta(t, 5000, reltuples(), 500)

	tables, err = b.svc.RunStatsWatch(ctx)
	require.NoError(t, err)
	require.Empty(t, tables, "fresh statistics are left alone")
}
