package handlers

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigureReplacesOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var c struct {
		Configured  bool   `json:"configured"`
		PartitionID string `json:"partitionId"`
		Namespace   string `json:"namespace"`
		Options     struct {
			LeaseTime  int `json:"leaseTime"`
			RetryLimit int `json:"retryLimit"`
		} `json:"options"`
	}
	b.doJSON("POST", "/api/v1/configure", map[string]any{"queue": "cfg", "namespace": "ns", "options": map[string]any{"leaseTime": 10, "retryLimit": 7}}, http.StatusOK, &c)
	require.True(t, c.Configured)
	require.NotEmpty(t, c.PartitionID)
	require.Equal(t, "ns", c.Namespace)
	require.Equal(t, 10, c.Options.LeaseTime)
	b.doJSON("POST", "/api/v1/configure", map[string]any{"queue": "cfg"}, http.StatusOK, &c)
	require.Equal(t, 300, c.Options.LeaseTime, "configure is a full replace")
	require.Equal(t, 3, c.Options.RetryLimit)
	for _, body := range []any{
		map[string]any{},
		map[string]any{"queue": "bad name"},
		map[string]any{"queue": ""}, // the JS load test's queue(''): stays a 400
		map[string]any{"queue": "q", "options": map[string]any{"leaseTime": "x"}},
		map[string]any{"queue": "q", "options": map[string]any{"retryLimit": -1}},
	} {
		status, raw := b.do("POST", "/api/v1/configure", body)
		require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	}
}

func TestQueueGetAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, _ := b.do("GET", "/api/v1/resources/queues/missing", nil)
	require.Equal(t, http.StatusNotFound, status)
	b.push(item("gone", "", "", 1))
	p := b.pop("/api/v1/pop/queue/gone?consumerGroup=g&subscriptionMode=all")
	require.NotNil(t, p)
	var d struct{ Deleted, Existed bool }
	b.doJSON("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK, &d)
	require.True(t, d.Deleted)
	require.True(t, d.Existed)
	b.doJSON("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK, &d)
	require.False(t, d.Existed)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM queen.messages) + (SELECT count(*) FROM queen.partition_consumers) + (SELECT count(*) FROM queen.consumer_groups_metadata)").Scan(&n))
	require.Zero(t, n)
	// A push after the delete re-creates the queue even though this broker cached it.
	require.Equal(t, "queued", b.push(item("gone", "", "", 1))[0].Status)
}

func TestConsumerGroupSeekSubscriptionAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("cg", "a", "a1", 1), item("cg", "b", "b1", 1))
	var seek struct {
		PartitionsUpdated int `json:"partitionsUpdated"`
	}
	b.doJSON("POST", "/api/v1/consumer-groups/late/queues/cg/seek", map[string]any{"toEnd": true}, http.StatusOK, &seek)
	require.Equal(t, 2, seek.PartitionsUpdated, "partitions never read move too")
	require.Nil(t, b.pop("/api/v1/pop/queue/cg?consumerGroup=late"))
	b.push(item("cg", "a", "a2", 2))
	p := b.pop("/api/v1/pop/queue/cg?consumerGroup=late&batch=10")
	require.Len(t, p.Messages, 1)
	require.Equal(t, "a2", p.Messages[0].TransactionID)

	// Seek back to a time before everything: the group replays.
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	b.doJSON("POST", "/api/v1/consumer-groups/late/queues/cg/seek", map[string]any{"timestamp": past}, http.StatusOK, &seek)
	p = b.pop("/api/v1/pop/queue/cg/partition/a?consumerGroup=late&batch=10")
	require.Len(t, p.Messages, 2)

	var ps struct {
		Updated bool `json:"updated"`
	}
	b.doJSON("POST", "/api/v1/consumer-groups/late/queues/cg/partitions/b/seek", nil, http.StatusOK, &ps)
	require.True(t, ps.Updated)
	status, _ := b.do("POST", "/api/v1/consumer-groups/late/queues/cg/partitions/zz/seek", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.do("POST", "/api/v1/consumer-groups/late/queues/nope/seek", map[string]any{"toEnd": true})
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.do("POST", "/api/v1/consumer-groups/late/queues/cg/seek", map[string]any{})
	require.Equal(t, http.StatusBadRequest, status)

	b.pop("/api/v1/pop/queue/cg?consumerGroup=sub&subscriptionMode=new")
	var sub struct {
		RowsUpdated int `json:"rowsUpdated"`
	}
	b.doJSON("POST", "/api/v1/consumer-groups/sub/subscription", map[string]any{"subscriptionTimestamp": past}, http.StatusOK, &sub)
	require.Equal(t, 1, sub.RowsUpdated)
	status, _ = b.do("POST", "/api/v1/consumer-groups/sub/subscription", map[string]any{})
	require.Equal(t, http.StatusBadRequest, status)

	var del struct {
		DeletedPartitions int `json:"deletedPartitions"`
	}
	b.doJSON("DELETE", "/api/v1/consumer-groups/late/queues/cg", nil, http.StatusOK, &del)
	require.Equal(t, 2, del.DeletedPartitions)
	b.doJSON("DELETE", "/api/v1/consumer-groups/sub?deleteMetadata=true", nil, http.StatusOK, &del)
}

func TestTraces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("tr", "", "m", 1))
	var tr struct {
		Success bool   `json:"success"`
		TraceID string `json:"traceId"`
	}
	b.doJSON("POST", "/api/v1/traces", map[string]any{
		"transactionId": "m", "partitionId": out[0].PartitionID, "data": map[string]any{"text": "hi"},
		"traceNames": []string{"order-1", "user-2"},
	}, http.StatusCreated, &tr)
	require.True(t, tr.Success)
	b.doJSON("POST", "/api/v1/traces", map[string]any{
		"transactionId": "m", "partitionId": out[0].PartitionID, "data": 1, "traceNames": "solo",
	}, http.StatusCreated, &tr)
	status, _ := b.do("POST", "/api/v1/traces", map[string]any{"transactionId": "none", "partitionId": out[0].PartitionID, "data": 1})
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.do("POST", "/api/v1/traces", map[string]any{"transactionId": "m", "partitionId": out[0].PartitionID})
	require.Equal(t, http.StatusBadRequest, status)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.message_trace_names").Scan(&n))
	require.Equal(t, 3, n)
}
