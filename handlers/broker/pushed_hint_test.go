package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resumeWoken resumes every pop of ws told it has something to do, again
// and again until none is, and returns what they delivered. A woken pop
// that is left waiting with messages it could take shows as messages
// never delivered: the re-poll of these tests runs once an hour.
func (tb *testBundle) resumeWoken(ws []*watched) (got []string) {
	tb.t.Helper()
	seen := make(map[*watched]int32)
	done := make(map[*watched]bool)
	for progressed := true; progressed; {
		progressed = false
		for _, w := range ws {
			if done[w] || w.calls.Load() == seen[w] {
				continue
			}
			seen[w], progressed = w.calls.Load(), true
			res, fin, err := w.p.Resume(tb.t.Context())
			require.NoError(tb.t, err)
			if fin {
				done[w] = true
				if res != nil {
					got = append(got, txIDs(res)...)
				}
			}
		}
	}
	return got
}

// A pop woken by a push claims the partition the push filled for it: no
// scan of the queue's partitions.
func TestWokenAutoAckPopClaimsThePushedPartitionWithoutAScan(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "hinted")
	ctx := t.Context()

	req := PopRequest{Queue: "hinted", Group: "g", AutoAck: true, Batch: 10}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req), tb.parkWatched(req)}
	scans := tb.b.hinted.scans.Load()

	tb.push(item("hinted", "p1", "m1", ""), item("hinted", "p1", "m2", ""), item("hinted", "p2", "m3", ""))
	require.Len(t, woken(ws), 2)
	var got []string
	for _, w := range woken(ws) {
		res, done, err := w.p.Resume(ctx)
		require.NoError(t, err)
		require.True(t, done)
		got = append(got, txIDs(res)...)
	}
	require.ElementsMatch(t, []string{"m1", "m2", "m3"}, got)
	require.EqualValues(t, 2, tb.b.hinted.answered.Load(), "each claimed its partition")
	require.Equal(t, scans, tb.b.hinted.scans.Load(), "and scanned nothing")
}

// A woken pop whose partition another pop emptied first looks as any woken
// pop does, and gets what another push left without a pop of its own.
func TestWokenPopWhosePushedPartitionIsTakenScans(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "taken")
	ctx := t.Context()

	req := PopRequest{Queue: "taken", Group: "g", AutoAck: true, Batch: 10}
	w := tb.parkWatched(req)
	tb.push(item("taken", "p1", "m1", ""))
	require.Positive(t, w.calls.Load())
	// Another consumer of the group takes m1 before the woken pop looks.
	require.Equal(t, []string{"m1"}, txIDs(tb.pop(PopRequest{Queue: "taken", Group: "g", AutoAck: true})))
	// A push the woken pop is the only one parked for: it is due already,
	// so the push wakes nobody new.
	tb.push(item("taken", "p2", "m2", ""))

	res, done, err := w.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done, "the pop scanned after its partition came back empty")
	require.Equal(t, []string{"m2"}, txIDs(res))
	require.EqualValues(t, 1, tb.b.hinted.fellBack.Load())
}

// A pop woken with a partition of its own is not one a hand-on waits for:
// it may answer from that partition without seeing what a look left. So
// the hand-on wakes a pop that scans, and nothing is left waiting.
func TestHandOnDoesNotWaitForAPopWithAPushedPartition(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "handon")
	ctx := t.Context()

	req := PopRequest{Queue: "handon", Group: "g", AutoAck: true, Batch: 1}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req), tb.parkWatched(req)}
	tb.push(item("handon", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	first := woken(ws)[0]
	tb.push(item("handon", "p2", "m2", ""), item("handon", "p2", "m3", ""))
	require.Len(t, woken(ws), 2)
	var second *watched
	for _, w := range woken(ws) {
		if w != first {
			second = w
		}
	}

	// The second takes m2 of its partition and leaves m3: the first, due
	// with p1, does not hold the hand-on back.
	res, done, err := second.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{"m2"}, txIDs(res))
	require.Zero(t, tb.b.dueLooks.deferred.Load(), "the hand-on was made")

	got := tb.resumeWoken(ws)
	require.ElementsMatch(t, []string{"m1", "m3"}, got, "each once, none left waiting")
}

// Partitions of a queue with a window buffer are never offered: the scan
// passes over a partition whose window is open, the claim would not.
func TestPushToAWindowedQueueOffersNoPartition(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	ctx := t.Context()
	opts := QueueOptionsDefault()
	opts.WindowBuffer = 3600
	_, _, err := tb.b.Configure(ctx, "", "windowed", "", "", opts)
	require.NoError(t, err)

	req := PopRequest{Queue: "windowed", Group: "g", AutoAck: true}
	w := tb.parkWatched(req)
	tb.push(item("windowed", "p1", "m1", ""))
	require.Positive(t, w.calls.Load())
	res, done, err := w.p.Resume(ctx)
	require.NoError(t, err)
	require.False(t, done, "nothing delivered inside the window")
	require.Nil(t, res)
	require.Zero(t, tb.b.hinted.answered.Load()+tb.b.hinted.fellBack.Load(), "no partition offered")
}

// A woken pop that ends without looking hands the partition its wake-up
// offered on: the pop that gets it claims it without a scan, and the key's
// generation does not move.
func TestWokenPopThatLeavesHandsItsPartitionOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "handpart")

	req := PopRequest{Tenant: DefaultTenant, Queue: "handpart", Group: "g", AutoAck: true}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	look := tb.b.plan(req).lookKey()
	tb.push(item("handpart", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	gone := woken(ws)[0]
	gen, scans := tb.b.genOf(look), tb.b.hinted.scans.Load()
	gone.p.Cancel()

	require.EqualValues(t, 1, tb.b.hinted.handedOn.Load(), "the partition went on")
	require.Equal(t, gen, tb.b.genOf(look))
	got := tb.resumeWoken(ws)
	require.Equal(t, []string{"m1"}, got)
	require.Equal(t, scans, tb.b.hinted.scans.Load(), "claimed without a scan")
}

// A pop that takes a full batch of its partition without reaching what
// the push stored there hands the partition on to the next pop.
func TestPopLeavingPartOfItsPartitionHandsItOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "rest")

	req := PopRequest{Queue: "rest", Group: "g", AutoAck: true, Batch: 2}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req), tb.parkWatched(req)}
	scans := tb.b.hinted.scans.Load()
	tb.push(item("rest", "p1", "m1", ""), item("rest", "p1", "m2", ""), item("rest", "p1", "m3", ""),
		item("rest", "p1", "m4", ""), item("rest", "p1", "m5", ""))
	require.Len(t, woken(ws), 1)

	got := tb.resumeWoken(ws)
	require.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, got, "in order, each once")
	require.EqualValues(t, 2, tb.b.hinted.handedOn.Load())
	require.Equal(t, scans, tb.b.hinted.scans.Load(), "no pop scanned")
}

// A woken pop answered by a look that delivered what the push stored in
// the partition its wake-up offered hands nothing on.
func TestWokenPopAnsweredWithItsPushHandsNothingOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "answered")

	req := PopRequest{Queue: "answered", Group: "g", AutoAck: true}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	tb.push(item("answered", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	first := woken(ws)[0]
	// As if the look under way when the push woke it had delivered m1.
	res := tb.pop(PopRequest{Queue: "answered", Group: "g", AutoAck: true})
	require.Equal(t, []string{"m1"}, txIDs(res))
	first.p.finish(res, nil)

	require.Len(t, woken(ws), 1, "nobody else woken")
	require.Zero(t, tb.b.hinted.handedOn.Load())
}

// A woken pop whose timeout comes before it looks hands its wake-up on,
// with the partition it offered.
func TestWokenPopThatTimesOutHandsItsPartitionOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "expired")
	ctx := t.Context()

	req := PopRequest{Queue: "expired", Group: "g", AutoAck: true}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	tb.push(item("expired", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	first := woken(ws)[0]
	first.p.signal(dueExpired) // its timer, before its holder resumed it
	res, done, err := first.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Nil(t, res, "timed out empty")

	require.EqualValues(t, 1, tb.b.hinted.handedOn.Load(), "the partition went on")
	require.Equal(t, []string{"m1"}, tb.resumeWoken(ws))
}

// A partition handed on when no pop of the key is idle goes to one that is
// looking: it claims the partition after its look, without a scan, and the
// key's generation does not move.
func TestHandOnGoesToALookingPopWhenNoneIsIdle(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "busyon")

	req := PopRequest{Tenant: DefaultTenant, Queue: "busyon", Group: "g", AutoAck: true}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	look := tb.b.plan(req).lookKey()
	tb.push(item("busyon", "p1", "m1", ""))
	require.Len(t, woken(ws), 1)
	gone, busy := ws[0], ws[1]
	if woken(ws)[0] == busy {
		gone, busy = busy, gone
	}
	busy.p.looking(true) // as in the middle of a look
	gen, scans := tb.b.genOf(look), tb.b.hinted.scans.Load()
	gone.p.Cancel()

	require.EqualValues(t, 1, tb.b.hinted.handedOn.Load(), "the partition went to the looking pop")
	require.Equal(t, gen, tb.b.genOf(look), "the generation did not move")
	busy.p.looking(false)
	require.Equal(t, []string{"m1"}, tb.resumeWoken([]*watched{busy}))
	require.Equal(t, scans, tb.b.hinted.scans.Load(), "claimed without a scan")
}

// A long-poll whose scan leaves candidates it did not try hands them on
// to a parked pop, which claims them without a scan of its own and hands
// on what it leaves in turn. The key's generation does not move, so the
// group's next long-poll parks without a look.
func TestScanLeavingCandidatesHandsThemOn(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "scanon")
	ctx := t.Context()

	req := PopRequest{Tenant: DefaultTenant, Queue: "scanon", Group: "g", AutoAck: true, Batch: 1}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	look := tb.b.plan(req).lookKey()
	// Stored by another broker and not announced: nobody here is woken.
	other := New(Config{Pool: tb.pool, RepollInterval: time.Hour})
	require.NoError(t, other.Start(ctx))
	t.Cleanup(func() { require.NoError(t, other.Stop(t.Context())) })
	_, err := other.Push(ctx, "", []PushItem{item("scanon", "p1", "m1", ""), item("scanon", "p2", "m2", ""), item("scanon", "p3", "m3", "")})
	require.NoError(t, err)
	require.Empty(t, woken(ws))

	// A long-poll that looks (as after a wake-up) takes one and leaves two.
	tb.b.forgetEmpty(look)
	gen, scans := tb.b.genOf(look), tb.b.hinted.scans.Load()
	timeout := time.Minute
	lr := req
	lr.Wait, lr.Timeout = true, &timeout
	res, p, err := tb.b.PopStart(ctx, lr)
	require.NoError(t, err)
	require.Nil(t, p)
	got := txIDs(res)
	require.Len(t, got, 1)
	require.Equal(t, scans+1, tb.b.hinted.scans.Load())
	require.EqualValues(t, 1, tb.b.hinted.handedOn.Load(), "what it left went on")
	require.Len(t, woken(ws), 1)
	require.Equal(t, gen, tb.b.genOf(look), "the generation did not move")

	// The group's next long-poll parks without a look.
	skipped := tb.b.repolled.skipped.Load()
	ws = append(ws, tb.parkWatched(req))
	require.Equal(t, skipped+1, tb.b.repolled.skipped.Load(), "parked without a look")

	got = append(got, tb.resumeWoken(ws)...)
	require.ElementsMatch(t, []string{"m1", "m2", "m3"}, got, "each once")
	require.Equal(t, scans+1, tb.b.hinted.scans.Load(), "the others claimed without a scan")
	require.Equal(t, gen, tb.b.genOf(look))
}
