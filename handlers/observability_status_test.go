package handlers

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/metrics"
)

func TestStatusQueueDetailAndMessages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.configure("detail", &client.QueueOptions{LeaseTime: ptr(30), RetentionEnabled: ptr(true), RetentionSeconds: ptr(600)})
	for i := range 4 {
		b.push(item("detail", "a", fmt.Sprintf("a%d", i), i))
	}
	b.push(item("detail", "b", "b0", 0))
	p := b.pop("/api/v1/pop/queue/detail/partition/a?batch=2")
	require.True(t, b.ack(p.Messages[0].TransactionID, p.PartitionID, "completed", "", p.LeaseID).Success)

	var d struct {
		Queue struct {
			Name   string
			Config struct {
				LeaseTime        int
				RetentionSeconds int
				RetentionEnabled bool
			}
		}
		Partitions []struct {
			Name                                       string
			Messages                                   struct{ Total, Pending, Processing, Completed int }
			Cursor                                     struct{ TotalConsumed, BatchesConsumed int }
			OldestMessage, NewestMessage, LastActivity *string
		}
		Totals struct {
			Partitions, Total, Pending, Processing, Completed int
		}
		Pagination struct {
			Limit, Offset int
			Truncated     bool
		}
	}
	b.doJSON("GET", "/api/v1/status/queues/detail?includePartitions=true", nil, http.StatusOK, &d)
	require.Equal(t, 30, d.Queue.Config.LeaseTime)
	require.Equal(t, 600, d.Queue.Config.RetentionSeconds)
	require.True(t, d.Queue.Config.RetentionEnabled)
	require.Equal(t, 3, d.Totals.Partitions, "Default, a and b")
	require.Equal(t, 5, d.Totals.Total)
	require.Equal(t, 4, d.Totals.Pending)
	require.Equal(t, 1, d.Totals.Processing)
	require.Equal(t, 1, d.Totals.Completed)
	require.Len(t, d.Partitions, 3)
	names := make([]string, 3)
	var a, def = d.Partitions[0], d.Partitions[0]
	for i, p := range d.Partitions {
		names[i] = p.Name
		switch p.Name {
		case "a":
			a = p
		case "Default":
			def = p
		}
	}
	require.ElementsMatch(t, []string{"Default", "a", "b"}, names)
	require.Equal(t, struct{ Total, Pending, Processing, Completed int }{4, 3, 1, 1}, a.Messages)
	require.Equal(t, 1, a.Cursor.TotalConsumed)
	require.NotNil(t, a.OldestMessage)
	require.NotNil(t, a.NewestMessage)
	require.NotNil(t, a.LastActivity)
	require.Nil(t, def.OldestMessage, "Default is empty")

	b.doJSON("GET", "/api/v1/status/queues/detail?limit=1&offset=1", nil, http.StatusOK, &d)
	require.Len(t, d.Partitions, 1)
	require.Equal(t, names[1], d.Partitions[0].Name)
	require.True(t, d.Pagination.Truncated)
	require.Equal(t, 5, d.Totals.Total, "totals cover every partition")

	status, raw := b.do("GET", "/api/v1/status/queues/missing", nil)
	require.Equal(t, http.StatusNotFound, status, "%s", raw)
	require.JSONEq(t, `{"error":"Queue not found"}`, string(raw))
	status, _ = b.do("GET", "/api/v1/status/queues/missing/messages", nil)
	require.Equal(t, http.StatusNotFound, status)

	var msgs []struct {
		TransactionID string `json:"transactionId"`
		QueuePath     string `json:"queuePath"`
		Status        string `json:"status"`
	}
	b.doJSON("GET", "/api/v1/status/queues/detail/messages?limit=2", nil, http.StatusOK, &msgs)
	require.Len(t, msgs, 2, "limit works (it did not in the reference)")
	b.doJSON("GET", "/api/v1/status/queues/detail/messages?limit=50&offset=1", nil, http.StatusOK, &msgs)
	require.Len(t, msgs, 4)
	statuses := map[string]string{}
	b.doJSON("GET", "/api/v1/status/queues/detail/messages", nil, http.StatusOK, &msgs)
	for _, m := range msgs {
		statuses[m.TransactionID] = m.Status
	}
	require.Equal(t, map[string]string{"a0": "completed", "a1": "processing", "a2": "pending", "a3": "pending", "b0": "pending"}, statuses)
}

func TestAnalyticsParkedRetentionAndBadInput(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := t.Context()
	t0 := time.Now().UTC().Truncate(time.Minute)
	b.configure("parked", nil)
	require.NoError(t, b.jobs.Tick(ctx, t0))
	unpark := b.reg.Park("parked")
	require.NoError(t, b.jobs.Tick(ctx, t0.Add(20*time.Second)))
	require.NoError(t, b.jobs.Tick(ctx, t0.Add(40*time.Second)))
	unpark()
	require.NoError(t, b.jobs.Tick(ctx, t0.Add(time.Minute)))
	w := window(t0.Add(-time.Minute), t0.Add(2*time.Minute))

	var parked struct {
		Series []struct {
			Bucket, QueueName, Hostname string
			ParkedCount                 float64
		}
		Replicas []struct{ Hostname string }
	}
	b.doJSON("GET", "/api/v1/analytics/queue-parked-replicas?"+w, nil, http.StatusOK, &parked)
	require.Len(t, parked.Series, 1)
	require.Equal(t, "parked", parked.Series[0].QueueName)
	require.Equal(t, fmtBucket(t0), parked.Series[0].Bucket)
	require.InDelta(t, 2.0/3, parked.Series[0].ParkedCount, 0.01, "parked in 2 of the minute's 3 samples")
	require.Len(t, parked.Replicas, 1)

	var ops struct {
		Series []struct {
			QueueName   string
			ParkedCount float64
		}
	}
	b.doJSON("GET", "/api/v1/analytics/queue-ops?"+w, nil, http.StatusOK, &ops)
	found := false
	for _, s := range ops.Series {
		if s.QueueName == "parked" && s.ParkedCount > 0 {
			found = true
		}
	}
	require.True(t, found)

	// Nothing deleted yet: an empty series with zero totals.
	var ret struct {
		Series []any
		Totals struct{ TotalMsgs int }
	}
	b.doJSON("GET", "/api/v1/analytics/retention", nil, http.StatusOK, &ret)
	require.Empty(t, ret.Series)

	var pg struct {
		Database   string
		TableSizes []struct {
			Table          string
			TotalSizeBytes int
			TotalSize      string
		}
		CacheSummary struct{ Tables struct{ HitRatio float64 } }
	}
	b.doJSON("GET", "/api/v1/analytics/postgres-stats", nil, http.StatusOK, &pg)
	require.NotEmpty(t, pg.Database)
	require.NotEmpty(t, pg.TableSizes)

	for _, path := range []string{
		"/api/v1/status?from=yesterday",
		"/api/v1/status?from=2024-01-02T00:00:00Z&to=2024-01-01T00:00:00Z",
		"/api/v1/analytics/queue-ops?from=2020-01-01T00:00:00Z&to=2024-01-01T00:00:00Z",
		"/api/v1/status/analytics?interval=fortnight",
		"/api/v1/status/analytics?interval=minute&from=2024-01-01T00:00:00Z&to=2024-03-01T00:00:00Z",
		"/api/v1/analytics/worker-metrics?workerId=abc",
	} {
		status, raw := b.do("GET", path, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, raw)
	}
	// Wider ranges take wider buckets.
	for _, c := range []struct {
		span    time.Duration
		minutes int
	}{{time.Hour, 1}, {6 * time.Hour, 5}, {24 * time.Hour, 15}, {7 * 24 * time.Hour, 60}, {30 * 24 * time.Hour, 360}} {
		var r struct{ BucketMinutes int }
		now := time.Now().UTC()
		b.doJSON("GET", "/api/v1/analytics/queue-ops?"+window(now.Add(-c.span), now), nil, http.StatusOK, &r)
		require.Equal(t, c.minutes, r.BucketMinutes, c.span)
	}
}

// Two brokers on one database: each writes its own rows; the cluster
// numbers are their sums.
func TestMetricsFromTwoBrokersAddUp(t *testing.T) {
	t.Parallel()
	a := setupAdmin(t, adminOpts{hostname: "broker-a"})
	b := setupAdmin(t, adminOpts{hostname: "broker-b", pool: a.pool})
	ctx := t.Context()
	t0 := time.Now().UTC().Truncate(time.Minute)
	require.NoError(t, a.jobs.Tick(ctx, t0))
	require.NoError(t, b.jobs.Tick(ctx, t0))
	a.push(item("shared", "", "a1", 1), item("shared", "", "a2", 2))
	b.push(item("shared", "", "b1", 1))
	require.NoError(t, a.jobs.Tick(ctx, t0.Add(time.Minute)))
	require.NoError(t, b.jobs.Tick(ctx, t0.Add(time.Minute)))

	var st struct {
		Throughput []struct{ Ingested int }
		Messages   struct{ Total int }
		Workers    []struct{ Hostname string }
	}
	a.doJSON("GET", "/api/v1/status?"+window(t0.Add(-time.Minute), t0.Add(2*time.Minute)), nil, http.StatusOK, &st)
	require.Len(t, st.Throughput, 1)
	require.Equal(t, 3, st.Throughput[0].Ingested)
	require.Equal(t, 3, st.Messages.Total)
	require.Len(t, st.Workers, 2)

	var sys struct{ ReplicaCount int }
	b.doJSON("GET", "/api/v1/analytics/system-metrics?"+window(t0.Add(-time.Minute), t0.Add(2*time.Minute)), nil, http.StatusOK, &sys)
	require.Equal(t, 2, sys.ReplicaCount)
	b.doJSON("GET", "/api/v1/analytics/system-metrics?hostname=broker-b&"+window(t0.Add(-time.Minute), t0.Add(2*time.Minute)), nil, http.StatusOK, &sys)
	require.Equal(t, 1, sys.ReplicaCount)
}

// The hot path records without a global lock: concurrent recorders on many
// queues add up exactly.
func TestRegistryConcurrentRecording(t *testing.T) {
	t.Parallel()
	reg := metrics.New()
	const workers, perWorker = 8, 1000
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range perWorker {
				q := fmt.Sprintf("q%d", (w+i)%16)
				reg.Pushed(q, 2)
				reg.Popped(q, 1, 10*time.Millisecond, time.Duration(i)*time.Millisecond)
				reg.Acked(q, 1, 1, 0, 0)
				reg.Request(metrics.OpPush)
			}
		}()
	}
	for range workers {
		<-done
	}
	tot := metrics.Totals(reg.Queues())
	require.Equal(t, int64(workers*perWorker*2), tot.PushMessages)
	require.Equal(t, int64(workers*perWorker), tot.PopMessages)
	require.Equal(t, int64(workers*perWorker*10), tot.LagSumMs)
	require.Equal(t, int64(workers*perWorker), reg.Process().Of(metrics.OpPush))
	perQueue, maxLag := reg.TakeMaxLag()
	require.Len(t, perQueue, 16)
	require.Equal(t, int64(perWorker-1), maxLag)
	_, maxLag = reg.TakeMaxLag()
	require.Zero(t, maxLag, "taking starts a new maximum")
}

// A transaction counts once, per queue it touched, and its pushes and acks
// count as messages but not as push or ack requests.
func TestTransactionMetrics(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.push(item("in", "", "src", 1))
	p := b.pop("/api/v1/pop/queue/in")
	var res txResponse
	b.doJSON("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{
			map[string]any{"type": "ack", "transactionId": "src", "partitionId": p.PartitionID},
			map[string]any{"type": "push", "items": []any{item("out", "", "a", 1), item("out", "", "b", 2)}},
		},
	}, http.StatusOK, &res)
	require.True(t, res.Success, res.Error)
	proc := b.reg.Process()
	require.Equal(t, int64(1), proc.Of(metrics.OpTransaction))
	require.Equal(t, int64(1), proc.Of(metrics.OpPush), "the first push only")
	require.Zero(t, proc.Of(metrics.OpAck))
	byQueue := map[string]metrics.QueueCounters{}
	for _, q := range b.reg.Queues() {
		byQueue[q.Queue] = q.QueueCounters
	}
	require.Equal(t, int64(2), byQueue["out"].PushMessages)
	require.Equal(t, int64(1), byQueue["out"].Transactions)
	require.Equal(t, int64(1), byQueue["in"].AckSuccess)
	require.Equal(t, int64(1), byQueue["in"].Transactions)
}
