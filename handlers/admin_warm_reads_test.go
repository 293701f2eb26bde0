package handlers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// TestWarmAdminPlansOnIdleConnections: WarmAdmin leaves the connections it
// asked for open and idle in the pool, each having run the dashboard's
// statements (its backend's last one is the last of them).
func TestWarmAdminPlansOnIdleConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The check's own connection, held so that WarmAdmin's are others.
	check, err := b.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer check.Release()
	require.NoError(t, b.srv.WarmAdmin(t.Context(), 3))
	require.GreaterOrEqual(t, b.pool.Stat().IdleConns(), int32(3))
	var warmed int
	require.NoError(t, check.QueryRow(t.Context(), `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND query LIKE '-- name: QueueConsumptionList%'`).Scan(&warmed))
	require.GreaterOrEqual(t, warmed, 3)
}

// TestKeepAdminWarmComputesTheOverviewPage: what the broker computes at
// start is what the overview page's first refresh gets from the answer
// cache (the counts from before a later push).
func TestKeepAdminWarmComputesTheOverviewPage(t *testing.T) {
	t.Parallel()
	b, _, _ := setupAnswerCache(t)
	b.push(item("kw", "p", "m0", 0), item("kw", "p", "m1", 1), item("kw", "p", "m2", 2))
	b.srv.warmAdminAtStart(t.Context(), 2)

	b.push(item("kw", "p", "m3", 3))
	require.Equal(t, 3, b.overview().Messages.Pending, "computed at start")
	var queues struct{ Queues []wireQueue }
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &queues)
	require.Len(t, queues.Queues, 1)
	require.Equal(t, 3, queues.Queues[0].Messages.Pending, "computed at start")
}

// TestKeepAdminWarmRecomputesTheOverviewUnasked: each tick computes the
// overview page's answers again though no client asked for the overview
// since the start, so a first refresh at any time is served the last
// tick's answer (it once went on only while a client asked within the
// hour, and a dashboard first opened more than 5 minutes after the start
// waited for the computation).
func TestKeepAdminWarmRecomputesTheOverviewUnasked(t *testing.T) {
	t.Parallel()
	b, cache, clk := setupAnswerCache(t)
	b.push(item("kw", "p", "m0", 0), item("kw", "p", "m1", 1), item("kw", "p", "m2", 2))
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { defer close(stopped); b.srv.keepAdminWarm(ctx, 2, ticks) }()
	ticks <- time.Now() // taken once the start's computation is done

	b.push(item("kw", "p", "m3", 3))
	clk.advance(2 * time.Second) // the start's answers are stale now
	ticks <- time.Now()
	ticks <- time.Now() // taken once the previous tick's step is done
	cancel()
	<-stopped
	cache.Wait()
	require.Equal(t, 4, b.overview().Messages.Pending, "recomputed at the tick")
}

// overview is the overview page's GET /resources/overview as a client asks.
func (b *testBundle) overview() api.Overview {
	var o api.Overview
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &o)
	return o
}
