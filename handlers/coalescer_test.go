package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// A flush that shares one transaction between requests falls back to one
// transaction per request when it fails: the bad request fails alone.
func TestPushFlushIsolatesABadRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := newJobOf([]pushItem{pushItemFrom("gc", nil, ptr("good"), nil, ptr(json.RawMessage(`{"ok":1}`)))})
	// PostgreSQL refuses \u0000 inside jsonb: a data error caused by input.
	bad := newJobOf([]pushItem{pushItemFrom("gc", nil, ptr("bad"), nil, ptr(json.RawMessage(`"\u0000"`)))})
	dup := newJobOf([]pushItem{pushItemFrom("gc", nil, ptr("good"), nil, nil)})
	b.srv.pusher.flush([]*coalescedJob[pushItem, pushOutcome]{good, bad, dup}, 3)

	g := <-good.done
	require.NoError(t, g.err)
	require.Equal(t, "queued", g.out[0].Status)
	require.Error(t, (<-bad.done).err)
	d := <-dup.done
	require.NoError(t, d.err)
	require.Equal(t, "duplicate", d.out[0].Status)
	require.Equal(t, g.out[0].MessageID, d.out[0].MessageID)

	// Shared flush: results are split back per request, in order.
	j1 := newJobOf([]pushItem{pushItemFrom("gc", nil, ptr("a"), nil, nil), pushItemFrom("gc", nil, ptr("b"), nil, nil)})
	j2 := newJobOf([]pushItem{pushItemFrom("gc2", nil, ptr("c"), nil, nil)})
	b.srv.pusher.flush([]*coalescedJob[pushItem, pushOutcome]{j1, j2}, 3)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Len(t, r1.out, 2)
	require.Len(t, r2.out, 1)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages").Scan(&n))
	require.Equal(t, 4, n)
}

func newJobOf(items []pushItem) *coalescedJob[pushItem, pushOutcome] {
	return newJob[pushItem, pushOutcome](items)
}

// Acks from several requests share a flush and come back split per request
// with per-request indexes.
func TestAckFlushSplitsResultsPerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("ackc", "", "m1", 1), item("ackc", "", "m2", 2))
	p := b.pop("/api/v1/pop/queue/ackc?batch=2")
	require.NotNil(t, p)
	it1, err := ackItemFrom("m1", p.PartitionID, nil, nil, ptr(p.LeaseID), nil)
	require.NoError(t, err)
	it2, err := ackItemFrom("m2", p.PartitionID, nil, nil, ptr(p.LeaseID), nil)
	require.NoError(t, err)
	missing, err := ackItemFrom("nope", p.PartitionID, nil, nil, nil, nil)
	require.NoError(t, err)
	j1 := newJob[ackItem, api.AckResult]([]ackItem{it1})
	j2 := newJob[ackItem, api.AckResult]([]ackItem{missing, it2})
	b.srv.acker.flush([]*coalescedJob[ackItem, api.AckResult]{j1, j2}, 3)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Len(t, r1.out, 1)
	require.Len(t, r2.out, 2)
	require.True(t, r1.out[0].Success)
	require.False(t, r2.out[0].Success)
	require.True(t, r2.out[1].Success)
	require.True(t, r2.out[1].LeaseReleased, "both messages of the batch are acked")
	require.Nil(t, b.pop("/api/v1/pop/queue/ackc"))
}
