package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRetryReplaysADeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("dl", "", "m0", "zero"), item("dl", "", "m1", "one"))
	pid := out[0].PartitionID
	p := b.pop("/api/v1/pop/queue/dl")
	require.True(t, b.ack("m0", pid, "dlq", "", p.LeaseID).DLQ)

	var r struct {
		Success               bool
		Result                string
		Queue, Partition      string
		ConsumerGroup         string
		DlqID                 string `json:"dlqId"`
		OriginalTransactionID string `json:"originalTransactionId"`
		DlqRowRemoved         bool
		ReplayedAs            struct {
			MessageID     string `json:"message_id"`
			TransactionID string `json:"transaction_id"`
			Status        string
		}
	}
	// A retry is a push: refused while pushes go to the spool.
	b.doJSON("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}, http.StatusOK, nil)
	status, raw := b.do("POST", "/api/v1/messages/"+pid+"/m0/retry", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
	require.Contains(t, string(raw), `"result":"maintenance"`)
	b.doJSON("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}, http.StatusOK, nil)

	b.doJSON("POST", "/api/v1/messages/"+pid+"/m0/retry", nil, http.StatusOK, &r)
	require.True(t, r.Success)
	require.Equal(t, "moved", r.Result)
	require.Equal(t, "dl", r.Queue)
	require.Equal(t, "Default", r.Partition)
	require.Equal(t, queueModeGroup, r.ConsumerGroup)
	require.Equal(t, "m0", r.OriginalTransactionID)
	require.True(t, r.DlqRowRemoved)
	require.Equal(t, "queued", r.ReplayedAs.Status)
	require.Equal(t, "dlq:"+r.DlqID, r.ReplayedAs.TransactionID)

	var dlq struct{ Total int }
	b.doJSON("GET", "/api/v1/dlq", nil, http.StatusOK, &dlq)
	require.Zero(t, dlq.Total, "the dead-letter row went with the replay")
	// The replay is delivered after what was already queued, payload intact.
	p = b.pop("/api/v1/pop/queue/dl?batch=10")
	require.Len(t, p.Messages, 2)
	require.Equal(t, "m1", p.Messages[0].TransactionID)
	require.Equal(t, r.ReplayedAs.TransactionID, p.Messages[1].TransactionID)
	require.JSONEq(t, `"zero"`, string(p.Messages[1].Data))

	// Nothing left to replay: 404 with the reference's body, with or
	// without a body.
	for _, body := range []any{nil, map[string]any{}} {
		status, raw := b.do("POST", "/api/v1/messages/"+pid+"/m0/retry", body)
		require.Equal(t, http.StatusNotFound, status, "%s", raw)
		require.Contains(t, string(raw), `"error":"Message not found"`)
		require.Contains(t, string(raw), `"success":false`)
	}
	status, _ = b.do("POST", "/api/v1/messages/not-a-uuid/m0/retry", nil)
	require.Equal(t, http.StatusBadRequest, status)
}

func TestMoveToDLQPassesTheGroupsNextMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("mv", "", "m0", 0), item("mv", "", "m1", 1), item("mv", "", "m2", 2))
	pid := out[0].PartitionID
	var r struct {
		Success       bool
		Result        string
		ConsumerGroup string
	}
	b.doJSON("POST", "/api/v1/messages/"+pid+"/m0/dlq", nil, http.StatusOK, &r)
	require.Equal(t, "moved", r.Result)
	require.Equal(t, queueModeGroup, r.ConsumerGroup)
	b.doJSON("POST", "/api/v1/messages/"+pid+"/m0/dlq", map[string]any{}, http.StatusOK, &r)
	require.Equal(t, "already_dead_lettered", r.Result)

	// Not the group's next message: refused, nothing changed.
	status, raw := b.do("POST", "/api/v1/messages/"+pid+"/m2/dlq", nil)
	require.Equal(t, http.StatusConflict, status, "%s", raw)

	var dlq struct {
		Total    int
		Messages []struct {
			TransactionID string `json:"transactionId"`
			ErrorMessage  string `json:"errorMessage"`
		}
	}
	b.doJSON("GET", "/api/v1/dlq", nil, http.StatusOK, &dlq)
	require.Equal(t, 1, dlq.Total)
	require.Equal(t, "m0", dlq.Messages[0].TransactionID)
	require.True(t, strings.Contains(dlq.Messages[0].ErrorMessage, "operator"))

	// The group skipped m0; while it holds a lease nothing can be moved.
	p := b.pop("/api/v1/pop/queue/mv")
	require.Equal(t, "m1", p.Messages[0].TransactionID)
	status, _ = b.do("POST", "/api/v1/messages/"+pid+"/m2/dlq", nil)
	require.Equal(t, http.StatusConflict, status)
	require.True(t, b.ack("m1", pid, "completed", "", p.LeaseID).Success)
	b.doJSON("POST", "/api/v1/messages/"+pid+"/m2/dlq", map[string]any{"errorMessage": "poison"}, http.StatusOK, &r)
	require.Equal(t, "moved", r.Result)
	require.Nil(t, b.pop("/api/v1/pop/queue/mv"))

	// Another group, without a cursor yet, starts at the first message.
	b.doJSON("POST", "/api/v1/messages/"+pid+"/m0/dlq", map[string]any{"consumerGroup": "audit"}, http.StatusOK, &r)
	require.Equal(t, "moved", r.Result)
	require.Equal(t, "audit", r.ConsumerGroup)
	p = b.pop("/api/v1/pop/queue/mv?consumerGroup=audit&batch=10")
	require.Len(t, p.Messages, 2)
	require.Equal(t, "m1", p.Messages[0].TransactionID)

	status, raw = b.do("POST", "/api/v1/messages/"+pid+"/nope/dlq", nil)
	require.Equal(t, http.StatusNotFound, status, "%s", raw)
}
