package console

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/limit"
)

// overview is GET /api/console/overview: the cluster, its plan's limits
// and features, the caller's role, and this month's messages against the
// monthly quota.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, req Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	month, err := c.q.ClusterMonthMsgs(ctx, req.Cluster.ID)
	if err != nil {
		c.dbError(w, err)
		return
	}
	var quota *int64
	if month.Quota > 0 {
		quota = &month.Quota
	}
	features := []string{}
	for f, on := range req.Cluster.Features {
		if on {
			features = append(features, f)
		}
	}
	sort.Strings(features)
	cl := req.Cluster
	writeJSON(w, http.StatusOK, map[string]any{
		"cluster": map[string]any{"id": cl.ID.String(), "slug": cl.Slug, "status": cl.Status, "plan": cl.Plan,
			"tenant_id": cl.TenantID.String()},
		"user":     map[string]any{"id": req.User.ID.String(), "email": req.User.Email, "operator": req.Operator},
		"role":     req.Role,
		"limits":   limitsView(cl.Limits),
		"features": features,
		"month":    map[string]any{"msgs": month.Msgs, "quota": quota},
	})
}

// limitsView names the limits as the plan columns do; null is unlimited.
func limitsView(l limit.Limits) map[string]*int64 {
	v := func(n int64) *int64 {
		if n == 0 {
			return nil
		}
		return &n
	}
	return map[string]*int64{
		"max_req_per_sec": v(l.ReqPerSec), "req_burst": v(l.ReqBurst), "max_msgs_per_sec": v(l.MsgsPerSec),
		"msgs_burst": v(l.MsgsBurst), "max_queues": v(l.MaxQueues), "max_partitions_per_queue": v(l.MaxPartitionsPerQueue),
		"max_parked_pops": v(l.MaxParkedPops), "max_payload_bytes": v(l.MaxPayloadBytes), "max_batch_items": v(l.MaxBatchItems),
		"max_retained_bytes": v(l.MaxRetainedBytes), "max_retention_seconds": v(l.MaxRetentionSeconds),
		"monthly_msgs_quota": v(l.MonthlyMsgsQuota),
	}
}

type usagePoint struct {
	At       string `json:"at"`
	OpClass  string `json:"op_class"`
	Msgs     int64  `json:"msgs"`
	Reqs     int64  `json:"reqs"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
}

// usage is GET /api/console/usage?hours=N (default 24, clamped to 1-168):
// the cluster's metered usage per class of operation, in buckets of a
// minute (up to 3 hours), 5 minutes (up to a day) or an hour.
func (c *Console) usage(w http.ResponseWriter, r *http.Request, req Request) {
	hours := 24
	if v := r.URL.Query().Get("hours"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			hours = n
		}
	}
	hours = max(1, min(168, hours))
	bucket := 3600
	switch {
	case hours <= 3:
		bucket = 60
	case hours <= 24:
		bucket = 300
	}
	since := c.cfg.NowFunc().UTC().Add(-time.Duration(hours) * time.Hour).Truncate(time.Duration(bucket) * time.Second)
	ctx, cancel := c.ctx(r)
	defer cancel()
	rows, err := c.q.UsageSeries(ctx, pxdb.UsageSeriesParams{BucketSeconds: int32(bucket), ClusterID: req.Cluster.ID, Since: since})
	if err != nil {
		c.dbError(w, err)
		return
	}
	series := make([]usagePoint, 0, len(rows))
	for _, p := range rows {
		series = append(series, usagePoint{At: ts(p.At), OpClass: p.OpClass, Msgs: p.Msgs, Reqs: p.Reqs, BytesIn: p.BytesIn, BytesOut: p.BytesOut})
	}
	writeJSON(w, http.StatusOK, map[string]any{"hours": hours, "bucket_seconds": bucket, "since": ts(since), "series": series})
}
