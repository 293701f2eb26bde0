package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A flush that shares one transaction between requests falls back to one
// transaction per request when it fails: the bad request fails alone.
func TestPushFlushIsolatesABadRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := &pushJob{items: []pushItem{pushItemFrom("gc", nil, ptr("good"), nil, ptr(json.RawMessage(`{"ok":1}`)))}, done: make(chan pushJobResult, 1)}
	// PostgreSQL refuses \u0000 inside jsonb: a data error caused by input.
	bad := &pushJob{items: []pushItem{pushItemFrom("gc", nil, ptr("bad"), nil, ptr(json.RawMessage(`"\u0000"`)))}, done: make(chan pushJobResult, 1)}
	dup := &pushJob{items: []pushItem{pushItemFrom("gc", nil, ptr("good"), nil, nil)}, done: make(chan pushJobResult, 1)}
	b.srv.pusher.flush([]*pushJob{good, bad, dup}, 3)

	g := <-good.done
	require.NoError(t, g.err)
	require.Equal(t, "queued", g.out[0].Status)
	require.Error(t, (<-bad.done).err)
	d := <-dup.done
	require.NoError(t, d.err)
	require.Equal(t, "duplicate", d.out[0].Status)
	require.Equal(t, g.out[0].MessageID, d.out[0].MessageID)

	// Shared flush: results are split back per request, in order.
	j1 := &pushJob{items: []pushItem{pushItemFrom("gc", nil, ptr("a"), nil, nil), pushItemFrom("gc", nil, ptr("b"), nil, nil)}, done: make(chan pushJobResult, 1)}
	j2 := &pushJob{items: []pushItem{pushItemFrom("gc2", nil, ptr("c"), nil, nil)}, done: make(chan pushJobResult, 1)}
	b.srv.pusher.flush([]*pushJob{j1, j2}, 3)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Len(t, r1.out, 2)
	require.Len(t, r2.out, 1)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages").Scan(&n))
	require.Equal(t, 4, n)
}
