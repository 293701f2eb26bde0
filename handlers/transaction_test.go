package handlers

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

type txResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	Results []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"results"`
}

func TestTransactionAckAndPushAtomically(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("in", "", "src", 1))
	p := b.pop("/api/v1/pop/queue/in")
	var res txResponse
	b.doJSON("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{
			map[string]any{"type": "ack", "transactionId": "src", "partitionId": p.PartitionID},
			map[string]any{"type": "push", "items": []any{item("out", "", "derived", map[string]any{"ok": true})}},
			map[string]any{"type": "push", "queue": "out", "transactionId": "flat", "payload": 2},
		},
		"requiredLeases": []string{p.LeaseID},
	}, http.StatusOK, &res)
	require.True(t, res.Success, res.Error)
	require.Len(t, res.Results, 3)
	require.Nil(t, b.pop("/api/v1/pop/queue/in"), "the source was acked")
	out := b.pop("/api/v1/pop/queue/out?batch=10")
	require.Len(t, out.Messages, 2)

	// A repeated push inside a transaction answers duplicate, not failure.
	b.doJSON("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{map[string]any{"type": "push", "items": []any{item("out", "", "derived", 1)}}},
	}, http.StatusOK, &res)
	require.True(t, res.Success)
	require.Equal(t, "duplicate", res.Results[0].Status)
}

func TestTransactionRollsBackOnInvalidAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("in", "", "src", 1))
	p := b.pop("/api/v1/pop/queue/in")
	var res txResponse
	b.doJSON("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{
			map[string]any{"type": "push", "items": []any{item("out", "", "x", 1)}},
			map[string]any{"type": "ack", "transactionId": "src", "partitionId": p.PartitionID},
			map[string]any{"type": "ack", "transactionId": "missing", "partitionId": p.PartitionID},
		},
	}, http.StatusOK, &res)
	require.False(t, res.Success)
	require.Contains(t, res.Error, "Message not found")
	require.Nil(t, b.pop("/api/v1/pop/queue/out"), "the push was rolled back")
	// The source ack was rolled back: after the lease ends it is redelivered.
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(),
		"SELECT last_seq FROM queen.partition_consumers WHERE consumer_group = '__QUEUE_MODE__'").Scan(&n))
	require.Zero(t, n)

	for _, body := range []any{
		map[string]any{"operations": []any{}},
		map[string]any{"operations": []any{map[string]any{"type": "nope"}}},
		map[string]any{"operations": []any{map[string]any{"type": "ack"}}},
		map[string]any{"operations": []any{map[string]any{"type": "push"}}},
	} {
		status, raw := b.do("POST", "/api/v1/transaction", body)
		require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	}
}
