package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A look that leaves messages hands no wake-up on while another autoAck
// pop of its key is woken and has not looked yet: that pop's look will see
// them. The key's generation does not move either (the next long-poll
// need not look for them). If that pop then ends without looking, its own
// hand-on wakes the next pop, which gets them.
func TestLookLeavingMessagesDefersToADuePop(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	ctx := t.Context()
	_, _, err := tb.b.Configure(ctx, "", "due", "", "", QueueOptionsDefault())
	require.NoError(t, err)

	req := PopRequest{Queue: "due", Group: "g", AutoAck: true, Batch: 1}
	ws := []*watched{tb.parkWatched(req), tb.parkWatched(req)}
	tb.push(item("due", "p1", "m1", ""), item("due", "p1", "m2", ""))
	require.Len(t, woken(ws), 1, "one partition filled: one pop woken")
	due := woken(ws)[0]
	idle := ws[0]
	if idle == due {
		idle = ws[1]
	}
	look := tb.b.plan(req).lookKey()
	gen := tb.b.genOf(look)

	// A pop that does not wait takes m1 and leaves m2.
	first := tb.pop(req)
	require.Equal(t, []string{"m1"}, txIDs(first))
	require.Equal(t, gen, tb.b.genOf(look), "the key's generation did not move")
	require.Zero(t, idle.calls.Load(), "the idle pop was not woken")
	require.EqualValues(t, 1, tb.b.dueLooks.deferred.Load(), "the hand-on was left to the due pop")

	// The due pop's client goes away before it looks: the wake-up goes on
	// to the idle pop, which gets m2.
	due.p.Cancel()
	require.Positive(t, idle.calls.Load(), "the idle pop was woken")
	res, done, err := idle.p.Resume(ctx)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{"m2"}, txIDs(res))
}
