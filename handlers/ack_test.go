package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

func TestFailedAcksRetryThenDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("flaky", &client.QueueOptions{RetryLimit: ptr(2)})
	b.push(item("flaky", "", "bad", map[string]any{"x": 1}), item("flaky", "", "next", 2))
	for attempt := 0; attempt < 2; attempt++ {
		p := b.pop("/api/v1/pop/queue/flaky")
		require.NotNil(t, p, "attempt %d", attempt)
		require.Equal(t, "bad", p.Messages[0].TransactionID)
		require.Equal(t, attempt, p.Messages[0].RetryCount)
		r := b.ack("bad", p.PartitionID, "failed", "", p.LeaseID)
		require.True(t, r.Success)
		require.True(t, r.LeaseReleased)
		require.False(t, r.DLQ)
	}
	p := b.pop("/api/v1/pop/queue/flaky")
	require.Equal(t, "bad", p.Messages[0].TransactionID)
	body := map[string]any{"transactionId": "bad", "partitionId": p.PartitionID, "status": "failed", "leaseId": p.LeaseID, "error": "boom"}
	var res []ackResult
	b.doJSON("POST", "/api/v1/ack", body, http.StatusOK, &res)
	require.True(t, res[0].DLQ)

	// Consumption goes on with the next message, with a fresh retry budget.
	p = b.pop("/api/v1/pop/queue/flaky")
	require.Equal(t, "next", p.Messages[0].TransactionID)
	require.Equal(t, 0, p.Messages[0].RetryCount)

	var dlq struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			ErrorMessage  string `json:"errorMessage"`
			RetryCount    int    `json:"retryCount"`
			Queue         string `json:"queue"`
		} `json:"messages"`
		Total int `json:"total"`
	}
	b.doJSON("GET", "/api/v1/dlq?queue=flaky", nil, http.StatusOK, &dlq)
	require.Equal(t, 1, dlq.Total)
	require.Equal(t, "bad", dlq.Messages[0].TransactionID)
	require.Equal(t, "boom", dlq.Messages[0].ErrorMessage)
	require.Equal(t, 2, dlq.Messages[0].RetryCount)
	b.doJSON("GET", "/api/v1/dlq?queue=flaky&offset=1", nil, http.StatusOK, &dlq)
	require.Empty(t, dlq.Messages)
	require.Equal(t, 1, dlq.Total)
	b.doJSON("GET", "/api/v1/dlq?queue=other", nil, http.StatusOK, &dlq)
	require.Equal(t, 0, dlq.Total)
}

func TestFailedAckIsNeverSkippedByALaterCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "m1", 1), item("q", "", "m2", 2), item("q", "", "m3", 3))
	p := b.pop("/api/v1/pop/queue/q?batch=3")
	require.Len(t, p.Messages, 3)
	var res []ackResult
	b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": "m3", "partitionId": p.PartitionID, "status": "completed"},
		map[string]any{"transactionId": "m1", "partitionId": p.PartitionID, "status": "completed"},
		map[string]any{"transactionId": "m2", "partitionId": p.PartitionID, "status": "failed"},
	}}, http.StatusOK, &res)
	require.Len(t, res, 3)
	require.False(t, res[0].Success, "m3 comes after the failed m2")
	require.True(t, res[1].Success)
	require.True(t, res[2].Success)
	again := b.pop("/api/v1/pop/queue/q?batch=3")
	require.NotNil(t, again)
	require.Equal(t, "m2", again.Messages[0].TransactionID)
	require.Len(t, again.Messages, 2)
}

func TestAckNeverMovesCursorBackwards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "m1", 1), item("q", "", "m2", 2), item("q", "", "m3", 3))
	p := b.pop("/api/v1/pop/queue/q?batch=2")
	require.True(t, b.ack("m2", p.PartitionID, "completed", "", "").Success)
	require.True(t, b.ack("m1", p.PartitionID, "completed", "", "").Success)
	next := b.pop("/api/v1/pop/queue/q?batch=5")
	require.NotNil(t, next)
	require.Len(t, next.Messages, 1)
	require.Equal(t, "m3", next.Messages[0].TransactionID)
}

func TestAckUnknownMessageAndBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.ack("nope", "0195a8c6-0000-7000-8000-000000000000", "completed", "", "")
	require.False(t, r.Success)
	require.Equal(t, errMessageNotFound, *r.Error)
	for _, body := range []any{
		map[string]any{"partitionId": "0195a8c6-0000-7000-8000-000000000000"},
		map[string]any{"transactionId": "x"},
		map[string]any{"transactionId": "x", "partitionId": "not-a-uuid"},
		map[string]any{"transactionId": "x", "partitionId": "0195a8c6-0000-7000-8000-000000000000", "status": "weird"},
	} {
		status, raw := b.do("POST", "/api/v1/ack", body)
		require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	}
	status, raw := b.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{}})
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, "[]", string(raw))
	status, _ = b.do("POST", "/api/v1/ack/batch", map[string]any{})
	require.Equal(t, http.StatusBadRequest, status)
}

// The batch ack is checked by its handler after the typed decode
// (ack_validate.go), not by the generic validator: every rule of
// AckBatchRequest still answers 400 naming the field, and changes nothing.
func TestAckBatchBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "m1", 1))
	p := b.pop("/api/v1/pop/queue/q?batch=1")
	good := map[string]any{"transactionId": "m1", "partitionId": p.PartitionID, "leaseId": p.LeaseID}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for gk, gv := range good {
			m[gk] = gv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = good
	}
	for _, tc := range []struct {
		body any
		want string
	}{
		{map[string]any{"acknowledgments": nil}, `acknowledgments`},
		{map[string]any{"acknowledgments": "x"}, "at acknowledgments"},
		{map[string]any{"acknowledgments": tooMany}, "at most 1000"},
		{map[string]any{"acknowledgments": []any{good}, "consumerGroup": "bad name"}, "consumerGroup"},
		{map[string]any{"acknowledgments": []any{good, with("transactionId", nil)}}, "acknowledgments/1/transactionId"},
		{map[string]any{"acknowledgments": []any{with("transactionId", strings.Repeat("x", 256))}}, "acknowledgments/0/transactionId"},
		{map[string]any{"acknowledgments": []any{good, with("partitionId", "not-a-uuid")}}, "acknowledgments/1/partitionId"},
		{map[string]any{"acknowledgments": []any{with("partitionId", nil)}}, "acknowledgments/0/partitionId"},
		{map[string]any{"acknowledgments": []any{good, good, with("status", "weird")}}, "acknowledgments/2/status"},
		{map[string]any{"acknowledgments": []any{with("leaseId", strings.Repeat("l", 256))}}, "acknowledgments/0/leaseId"},
		{map[string]any{"acknowledgments": []any{with("transactionId", 7)}}, "transactionId"},
	} {
		status, raw := b.do("POST", "/api/v1/ack/batch", tc.body)
		require.Equal(t, http.StatusBadRequest, status, "%s", raw)
		require.Contains(t, string(raw), tc.want)
	}
	// Nothing was acknowledged: the lease still holds the message.
	require.Nil(t, b.pop("/api/v1/pop/queue/q?batch=1"))
	ok := map[string]any{"acknowledgments": []any{with("status", nil)}, "consumerGroup": ""}
	status, raw := b.do("POST", "/api/v1/ack/batch", ok)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	require.Contains(t, string(raw), `"success":true`)
}

func TestDLQStatusAndRetryStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "m1", 1), item("q", "", "m2", 2))
	p := b.pop("/api/v1/pop/queue/q?batch=1")
	r := b.ack("m1", p.PartitionID, "retry", "", p.LeaseID)
	require.True(t, r.LeaseReleased)
	p = b.pop("/api/v1/pop/queue/q?batch=1")
	require.Equal(t, "m1", p.Messages[0].TransactionID)
	r = b.ack("m1", p.PartitionID, "dlq", "", p.LeaseID)
	require.True(t, r.DLQ)
	require.True(t, r.LeaseReleased)
	p = b.pop("/api/v1/pop/queue/q?batch=1")
	require.Equal(t, "m2", p.Messages[0].TransactionID)
}
