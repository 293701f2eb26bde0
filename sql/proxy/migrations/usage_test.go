package migrations_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// applyBatch adds one batch of one row and says whether it was applied.
func (p *pxdb) applyBatch(batch uuid.UUID, cluster uuid.UUID, minute time.Time, class string, msgs int64) bool {
	p.t.Helper()
	var applied bool
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(),
		`SELECT queen_proxy.apply_usage_batch($1, 90, ARRAY[$2::uuid], ARRAY[$3::timestamptz], ARRAY[$4::text],
		    ARRAY[$5::bigint], ARRAY[1::bigint], ARRAY[10::bigint], ARRAY[20::bigint])`,
		batch, cluster, minute, class, msgs).Scan(&applied))
	return applied
}

func (p *pxdb) minuteMsgs(cluster uuid.UUID, minute time.Time, class string) (msgs, reqs int64) {
	p.t.Helper()
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(),
		`SELECT coalesce(sum(msgs), 0), coalesce(sum(reqs), 0) FROM queen_proxy.usage_minutes
		 WHERE cluster_id = $1 AND minute = $2 AND op_class = $3`, cluster, minute, class).Scan(&msgs, &reqs))
	return msgs, reqs
}

// A batch adds once: the same id again is a no-op, another id adds to the
// same row. Minutes before the retention horizon and rows of clusters that
// are gone are dropped.
func TestApplyUsageBatchOnce(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	minute := time.Now().UTC().Truncate(time.Minute)
	first := uuid.New()
	require.True(t, p.applyBatch(first, b.ClusterID, minute.Add(12*time.Second), "push", 5))
	require.False(t, p.applyBatch(first, b.ClusterID, minute, "push", 5), "a replayed batch is not counted twice")
	require.True(t, p.applyBatch(uuid.New(), b.ClusterID, minute, "push", 3))
	msgs, reqs := p.minuteMsgs(b.ClusterID, minute, "push")
	require.EqualValues(t, 8, msgs)
	require.EqualValues(t, 2, reqs)

	old := minute.AddDate(0, 0, -100)
	require.True(t, p.applyBatch(uuid.New(), b.ClusterID, old, "push", 7))
	msgs, _ = p.minuteMsgs(b.ClusterID, old, "push")
	require.Zero(t, msgs, "a minute before the horizon would make a rolled-up day partial")
	require.True(t, p.applyBatch(uuid.New(), uuid.New(), minute, "push", 7), "a gone cluster's rows are dropped, not an error")
}

// Pruning removes whole UTC days only, after rolling them up.
func TestPruneWholeDays(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, at := range []time.Time{today.AddDate(0, 0, -3).Add(time.Hour), today.AddDate(0, 0, -3).Add(23 * time.Hour), today.AddDate(0, 0, -1)} {
		p.exec(`INSERT INTO queen_proxy.usage_minutes (cluster_id, minute, op_class, msgs, reqs) VALUES ($1, $2, 'push', 4, 1)`, b.ClusterID, at)
	}
	var pruned int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT queen_proxy.prune_usage_minutes(2)`).Scan(&pruned))
	require.Equal(t, 2, pruned, "day -3 goes whole; day -1 stays")
	var dayMsgs int64
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT msgs FROM queen_proxy.usage_days WHERE cluster_id = $1 AND day = $2`,
		b.ClusterID, today.AddDate(0, 0, -3)).Scan(&dayMsgs))
	require.EqualValues(t, 8, dayMsgs, "rolled up before it went")
	p.exec(`SELECT queen_proxy.rollup_usage_days(current_date)`)
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT msgs FROM queen_proxy.usage_days WHERE cluster_id = $1 AND day = $2`,
		b.ClusterID, today.AddDate(0, 0, -3)).Scan(&dayMsgs))
	require.EqualValues(t, 8, dayMsgs, "a later rollup leaves a pruned day alone")
}

// The monthly quota: a warning at the threshold and a block at the quota,
// each emitted once; the block sets the cluster push_blocked (actor system)
// and is lifted when the quota no longer applies.
func TestMonthlyQuota(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"monthly_msgs_quota": 10}')`, b.ClusterID)
	minute := time.Now().UTC().Truncate(time.Minute)
	check := func() int {
		t.Helper()
		var changed int
		require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT queen_proxy.check_monthly_quotas(ARRAY[$1::uuid], 80)`, b.ClusterID).Scan(&changed))
		return changed
	}
	outbox := func(kind string) int {
		t.Helper()
		var n int
		require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.outbox WHERE kind = $1 AND payload->>'cluster_id' = $2`,
			kind, b.ClusterID.String()).Scan(&n))
		return n
	}
	status := func() string {
		t.Helper()
		var s string
		require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT status FROM queen_proxy.clusters WHERE id = $1`, b.ClusterID).Scan(&s))
		return s
	}

	p.applyBatch(uuid.New(), b.ClusterID, minute, "push", 7)
	require.Zero(t, check())
	require.Zero(t, outbox("cluster_monthly_quota_warning"), "70% is under the warning")
	p.applyBatch(uuid.New(), b.ClusterID, minute, "push", 1)
	require.Zero(t, check())
	require.Zero(t, check())
	require.Equal(t, 1, outbox("cluster_monthly_quota_warning"), "80%: one warning, whatever the number of checks")
	require.Equal(t, "active", status())

	before := p.lastOp()
	p.applyBatch(uuid.New(), b.ClusterID, minute, "push", 2)
	require.Equal(t, 1, check())
	require.Zero(t, check())
	require.Equal(t, 1, outbox("cluster_monthly_quota_blocked"))
	require.Equal(t, "push_blocked", status())
	require.Equal(t, []op{{Action: "cluster_status_changed", Actor: "system", Target: ptr(b.ClusterID.String()), Cluster: &b.ClusterID,
		Meta: map[string]any{"status": "push_blocked", "previous": "active", "reason": "monthly_quota"}}}, p.opsAfter(before))

	// Raising the quota lifts the block on the next check, of any proxy:
	// blocked clusters are checked even when not metered.
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"monthly_msgs_quota": null}')`, b.ClusterID)
	before = p.lastOp()
	var changed int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT queen_proxy.check_monthly_quotas(NULL, 80)`).Scan(&changed))
	require.Equal(t, 1, changed)
	require.Equal(t, "active", status())
	require.Equal(t, []op{{Action: "cluster_status_changed", Actor: "system", Target: ptr(b.ClusterID.String()), Cluster: &b.ClusterID,
		Meta: map[string]any{"status": "active", "previous": "push_blocked", "reason": "monthly_quota_lifted"}}}, p.opsAfter(before))

	// Back over a lower quota within the month: blocked again, announced again.
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"monthly_msgs_quota": 5}')`, b.ClusterID)
	require.Equal(t, 1, check())
	require.Equal(t, "push_blocked", status())
	require.Equal(t, 2, outbox("cluster_monthly_quota_blocked"))
}
