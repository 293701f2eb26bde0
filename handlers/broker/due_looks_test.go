package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A look that leaves messages hands no wake-up on while another autoAck
// pop of its key is woken and has not looked yet: that pop's look will see
// them. The key's generation does not move, and the consumer's next
// long-poll parks without a look, as after a look that took all it saw.
// If the due pop then ends without looking, its own hand-on wakes the
// next pop, which gets what was left.
func TestLookLeavingMessagesDefersToADuePop(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "due")
	ctx := t.Context()

	req := PopRequest{Tenant: DefaultTenant, Queue: "due", Group: "g", AutoAck: true, Batch: 1}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	// Three partitions filled, two pops woken; an announcement for
	// anything (another broker's) reaches them before they look: each
	// drops the partition the push offered it, and will scan.
	tb.push(item("due", "p1", "m1", ""), item("due", "p2", "m2", ""), item("due", "p3", "m3", ""))
	require.Len(t, woken(ws), 2)
	tb.b.ApplyQueuesReady([]QueueKey{key(DefaultTenant, "due")})
	look := tb.b.plan(req).lookKey()
	gen := tb.b.genOf(look)

	// The first takes one and leaves two; the second is due.
	res, done, err := ws[0].p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Len(t, res.Messages, 1)
	got := txIDs(res)
	require.Equal(t, gen, tb.b.genOf(look), "no wake-up handed on: the key's generation did not move")
	require.EqualValues(t, 1, tb.b.dueLooks.deferred.Load(), "the hand-on was left to the due pop")

	// The consumer's next long-poll parks without a look.
	skipped := tb.b.repolled.skipped.Load()
	again := tb.parkWatched(req)
	require.Equal(t, skipped+1, tb.b.repolled.skipped.Load(), "parked without a look")
	require.Zero(t, again.calls.Load(), "and was not woken")

	// The due pop's client goes away before it looks: the wake-up goes on
	// to the parked pop, which gets one of what was left.
	ws[1].p.Cancel()
	require.Positive(t, again.calls.Load(), "the parked pop was woken")
	res, done, err = again.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	got = append(got, txIDs(res)...)
	require.Len(t, got, 2)
	require.Subset(t, []string{"m1", "m2", "m3"}, got)
	require.NotEqual(t, got[0], got[1])
}

// A push that woke an autoAck pop of the group for each partition it
// filled is answered by them: the group's next long-poll, after a look
// that found the queue empty, parks without looking (the pop the push
// woke gets the message). A push that filled more partitions than it
// could wake pops for still makes the next long-poll look.
func TestLongPollAfterAPushItsWokenPopsAnswerParksWithoutLooking(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "excused")
	ctx := t.Context()

	req := PopRequest{Queue: "excused", Group: "g", AutoAck: true, Batch: 10}
	first := tb.parkWatched(req) // looks, finds nothing
	tb.push(item("excused", "p1", "m1", ""))
	require.Positive(t, first.calls.Load(), "the push woke the parked pop")

	// The next long-poll parks without a look: the woken pop gets m1.
	skipped := tb.b.repolled.skipped.Load()
	next := tb.parkWatched(req)
	require.Equal(t, skipped+1, tb.b.repolled.skipped.Load(), "parked without a look")
	res, done, err := first.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{"m1"}, txIDs(res))

	// Two partitions filled, one pop parked: the next long-poll looks and
	// gets what the woken pop does not.
	tb.push(item("excused", "p2", "m2", ""), item("excused", "p3", "m3", ""))
	require.Positive(t, next.calls.Load())
	timeout := time.Minute
	looked, p, err := tb.b.PopStart(ctx, PopRequest{Queue: "excused", Group: "g", AutoAck: true, Batch: 1, Wait: true, Timeout: &timeout})
	require.NoError(t, err)
	require.Nil(t, p, "the long-poll looked")
	require.Len(t, looked.Messages, 1)
}
