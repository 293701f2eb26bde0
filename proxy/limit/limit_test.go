package limit_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/limit"
)

func TestMerge(t *testing.T) {
	t.Parallel()
	plan := limit.Limits{ReqPerSec: 5, ReqBurst: 25, MaxQueues: 20, MaxBatchItems: 1000}
	tests := []struct {
		overrides string
		want      limit.Limits
	}{
		{`{}`, plan},
		{`{"max_req_per_sec": 1}`, limit.Limits{ReqPerSec: 1, ReqBurst: 25, MaxQueues: 20, MaxBatchItems: 1000}},
		{`{"max_queues": null}`, limit.Limits{ReqPerSec: 5, ReqBurst: 25, MaxBatchItems: 1000}},
		{`{"max_queues": "many", "req_burst": -1, "max_batch_items": 1.5}`, plan},
		{`{"unknown": 3, "monthly_msgs_quota": 100}`, limit.Limits{ReqPerSec: 5, ReqBurst: 25, MaxQueues: 20, MaxBatchItems: 1000, MonthlyMsgsQuota: 100}},
		{`[1]`, plan},
		{``, plan},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, limit.Merge(plan, json.RawMessage(tt.overrides)), tt.overrides)
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Unix(1_700_000_000, 0)} }
func lims(rate, burst int64) limit.Limits {
	return limit.Limits{ReqPerSec: rate, ReqBurst: burst, MsgsPerSec: rate, MsgsBurst: burst}
}

func TestRequestBucket(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := limit.New(c.now)
	lim := lims(1, 2)
	for range 2 {
		ok, _ := l.Request("a", lim)
		require.True(t, ok)
	}
	ok, retry := l.Request("a", lim)
	require.False(t, ok)
	require.Equal(t, time.Second, retry)
	ok, _ = l.Request("b", lim)
	require.True(t, ok, "clusters have their own buckets")
	c.add(time.Second)
	ok, _ = l.Request("a", lim)
	require.True(t, ok, "one token a second")
	ok, _ = l.Request("a", limit.Limits{})
	require.True(t, ok, "no rate is unlimited")
}

func TestMessageBucket(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := limit.New(c.now)
	lim := lims(10, 20)
	ok, _ := l.Messages("a", lim, 20)
	require.True(t, ok)
	ok, retry := l.Messages("a", lim, 5)
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, retry)
	c.add(500 * time.Millisecond)
	ok, _ = l.Messages("a", lim, 5)
	require.True(t, ok)
	ok, retry = l.Messages("a", lim, 100)
	require.False(t, ok, "more than the burst never fits")
	require.Equal(t, 2*time.Second, retry, "the wait is for a full bucket")
}

func TestPark(t *testing.T) {
	t.Parallel()
	l := limit.New(nil)
	lim := limit.Limits{MaxParkedPops: 1}
	release, refused := l.Park("a", "cell", lim, 2, false)
	require.Equal(t, limit.ScopeNone, refused)
	_, refused = l.Park("a", "cell", lim, 2, false)
	require.Equal(t, limit.ScopeCluster, refused)
	other, refused := l.Park("b", "cell", lim, 2, false)
	require.Equal(t, limit.ScopeNone, refused)
	_, refused = l.Park("c", "cell", lim, 2, false)
	require.Equal(t, limit.ScopeCell, refused)
	forced, refused := l.Park("c", "cell", lim, 2, true)
	require.Equal(t, limit.ScopeCell, refused, "shadow mode takes the slot and says what it would have refused")
	require.EqualValues(t, 3, l.Parked("cell"))
	forced()
	other()
	release()
	release()
	require.EqualValues(t, 0, l.Parked("cell"))
	_, refused = l.Park("a", "cell", lim, 2, false)
	require.Equal(t, limit.ScopeNone, refused, "a released slot is free again")
}
