package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A flush that shares one transaction between requests falls back to one
// transaction per request when it fails: the bad request fails alone.
func TestPushFlushIsolatesABadRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := newJobOf([]PushItem{item("gc", "", "good", `{"ok":1}`)})
	// PostgreSQL refuses \u0000 inside jsonb: a data error caused by input.
	bad := newJobOf([]PushItem{item("gc", "", "bad", `"\u0000"`)})
	dup := newJobOf([]PushItem{item("gc", "", "good", "")})
	b.b.pusher.flush([]*coalescedJob[PushItem, PushResult]{good, bad, dup}, 3)

	g := <-good.done
	require.NoError(t, g.err)
	require.Equal(t, Queued, g.out[0].Status)
	require.Error(t, (<-bad.done).err)
	d := <-dup.done
	require.NoError(t, d.err)
	require.Equal(t, Duplicate, d.out[0].Status)
	require.Equal(t, g.out[0].MessageID, d.out[0].MessageID)

	// Shared flush: results are split back per request, in order.
	j1 := newJobOf([]PushItem{item("gc", "", "a", ""), item("gc", "", "b", "")})
	j2 := newJobOf([]PushItem{item("gc2", "", "c", "")})
	b.b.pusher.flush([]*coalescedJob[PushItem, PushResult]{j1, j2}, 3)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Len(t, r1.out, 2)
	require.Len(t, r2.out, 1)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages").Scan(&n))
	require.Equal(t, 4, n)
}

func newJobOf(items []PushItem) *coalescedJob[PushItem, PushResult] {
	return newJob[PushItem, PushResult](items)
}

// Acks from several requests share a flush and come back split per request
// with per-request indexes.
func TestAckFlushSplitsResultsPerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("ackc", "", "m1", "1"), item("ackc", "", "m2", "2"))
	p := b.pop(PopRequest{Queue: "ackc", Batch: 2})
	require.NotNil(t, p)
	it1 := ackOf("m1", p, "", "")
	it2 := ackOf("m2", p, "", "")
	missing := ackOf("nope", p, "", "")
	missing.LeaseID = ""
	j1 := newJob[AckItem, AckResult]([]AckItem{it1})
	j2 := newJob[AckItem, AckResult]([]AckItem{missing, it2})
	b.b.acker.flush([]*coalescedJob[AckItem, AckResult]{j1, j2}, 3)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Len(t, r1.out, 1)
	require.Len(t, r2.out, 2)
	require.True(t, r1.out[0].Applied())
	require.False(t, r2.out[0].Applied())
	require.True(t, r2.out[1].Applied())
	require.True(t, r2.out[1].LeaseReleased, "both messages of the batch are acked")
	require.Nil(t, b.pop(PopRequest{Queue: "ackc"}))
}
