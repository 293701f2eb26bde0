package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

type wireTrace struct {
	ID             string          `json:"id"`
	TransactionID  string          `json:"transaction_id"`
	PartitionID    string          `json:"partition_id"`
	EventType      string          `json:"event_type"`
	Data           json.RawMessage `json:"data"`
	ConsumerGroup  string          `json:"consumer_group"`
	QueueName      string          `json:"queue_name"`
	PartitionName  string          `json:"partition_name"`
	MessagePayload json.RawMessage `json:"message_payload"`
	TraceNames     []string        `json:"trace_names"`
}

func (b *testBundle) trace(partitionID, txID string, data any, names ...string) {
	b.t.Helper()
	b.doJSON("POST", "/api/v1/traces", map[string]any{
		"partitionId": partitionID, "transactionId": txID, "data": data, "traceNames": names, "eventType": "step",
	}, http.StatusCreated, nil)
}

func TestTracesReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("tq", "p", "t1", map[string]any{"order": 1}), item("tq", "p", "t2", 2))
	pid := out[0].PartitionID
	b.trace(pid, "t1", map[string]any{"text": "first"}, "order 1/x", "user-2")
	b.trace(pid, "t1", map[string]any{"text": "second"}, "order 1/x")
	b.trace(pid, "t2", 3, "order 1/x")
	b.trace(pid, "t2", 4)

	var byMsg struct {
		Traces []wireTrace `json:"traces"`
	}
	b.doJSON("GET", "/api/v1/traces/"+pid+"/t1", nil, http.StatusOK, &byMsg)
	require.Len(t, byMsg.Traces, 2)
	require.JSONEq(t, `{"text":"first"}`, string(byMsg.Traces[0].Data), "oldest first")
	require.Equal(t, []string{"order 1/x", "user-2"}, byMsg.Traces[0].TraceNames)
	require.Equal(t, "step", byMsg.Traces[0].EventType)
	require.Equal(t, "__QUEUE_MODE__", byMsg.Traces[0].ConsumerGroup)
	b.doJSON("GET", "/api/v1/traces/"+pid+"/t2", nil, http.StatusOK, &byMsg)
	require.Empty(t, byMsg.Traces[1].TraceNames)
	require.NotNil(t, byMsg.Traces[1].TraceNames, "[] rather than null")
	b.doJSON("GET", "/api/v1/traces/"+pid+"/none", nil, http.StatusOK, &byMsg)
	require.Empty(t, byMsg.Traces)
	status, _ := b.do("GET", "/api/v1/traces/not-a-uuid/t1", nil)
	require.Equal(t, http.StatusBadRequest, status)

	// by-name: a static segment wins over /traces/{partitionId}/{transactionId},
	// and the name is URL-decoded (it holds a space and an escaped slash).
	var page struct {
		Traces     []wireTrace `json:"traces"`
		Total      int         `json:"total"`
		Pagination struct{ Limit, Offset int }
	}
	named := "/api/v1/traces/by-name/" + url.PathEscape("order 1/x")
	resp, err := http.Get(b.url + named + "?limit=2")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 3, page.Total)
	require.Len(t, page.Traces, 2)
	require.Equal(t, 2, page.Pagination.Limit)
	first := page.Traces[0]
	require.Equal(t, "t1", first.TransactionID)
	require.Equal(t, "tq", first.QueueName)
	require.Equal(t, "p", first.PartitionName)
	require.Equal(t, pid, first.PartitionID)
	require.JSONEq(t, `{"order":1}`, string(first.MessagePayload))

	// Through b.do (validated against the spec) with a name without a slash.
	b.doJSON("GET", "/api/v1/traces/by-name/user-2", nil, http.StatusOK, &page)
	require.Equal(t, 1, page.Total)
	require.Equal(t, "t1", page.Traces[0].TransactionID)
	b.doJSON("GET", "/api/v1/traces/by-name/"+url.PathEscape("order 1")+"?offset=0", nil, http.StatusOK, &page)
	require.Zero(t, page.Total)
	require.Empty(t, page.Traces)
	b.trace(pid, "t2", 5, "paged")
	b.trace(pid, "t1", 6, "paged")
	b.doJSON("GET", "/api/v1/traces/by-name/paged?limit=1&offset=1", nil, http.StatusOK, &page)
	require.Equal(t, 2, page.Total)
	require.Len(t, page.Traces, 1)
	require.JSONEq(t, `6`, string(page.Traces[0].Data))
	b.doJSON("GET", "/api/v1/traces/by-name/paged?offset=5", nil, http.StatusOK, &page)
	require.Equal(t, 2, page.Total)
	require.Empty(t, page.Traces)

	var names struct {
		TraceNames []struct {
			TraceName    string `json:"trace_name"`
			TraceCount   int    `json:"trace_count"`
			MessageCount int    `json:"message_count"`
			LastSeen     string `json:"last_seen"`
		} `json:"trace_names"`
		Total int `json:"total"`
	}
	b.doJSON("GET", "/api/v1/traces/names", nil, http.StatusOK, &names)
	require.Equal(t, 3, names.Total)
	require.Len(t, names.TraceNames, 3)
	require.Equal(t, "paged", names.TraceNames[0].TraceName, "most recently used first")
	counts := map[string][2]int{}
	for _, n := range names.TraceNames {
		counts[n.TraceName] = [2]int{n.TraceCount, n.MessageCount}
		require.Regexp(t, `Z$`, n.LastSeen)
	}
	require.Equal(t, map[string][2]int{"paged": {2, 2}, "order 1/x": {3, 2}, "user-2": {1, 1}}, counts)
	b.doJSON("GET", "/api/v1/traces/names?limit=1&offset=2", nil, http.StatusOK, &names)
	require.Equal(t, 3, names.Total)
	require.Len(t, names.TraceNames, 1)
	status, _ = b.do("GET", "/api/v1/traces/names?limit=0", nil)
	require.Equal(t, http.StatusBadRequest, status)

	// Deleting the message takes its traces with it.
	b.doJSON("DELETE", "/api/v1/messages/"+pid+"/t1", nil, http.StatusOK, nil)
	b.doJSON("GET", "/api/v1/traces/"+pid+"/t1", nil, http.StatusOK, &byMsg)
	require.Empty(t, byMsg.Traces)
	b.doJSON("GET", "/api/v1/traces/by-name/paged", nil, http.StatusOK, &page)
	require.Equal(t, 1, page.Total)
}
