package broker

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// A claim sent after a scan returned, which moved the cursor to the last
// seq that scan saw or past it, makes the scan's candidate worthless; a
// claim sent before the scan says nothing about it (the cursor may have
// been moved back since: a seek).
func TestAutoAckRacePassesOverWhatALaterClaimDelivered(t *testing.T) {
	t.Parallel()
	var r autoAckRace
	k := raceKey{uuid.New(), "g"}
	look := lookKey{queue: "q", group: "g"}

	listed := r.ticket() // a scan saw the partition's last seq at 10
	tk, ok := r.begin(k, listed, 10, look)
	require.True(t, ok)
	require.Empty(t, r.end(k, tk, 10))

	_, ok = r.begin(k, listed, 10, look)
	require.False(t, ok, "what the scan saw is delivered")
	tk, ok = r.begin(k, listed, 11, look)
	require.True(t, ok, "the scan saw more than was delivered")
	r.end(k, tk, 0)

	later := r.ticket() // a scan after the claim that delivered
	tk, ok = r.begin(k, later, 5, look)
	require.True(t, ok, "a claim before the scan proves nothing")
	r.end(k, tk, 0)
	tk, ok = r.begin(k, 0, 0, look)
	require.True(t, ok, "a named partition's pop scanned nothing")
	r.end(k, tk, 0)
	require.EqualValues(t, 1, r.passes.Load())
}

// A pop that passes a partition over because another pop of its group on
// this broker is claiming it does not send its claim, and when that claim
// ends short of what the pop saw, the pop is woken again: what was pushed
// meanwhile does not wait for the shared re-poll (an hour here).
func TestAutoAckPopPassesOverAClaimInFlightAndIsWokenAfter(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "race")
	req := PopRequest{Queue: "race", Group: "g", AutoAck: true}
	tb.push(item("race", "p1", "m0", ""))
	first := tb.pop(req) // the group's cursor row on p1 exists from here
	require.NotNil(t, first)

	// Another pop's claim of p1 in flight.
	rk := raceKey{first.PartitionID, "g"}
	tk, ok := tb.b.race.begin(rk, 0, 0, tb.b.plan(req).lookKey())
	require.True(t, ok)

	got := tb.parkPop(req)
	tb.waitParked(req, 1)
	tb.push(item("race", "p1", "m1", ""))
	require.Eventually(t, func() bool { return tb.b.race.passes.Load() >= 1 }, 10*time.Second, 2*time.Millisecond,
		"the woken pop passed p1 over")
	tb.waitParked(req, 1)
	select {
	case <-got:
		t.Fatal("the pop claimed a partition another pop was claiming")
	default:
	}

	tb.b.raceEnd(rk, tk, 0) // the claim in flight delivered nothing
	select {
	case r := <-got:
		require.NotNil(t, r)
		require.Equal(t, "m1", r.Messages[0].TransactionID)
	case <-time.After(10 * time.Second):
		t.Fatal("the pop that passed p1 over was not woken when the claim ended")
	}
}
