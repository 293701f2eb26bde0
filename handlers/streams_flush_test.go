package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// The two cycle shapes of the streaming SDKs that close a window: the
// runner's regular cycle (delete the window, emit its total, open the next
// window, ack the message that moved the clock) and the idle flush (delete
// the window, emit its total, no ack), both computed from the same read of
// the state, as when the flush timer fires while a batch is being
// processed.
type windowCycles struct {
	qid, pid, group string
}

func tumblingKey(w int) string { return fmt.Sprintf("tumb:60\u001f%04d\u001fall", w) }

func tumblingValue(w, acc int) map[string]any {
	return map[string]any{"acc": acc, "windowStart": w * 60000, "windowEnd": (w + 1) * 60000}
}

func tumblingEmit(w, sum int) client.PushItem {
	return item("totals", "", "", map[string]any{"window": w, "sum": sum})
}

// regular closes window w-1 (holding sum) and opens window w with acc.
func (c windowCycles) regular(w, sum, acc int, txID, leaseID string) map[string]any {
	ops := []any{map[string]any{"type": "upsert", "key": tumblingKey(w), "value": tumblingValue(w, acc)}}
	var emits []any
	if w > 0 {
		ops = append([]any{map[string]any{"type": "delete", "key": tumblingKey(w - 1)}}, ops...)
		emits = append(emits, tumblingEmit(w-1, sum))
	}
	return map[string]any{
		"query_id": c.qid, "partition_id": c.pid, "consumer_group": c.group,
		"state_ops": ops, "push_items": emits,
		"ack": map[string]any{"transactionId": txID, "leaseId": leaseID, "status": "completed", "count": 1},
	}
}

// flush closes the given windows (with their sums), as the idle flush does.
func (c windowCycles) flush(sums map[int]int) map[string]any {
	ops, emits := []any{}, []any{}
	for _, w := range slices.Sorted(maps.Keys(sums)) {
		ops = append(ops, map[string]any{"type": "delete", "key": tumblingKey(w)})
		emits = append(emits, tumblingEmit(w, sums[w]))
	}
	return map[string]any{
		"query_id": c.qid, "partition_id": c.pid, "consumer_group": c.group,
		"state_ops": ops, "push_items": emits, "ack": nil,
	}
}

type skippedResp struct {
	cycleResp
	Skipped string `json:"skipped"`
}

// postCycle sends a cycle without the test's require (it runs in a
// goroutine); the caller checks the outcome.
func (b *testBundle) postCycle(body map[string]any) (skippedResp, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return skippedResp{}, err
	}
	resp, err := http.Post(b.url+"/streams/v1/cycle", "application/json", bytes.NewReader(raw))
	if err != nil {
		return skippedResp{}, err
	}
	defer resp.Body.Close()
	var r skippedResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("HTTP %d: %s", resp.StatusCode, r.Error)
	}
	return r, nil
}

// sinkWindows reads the totals the sink holds, by window.
func (b *testBundle) sinkWindows() map[int][]int {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT m.payload FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = 'totals' ORDER BY m.seq`)
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[int][]int{}
	for rows.Next() {
		var v struct{ Window, Sum int }
		require.NoError(b.t, rows.Scan(&v))
		out[v.Window] = append(out[v.Window], v.Sum)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// A flush and a regular cycle that close the same window from the same read
// reach the broker at the same moment, round after round, in whatever order
// the scheduler makes of them: every window reaches the sink exactly once,
// the totals add up to what was pushed, and the state ends empty.
func TestStreamFlushAndRegularCycleCloseAWindowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := windowCycles{qid: b.registerQuery("totals", "orders", "totals", "h"), group: "streams.totals"}
	const rounds = 40
	amount := func(w int) int { return w + 1 }
	reasons := map[string]int{}
	want := 0
	for w := range rounds {
		tx := fmt.Sprintf("m%d", w)
		b.push(item("orders", "", tx, map[string]any{"amount": amount(w)}))
		want += amount(w)
		p := b.pop("/api/v1/pop/queue/orders?batch=10&consumerGroup=" + c.group)
		require.Len(t, p.Messages, 1)
		c.pid = p.PartitionID
		if w == 0 {
			require.True(t, b.cycle(c.regular(0, 0, amount(0), tx, p.LeaseID)).Success)
			continue
		}
		// Both computed from the state as it is now: window w-1 holds
		// amount(w-1).
		regular := c.regular(w, amount(w-1), amount(w), tx, p.LeaseID)
		flush := c.flush(map[int]int{w - 1: amount(w - 1)})
		start := make(chan struct{})
		type result struct {
			r   skippedResp
			err error
		}
		regularDone, flushDone := make(chan result, 1), make(chan result, 1)
		go func() { <-start; r, err := b.postCycle(regular); regularDone <- result{r, err} }()
		go func() { <-start; r, err := b.postCycle(flush); flushDone <- result{r, err} }()
		close(start)
		rr, fr := <-regularDone, <-flushDone
		require.NoError(t, rr.err)
		require.NoError(t, fr.err)
		require.True(t, rr.r.Success, "round %d: the regular cycle holds the lease: %s", w, rr.r.Error)
		require.Empty(t, rr.r.Skipped)
		require.Len(t, rr.r.PushResults, 1)
		require.True(t, fr.r.Success, "round %d: %s", w, fr.r.Error)
		require.Contains(t, []string{"lease_held", "shard_busy", "already_closed"}, fr.r.Skipped,
			"round %d: the flush must not close the window the regular cycle closes", w)
		require.Empty(t, fr.r.PushResults)
		require.Zero(t, fr.r.StateOpsApplied)
		reasons[fr.r.Skipped]++
	}
	t.Logf("flushes skipped: %v", reasons)

	// The partition goes quiet: the next flush closes the last window.
	last := b.cycle(c.flush(map[int]int{rounds - 1: amount(rounds - 1)}))
	require.True(t, last.Success, last.Error)
	require.Len(t, last.PushResults, 1)

	sink := b.sinkWindows()
	require.Len(t, sink, rounds)
	got := 0
	for w := range rounds {
		require.Equal(t, []int{amount(w)}, sink[w], "window %d emitted once with its total", w)
		got += sink[w][0]
	}
	require.Equal(t, want, got)
	require.Empty(t, b.state(c.qid, c.pid, nil))
	require.Nil(t, b.pop("/api/v1/pop/queue/orders?consumerGroup="+c.group), "every message acked once")
}

// Each reason a flush is skipped, one at a time, and the flushes that still
// apply: a skipped flush commits nothing and leaves the window for the next
// one.
func TestStreamFlushSkipRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := windowCycles{qid: b.registerQuery("totals", "orders", "totals", "h"), group: "streams.totals"}
	flush := func(sums map[int]int) skippedResp {
		t.Helper()
		var r skippedResp
		b.doJSON("POST", "/streams/v1/cycle", c.flush(sums), http.StatusOK, &r)
		require.True(t, r.Success, r.Error)
		return r
	}
	unchanged := func(reason string, sums map[int]int) {
		t.Helper()
		before := b.snapshot("totals")
		r := flush(sums)
		require.Equal(t, reason, r.Skipped)
		require.Zero(t, r.StateOpsApplied)
		require.Empty(t, r.PushResults)
		require.Nil(t, r.AckResult)
		require.Equal(t, before, b.snapshot("totals"), "a skipped flush commits nothing")
	}

	// Window 0 opened by m0; m1 is popped: the lease is live.
	b.push(item("orders", "", "m0", 1))
	p := b.pop("/api/v1/pop/queue/orders?consumerGroup=" + c.group)
	c.pid = p.PartitionID
	require.True(t, b.cycle(c.regular(0, 0, 5, "m0", p.LeaseID)).Success)
	b.push(item("orders", "", "m1", 2))
	p = b.pop("/api/v1/pop/queue/orders?consumerGroup=" + c.group)
	unchanged("lease_held", map[int]int{0: 5})

	// The regular cycle closes window 0; the flush computed before it is
	// now stale.
	require.True(t, b.cycle(c.regular(1, 5, 7, "m1", p.LeaseID)).Success)
	unchanged("already_closed", map[int]int{0: 5})
	// A flush of an open and a closed window is skipped whole; the open one
	// is closed by the next flush.
	unchanged("already_closed", map[int]int{0: 5, 1: 7})

	// Another cycle of the shard holds its lock.
	tx, err := b.pool.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, c.qid, c.pid)
	require.NoError(t, err)
	unchanged("shard_busy", map[int]int{1: 7})
	require.NoError(t, tx.Rollback(t.Context()))

	// Nothing in the way: the flush closes window 1.
	r := flush(map[int]int{1: 7})
	require.Empty(t, r.Skipped)
	require.Equal(t, 1, r.StateOpsApplied)
	require.Len(t, r.PushResults, 1)
	require.Empty(t, b.state(c.qid, c.pid, nil))

	// A gate's partial ack keeps the lease: flushes wait for it to end.
	require.True(t, b.cycle(map[string]any{
		"query_id": c.qid, "partition_id": c.pid, "consumer_group": c.group,
		"state_ops": []any{map[string]any{"type": "upsert", "key": tumblingKey(2), "value": tumblingValue(2, 3)}},
	}).Success, "an ack-less cycle that deletes nothing is applied as before, lease or not")
	b.push(item("orders", "", "m2", 3), item("orders", "", "m3", 4))
	p = b.pop("/api/v1/pop/queue/orders?batch=2&consumerGroup=" + c.group)
	require.Len(t, p.Messages, 2)
	require.True(t, b.cycle(map[string]any{
		"query_id": c.qid, "partition_id": c.pid, "consumer_group": c.group,
		"ack": map[string]any{"transactionId": "m2", "leaseId": p.LeaseID, "count": 1}, "release_lease": false,
	}).Success)
	unchanged("lease_held", map[int]int{2: 3})
	b.expireLeases()
	r = flush(map[int]int{2: 3})
	require.Empty(t, r.Skipped)
	require.Equal(t, map[int][]int{0: {5}, 1: {7}, 2: {3}}, b.sinkWindows())
}
