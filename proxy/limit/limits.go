// Package limit holds a cluster's limits (its plan merged with its
// overrides) and enforces the per-process ones: request and message token
// buckets and parked long-poll slots, per cluster and per cell.
//
// Counters live in this process. Run one proxy per deployment, or accept
// that N proxies admit N times the rates (PROXY.md §7.4).
package limit

import (
	"encoding/json"
	"time"
)

// Limits are a cluster's effective limits. Zero means unlimited.
type Limits struct {
	ReqPerSec             int64
	ReqBurst              int64
	MsgsPerSec            int64
	MsgsBurst             int64
	MaxQueues             int64
	MaxPartitionsPerQueue int64
	MaxParkedPops         int64
	MaxPayloadBytes       int64
	MaxBatchItems         int64
	MaxRetainedBytes      int64
	MaxRetentionSeconds   int64
	MonthlyMsgsQuota      int64
}

// Merge applies a cluster's limit_overrides to its plan's limits, key by
// key: an absent key keeps the plan's value, JSON null means unlimited, a
// positive integer replaces it, and anything else keeps the plan's value.
// Overrides that are not a JSON object change nothing.
func Merge(plan Limits, overrides json.RawMessage) Limits {
	var doc map[string]json.RawMessage
	if json.Unmarshal(overrides, &doc) != nil {
		return plan
	}
	out := plan
	for name, field := range out.fields() {
		raw, ok := doc[name]
		if !ok {
			continue
		}
		if string(raw) == "null" {
			*field = 0
			continue
		}
		var n int64
		if json.Unmarshal(raw, &n) == nil && n > 0 {
			*field = n
		}
	}
	return out
}

// fields maps the plan column names to l's fields.
func (l *Limits) fields() map[string]*int64 {
	return map[string]*int64{
		"max_req_per_sec":          &l.ReqPerSec,
		"req_burst":                &l.ReqBurst,
		"max_msgs_per_sec":         &l.MsgsPerSec,
		"msgs_burst":               &l.MsgsBurst,
		"max_queues":               &l.MaxQueues,
		"max_partitions_per_queue": &l.MaxPartitionsPerQueue,
		"max_parked_pops":          &l.MaxParkedPops,
		"max_payload_bytes":        &l.MaxPayloadBytes,
		"max_batch_items":          &l.MaxBatchItems,
		"max_retained_bytes":       &l.MaxRetainedBytes,
		"max_retention_seconds":    &l.MaxRetentionSeconds,
		"monthly_msgs_quota":       &l.MonthlyMsgsQuota,
	}
}

// bucket is a token bucket: rate tokens a second, up to burst.
type bucket struct {
	rate, burst float64
	tokens      float64
	at          time.Time
}

func newBucket(rate, burst int64, now time.Time) *bucket {
	if burst < rate {
		burst = rate // a burst below the rate would never admit a second's worth
	}
	return &bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), at: now}
}

// take removes n tokens if it can; otherwise it removes none and says how
// long until n would be there (never less than the wait for one more).
func (b *bucket) take(n float64, now time.Time) (bool, time.Duration) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.at = now
	}
	if n <= b.tokens {
		b.tokens -= n
		return true, 0
	}
	need := min(n, b.burst) - b.tokens
	return false, time.Duration(need / b.rate * float64(time.Second))
}
