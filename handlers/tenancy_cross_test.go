package handlers

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// tenantRows is everything stored about a partition's messages, cursors,
// dead letters and traces, as one comparable text.
func (b *testBundle) tenantRows(partitionIDs ...string) string {
	b.t.Helper()
	var out string
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), `
		SELECT json_build_object(
		  'messages', (SELECT json_agg(m.id ORDER BY m.seq) FROM queen.messages m WHERE m.partition_id::text = ANY($1)),
		  'cursors', (SELECT json_agg(pc ORDER BY pc.partition_id, pc.consumer_group) FROM queen.partition_consumers pc
		              WHERE pc.partition_id::text = ANY($1)),
		  'dead', (SELECT json_agg(d ORDER BY d.id) FROM queen.dead_letter_queue d WHERE d.partition_id::text = ANY($1)),
		  'traces', (SELECT count(*) FROM queen.message_traces t WHERE t.partition_id::text = ANY($1)),
		  'partitions', (SELECT json_agg(p ORDER BY p.id) FROM queen.partitions p WHERE p.id::text = ANY($1))
		)::text`, partitionIDs).Scan(&out))
	return out
}

// Tenant B holding every id of tenant A's message, lease and dead letter
// can neither act on them nor read them, and its attempts change nothing.
func TestTenantCannotActOnAnotherTenantsIDs(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a, bb := b.as(tenantA), b.as(tenantB)
	p1, p2 := orders(a, "a")
	orders(bb, "b") // B has the same names: nothing resolves by name here
	// A dead letter of A's to replay, and a live lease of A's on p1.
	d := a.pop("/api/v1/pop/queue/orders/partition/p2")
	require.True(t, a.ack("tx3", p2, "dlq", "", d.LeaseID).Success)
	dlq := a.deadLetters("queue=orders")
	require.Len(t, dlq, 1)
	a.trace(p1, "tx1", 1, "t")
	lease := a.pop("/api/v1/pop/queue/orders/partition/p1?batch=2")
	require.Len(t, lease.Messages, 2)
	qb := bb.registerQuery("agg", "orders", "", "h")

	before := b.tenantRows(p1, p2)
	ackBody := map[string]any{"transactionId": "tx1", "partitionId": p1, "status": "completed", "leaseId": lease.LeaseID}

	var acks []ackResult
	bb.doJSON("POST", "/api/v1/ack", ackBody, http.StatusOK, &acks)
	require.False(t, acks[0].Success)
	require.Equal(t, "Message not found", *acks[0].Error)
	for _, status := range []string{"completed", "failed", "dlq", "retry"} {
		bb.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
			map[string]any{"transactionId": "tx1", "partitionId": p1, "status": status, "leaseId": lease.LeaseID},
			map[string]any{"transactionId": "tx2", "partitionId": p1, "status": status},
		}}, http.StatusOK, &acks)
		require.Len(t, acks, 2)
		require.False(t, acks[0].Success, status)
		require.False(t, acks[1].Success, status)
	}
	var tx struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	bb.doJSON("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": "tx1", "partitionId": p1},
		map[string]any{"type": "push", "items": []any{item("orders", "p1", "from-b", 1)}},
	}}, http.StatusOK, &tx)
	require.False(t, tx.Success)
	require.Contains(t, tx.Error, "Message not found")

	var ext struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
	bb.doJSON("POST", "/api/v1/lease/"+lease.LeaseID+"/extend", map[string]any{"seconds": 600}, http.StatusOK, &ext)
	require.False(t, ext.Success)
	require.Equal(t, "Lease not found", *ext.Error)

	var del struct {
		Success bool `json:"success"`
	}
	bb.doJSON("DELETE", "/api/v1/messages/"+p1+"/tx1", nil, http.StatusOK, &del)
	require.False(t, del.Success)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/messages/" + p1 + "/tx1"},
		{"POST", "/api/v1/messages/" + p2 + "/tx3/retry"},
		{"POST", "/api/v1/messages/" + p1 + "/tx1/dlq"},
		{"POST", "/api/v1/dlq/" + dlq[0].DlqID + "/replay"},
	} {
		status, raw := bb.do(c.method, c.path, map[string]any{})
		require.Equal(t, http.StatusNotFound, status, "%s %s: %s", c.method, c.path, raw)
	}
	status, _ := bb.do("POST", "/api/v1/traces", map[string]any{"partitionId": p1, "transactionId": "tx1", "data": 1})
	require.Equal(t, http.StatusNotFound, status)
	var traces struct {
		Traces []any `json:"traces"`
	}
	bb.doJSON("GET", "/api/v1/traces/"+p1+"/tx1", nil, http.StatusOK, &traces)
	require.Empty(t, traces.Traces)
	r := bb.cycle(map[string]any{"query_id": qb, "partition_id": p1,
		"ack": map[string]any{"transactionId": "tx1", "leaseId": lease.LeaseID, "count": 1}})
	require.False(t, r.Success)

	require.Equal(t, before, b.tenantRows(p1, p2), "B's attempts changed A's rows")
	require.Zero(t, b.count(`SELECT count(*) FROM queen.messages WHERE transaction_id = 'from-b'`))

	// A's lease and ids were intact all along.
	a.doJSON("POST", "/api/v1/lease/"+lease.LeaseID+"/extend", map[string]any{"seconds": 120}, http.StatusOK, &ext)
	require.True(t, ext.Success)
	require.True(t, a.ack("tx1", p1, "completed", "", lease.LeaseID).Success)
	var replay wireReplay
	a.doJSON("POST", "/api/v1/dlq/"+dlq[0].DlqID+"/replay", map[string]any{}, http.StatusOK, &replay)
	require.True(t, replay.Success)
}
