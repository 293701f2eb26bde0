package handlers

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/aggcache"
)

// testClock is the answer cache's clock in these tests: it moves when the
// test says, and by a millisecond each time it is read, so that every
// computation costs something.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// setupAnswerCache is a broker whose answer cache keeps every answer (as a
// database of 100,000 partitions makes it keep the aggregates), on a clock
// the test moves.
func setupAnswerCache(t *testing.T) (*testBundle, *aggcache.Cache, *testClock) {
	t.Helper()
	clk := &testClock{now: time.Now()}
	cache := aggcache.New(aggcache.Config{MinCost: time.Nanosecond, Fresh: time.Second, MaxAge: 30 * time.Second, NowFunc: clk.Now})
	t.Cleanup(cache.Wait)
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.AnswerCache = cache }})
	return b, cache, clk
}

// TestAnswerCacheServesThePreviousAnswerThenTheRefreshedOne: after an ack
// (the data plane does not clear the cache) a poll still shows the counts
// from before it, starts one recomputation when the answer is stale, and
// the poll after it shows the ack.
func TestAnswerCacheServesThePreviousAnswerThenTheRefreshedOne(t *testing.T) {
	t.Parallel()
	b, cache, clk := setupAnswerCache(t)
	b.push(item("ac", "p", "m0", 0), item("ac", "p", "m1", 1), item("ac", "p", "m2", 2))
	overview := func() api.Overview {
		var o api.Overview
		b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &o)
		return o
	}
	require.Equal(t, wireCounts{Total: 3, Pending: 3}, b.queueCountsOf("ac").Messages)
	require.Equal(t, 3, overview().Messages.Pending)

	p := b.pop("/api/v1/pop/queue/ac/partition/p?batch=1")
	require.True(t, b.ack("m0", p.Messages[0].PartitionID, "completed", "", p.LeaseID).Success)
	require.Equal(t, wireCounts{Total: 3, Pending: 3}, b.queueCountsOf("ac").Messages, "fresh: the answer from before the ack")
	require.Equal(t, 3, overview().Messages.Pending)

	clk.advance(2 * time.Second)
	require.Equal(t, wireCounts{Total: 3, Pending: 3}, b.queueCountsOf("ac").Messages, "stale: served, and recomputed behind")
	require.Equal(t, 3, overview().Messages.Pending)
	cache.Wait()
	require.Equal(t, wireCounts{Total: 3, Pending: 2}, b.queueCountsOf("ac").Messages)
	o := overview()
	require.Equal(t, 2, o.Messages.Pending)
	require.Equal(t, 1, o.Messages.Completed)

	// Past MaxAge nothing stale is served.
	p = b.pop("/api/v1/pop/queue/ac/partition/p?batch=1")
	require.True(t, b.ack("m1", p.Messages[0].PartitionID, "completed", "", p.LeaseID).Success)
	clk.advance(time.Minute)
	require.Equal(t, wireCounts{Total: 3, Pending: 1}, b.queueCountsOf("ac").Messages)
}

// TestAnswerCacheClearedByAdminChanges: a change made through the admin
// routes shows in the very next answer.
func TestAnswerCacheClearedByAdminChanges(t *testing.T) {
	t.Parallel()
	b, _, _ := setupAnswerCache(t)
	out := b.push(item("acd", "p", "m0", 0), item("acd", "p", "m1", 1), item("acd", "p", "m2", 2))
	b.push(item("acd2", "p", "x", 0))
	require.Equal(t, wireCounts{Total: 3, Pending: 3}, b.queueCountsOf("acd").Messages)

	var r struct{ Success bool }
	b.doJSON("DELETE", "/api/v1/messages/"+out[0].PartitionID+"/m1", nil, http.StatusOK, &r)
	require.True(t, r.Success)
	require.Equal(t, wireCounts{Total: 2, Pending: 2}, b.queueCountsOf("acd").Messages)

	b.doJSON("POST", "/api/v1/consumer-groups/__QUEUE_MODE__/queues/acd/seek", map[string]any{"toEnd": true}, http.StatusOK, nil)
	require.Equal(t, wireCounts{Total: 2, Pending: 0}, b.queueCountsOf("acd").Messages)

	b.doJSON("DELETE", "/api/v1/resources/queues/acd2", nil, http.StatusOK, nil)
	var list struct{ Queues []wireQueue }
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &list)
	for _, q := range list.Queues {
		require.NotEqual(t, "acd2", q.Name)
	}
}

// TestAnswerChangingNamesOperations: every operation that clears the cache
// exists (a renamed operation would silently stop clearing it).
func TestAnswerChangingNamesOperations(t *testing.T) {
	t.Parallel()
	iface := reflect.TypeFor[api.StrictServerInterface]()
	for name := range answerChanging {
		_, ok := iface.MethodByName(name)
		require.True(t, ok, "%s is not an operation", name)
	}
}

func TestWindowKey(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	now := time.Now().UTC()
	at := func(d time.Duration) *string { return str(now.Add(d).Format(time.RFC3339Nano)) }
	require.Equal(t, "last default", windowKey(nil, nil))
	require.Equal(t, "last 1h0m0s", windowKey(at(-time.Hour), nil))
	require.Equal(t, "last 1h0m0s", windowKey(at(-time.Hour-2*time.Second), at(-2*time.Second)), "a window ending about now")
	old := windowKey(at(-3*time.Hour), at(-2*time.Hour))
	require.Contains(t, old, "from=")
	require.Contains(t, windowKey(str("junk"), nil), `from="junk"`)
}

// TestAnswerCacheKeepsNoHugeLaggingList: a /lagging answer of more than
// 1,000 rows is computed for its request and never kept.
func TestAnswerCacheKeepsNoHugeLaggingList(t *testing.T) {
	t.Parallel()
	b, _, clk := setupAnswerCache(t)
	var items []client.PushItem
	for i := range cachedPageRows + 2 {
		items = append(items, item("lag", "p"+strconv.Itoa(i), "m", i))
	}
	b.push(items[:cachedPageRows]...)
	b.push(items[cachedPageRows:]...)
	// The queue-mode group reads p0: it lags on the other partitions.
	consume := func(partition string) {
		t.Helper()
		p := b.pop("/api/v1/pop/queue/lag/partition/" + partition)
		require.True(t, b.ack("m", p.Messages[0].PartitionID, "completed", "", p.LeaseID).Success)
	}
	consume("p0")
	var rows []json.RawMessage
	// minLagSeconds=0 lists what waits for more than a whole second.
	require.Eventually(t, func() bool {
		clk.advance(time.Minute) // nothing kept from an earlier poll is served
		b.doJSON("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil, http.StatusOK, &rows)
		return len(rows) == cachedPageRows+1
	}, 30*time.Second, 50*time.Millisecond)

	consume("p1")
	b.doJSON("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil, http.StatusOK, &rows)
	require.Len(t, rows, cachedPageRows, "computed live, within the fresh second of the answer before")
}
