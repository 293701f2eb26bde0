package handlers

import (
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
// cache (the counts from before a later push), and the loop goes on only
// while a client asked for the overview within the hour.
func TestKeepAdminWarmComputesTheOverviewPage(t *testing.T) {
	t.Parallel()
	b, _, _ := setupAnswerCache(t)
	b.push(item("kw", "p", "m0", 0), item("kw", "p", "m1", 1), item("kw", "p", "m2", 2))
	require.False(t, b.srv.dashboardInUse(time.Now()), "nobody asked")
	b.srv.warmAdminAtStart(t.Context(), 2)
	require.False(t, b.srv.dashboardInUse(time.Now()), "the broker's own computation is no client")

	b.push(item("kw", "p", "m3", 3))
	var o api.Overview
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &o)
	require.Equal(t, 3, o.Messages.Pending, "computed at start")
	var queues struct{ Queues []wireQueue }
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &queues)
	require.Len(t, queues.Queues, 1)
	require.Equal(t, 3, queues.Queues[0].Messages.Pending, "computed at start")

	require.True(t, b.srv.dashboardInUse(time.Now()))
	require.False(t, b.srv.dashboardInUse(time.Now().Add(adminKeepWarmFor+time.Minute)))
}
