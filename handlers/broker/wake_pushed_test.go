package broker

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// watched is a pop parked by PopStart, as a held long-poll holds it, with
// the number of times it was told it has something to do.
type watched struct {
	p     *ParkedPop
	calls atomic.Int32
}

// parkWatched parks a long-poll whose first look finds nothing.
func (tb *testBundle) parkWatched(req PopRequest) *watched {
	tb.t.Helper()
	timeout := time.Minute
	req.Wait, req.Timeout = true, &timeout
	res, p, err := tb.b.PopStart(tb.t.Context(), req)
	require.NoError(tb.t, err)
	require.Nil(tb.t, res)
	require.NotNil(tb.t, p)
	w := &watched{p: p}
	p.Watch(func() { w.calls.Add(1) })
	tb.t.Cleanup(p.Cancel)
	return w
}

func woken(ws []*watched) (out []*watched) {
	for _, w := range ws {
		if w.calls.Load() > 0 {
			out = append(out, w)
		}
	}
	return out
}

// A push wakes as many autoAck pops of a key as it filled partitions; pops
// without autoAck are all woken, as before.
func TestPushWakesAsManyAutoAckPopsAsPartitionsFilled(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "fan")
	ctx := t.Context()

	auto := PopRequest{Queue: "fan", Group: "g", AutoAck: true, Batch: 10}
	var autos []*watched
	for range 6 {
		autos = append(autos, tb.parkWatched(auto))
	}
	leased := []*watched{tb.parkWatched(PopRequest{Queue: "fan", Group: "h"}), tb.parkWatched(PopRequest{Queue: "fan", Group: "h"})}

	// The announcement is made before Push returns: the counts are exact.
	tb.push(item("fan", "p1", "m1", ""), item("fan", "p1", "m2", ""))
	require.Len(t, woken(autos), 1, "one partition filled: one autoAck pop woken")
	require.Len(t, woken(leased), 2, "pops without autoAck are all woken")

	first := woken(autos)[0]
	res, done, err := first.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Len(t, res.Messages, 2)

	tb.push(item("fan", "p1", "m3", ""), item("fan", "p2", "m4", ""), item("fan", "p3", "m5", ""))
	require.Len(t, woken(autos), 1+3, "three partitions filled: three more woken")
}

// The pops a push did not wake are not forgotten: a pop that finds more
// than its batch wakes the next one, with no re-poll (the interval is an
// hour).
func TestAutoAckPopLeavingMessagesWakesTheNext(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "chain")

	req := PopRequest{Queue: "chain", Group: "g", AutoAck: true, Batch: 1}
	a, b, c := tb.parkPop(req), tb.parkPop(req), tb.parkPop(req)
	tb.waitParked(req, 3)
	tb.push(item("chain", "p1", "m1", ""), item("chain", "p1", "m2", ""), item("chain", "p1", "m3", ""))

	var got []string
	for _, ch := range []<-chan *PopResult{a, b, c} {
		select {
		case r := <-ch:
			require.NotNil(t, r)
			require.Len(t, r.Messages, 1)
			got = append(got, r.Messages[0].TransactionID)
		case <-time.After(10 * time.Second):
			t.Fatalf("a parked pop waited with messages left: got %v", got)
		}
	}
	require.ElementsMatch(t, []string{"m1", "m2", "m3"}, got, "each once, none twice")
}

// A woken autoAck pop that ends without looking (its client went away)
// hands the wake-up to another pop of its key.
func TestWokenPopThatLeavesPassesTheWakeUpOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "handoff")
	ctx := t.Context()

	req := PopRequest{Queue: "handoff", Group: "g", AutoAck: true}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	tb.push(item("handoff", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	gone := woken(ws)[0]
	gone.p.Cancel()

	var other *watched
	for _, w := range ws {
		if w != gone {
			other = w
		}
	}
	require.Positive(t, other.calls.Load(), "the wake-up went to the other pop")
	res, done, err := other.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "m1", res.Messages[0].TransactionID)
}

// A consumer's long-poll right after a look that took all it saw parks
// without a look of its own, as after an empty look; one after a look
// that left messages looks, and gets them.
func TestLongPollAfterAnAutoAckLookThatTookAllParksWithoutLooking(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "took")
	ctx := t.Context()
	timeout := time.Minute
	req := PopRequest{Queue: "took", Group: "g", AutoAck: true, Batch: 2, Wait: true, Timeout: &timeout}

	tb.push(item("took", "p1", "m1", ""))
	first := tb.pop(req)
	require.Len(t, first.Messages, 1)
	res, p, err := tb.b.PopStart(ctx, req)
	require.NoError(t, err)
	require.Nil(t, res)
	require.NotNil(t, p)
	require.EqualValues(t, 1, tb.b.repolled.skipped.Load(), "parked without a look")

	// A push wakes it.
	got := make(chan *PopResult, 1)
	go func() { r, _ := p.Wait(ctx); got <- r }()
	tb.push(item("took", "p1", "m2", ""), item("took", "p1", "m3", ""), item("took", "p1", "m4", ""))
	select {
	case r := <-got:
		require.Equal(t, []string{"m2", "m3"}, txIDs(r))
	case <-time.After(10 * time.Second):
		t.Fatal("the parked pop was not woken by the push")
	}
	// That look left m4: the next long-poll looks and takes it at once.
	r := tb.pop(req)
	require.Equal(t, []string{"m4"}, txIDs(r))
	require.EqualValues(t, 1, tb.b.repolled.skipped.Load())
}

func txIDs(r *PopResult) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

// A scan that stopped at its limit may have left partitions it did not
// see: a look that took all it saw then still does not make the next
// long-poll park without looking.
func TestAutoAckLookAtTheScanLimitDoesNotMarkTheKeyEmpty(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "cap")
	ctx := t.Context()
	limit := popCandidates(1)
	var parts []string
	for i := range limit + 1 { // one push each: the scan's order is the push order
		parts = append(parts, "p"+strconv.Itoa(i))
		tb.push(item("cap", parts[i], "m"+strconv.Itoa(i), ""))
	}
	// Claims of all but the last two partitions the scan sees are in
	// flight on this broker: the look takes the one left it sees.
	timeout := time.Minute
	req := PopRequest{Queue: "cap", Group: "g", AutoAck: true, Wait: true, Timeout: &timeout}
	look := tb.b.plan(req).lookKey()
	for _, name := range parts[:limit-1] {
		var id uuid.UUID
		require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
			WHERE q.name = 'cap' AND p.name = $1`, name).Scan(&id))
		_, ok := tb.b.race.begin(raceKey{id, "g"}, 0, 0, look)
		require.True(t, ok)
	}
	first := tb.pop(req)
	require.Equal(t, []string{"m" + strconv.Itoa(limit-1)}, txIDs(first))

	res, p, err := tb.b.PopStart(ctx, req)
	require.NoError(t, err)
	require.Nil(t, p, "the next long-poll looked")
	require.Equal(t, []string{"m" + strconv.Itoa(limit)}, txIDs(res))
}
