package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/jobs"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/migration"
	"github.com/queenforgo/queen/sql/pgtest"
)

// Tests of the observability surface: the metrics registry, the collector
// and the routes that read its rows. Time is injected: the collector is
// driven with Tick/Flush at chosen minutes, never by its own timers.

// adminBundle is a broker with its metrics collector and background jobs
// (not started: tests run them directly).
type adminBundle struct {
	*testBundle
	jobs *jobs.Services
	reg  *metrics.Registry
}

type adminOpts struct {
	pool      *pgxpool.Pool // share a database with another bundle
	hostname  string
	migration *migration.Runner
	batchSize int
}

func setupAdmin(t *testing.T, opts ...adminOpts) *adminBundle {
	t.Helper()
	var o adminOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.pool == nil {
		o.pool = pgtest.NewPool(t)
	}
	if o.hostname == "" {
		o.hostname = "broker-a"
	}
	reg := metrics.New()
	js := jobs.New(jobs.Config{Pool: o.pool, Metrics: reg, Hostname: o.hostname, Port: 6632, PID: 4242, BatchSize: o.batchSize})
	srv := newServer(t, testConfig{
		Pool: o.pool, RepollInterval: 50 * time.Millisecond, Metrics: reg, Migration: o.migration,
		StatsFlushFunc: func(ctx context.Context) error { return js.Flush(ctx, time.Now()) },
	})
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(js.Stop)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain)
	doc, err := api.GetSpec()
	require.NoError(t, err)
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &adminBundle{testBundle: &testBundle{t: t, srv: srv, pool: o.pool, url: hs.URL, router: router}, jobs: js, reg: reg}
}

// window is the query string of a time window.
func window(from, to time.Time) string {
	return "from=" + url.QueryEscape(from.UTC().Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.UTC().Format(time.RFC3339))
}

// workload is the scripted traffic the dashboard numbers are checked
// against, spread over two minutes t0 and t1 of the collector:
//
//	t0: orders gets 10 messages in two pushes (6 + 4), billing 5 in one;
//	    orders' messages are made 30 s old, then one pop takes all 10;
//	    one batch ack completes 8, dead-letters the 9th and fails the 10th
//	    (retried later); a pop on the known, now empty queue "idle" finds
//	    nothing.
//	t1: orders gets 3 more messages.
func workload(b *adminBundle, t0 time.Time) {
	b.t.Helper()
	ctx := b.t.Context()
	require.NoError(b.t, b.jobs.Tick(ctx, t0))
	b.configure("idle", nil)
	var first []map[string]any
	for i := range 6 {
		first = append(first, item("orders", "", fmt.Sprintf("o%d", i), i))
	}
	b.push(first...)
	var second []map[string]any
	for i := 6; i < 10; i++ {
		second = append(second, item("orders", "", fmt.Sprintf("o%d", i), i))
	}
	b.push(second...)
	var bill []map[string]any
	for i := range 5 {
		bill = append(bill, item("billing", "", fmt.Sprintf("b%d", i), i))
	}
	b.push(bill...)
	b.exec(`UPDATE queen.messages m SET created_at = m.created_at - interval '30 seconds'
	        FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
	        WHERE p.id = m.partition_id AND q.name = 'orders'`)
	p := b.pop("/api/v1/pop/queue/orders?batch=10")
	require.Len(b.t, p.Messages, 10)
	var acks []map[string]any
	for i, m := range p.Messages {
		status := "completed"
		switch i {
		case 8:
			status = "dlq"
		case 9:
			status = "failed"
		}
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status})
	}
	var res []ackResult
	b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, http.StatusOK, &res)
	for _, r := range res {
		require.True(b.t, r.Success, "%+v", r)
	}
	require.Nil(b.t, b.pop("/api/v1/pop/queue/idle"))

	require.NoError(b.t, b.jobs.Tick(ctx, t0.Add(time.Minute))) // writes minute t0
	b.push(item("orders", "", "late-0", 0), item("orders", "", "late-1", 1), item("orders", "", "late-2", 2))
}

func TestDashboardNumbersAfterWorkload(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	t0 := time.Now().UTC().Truncate(time.Minute)
	t1 := t0.Add(time.Minute)
	workload(b, t0)
	// The refresh route writes the current minute (t1) so far.
	var refresh struct {
		System struct{ Flushed bool }
		Queue  struct{ QueuesUpdated int }
	}
	b.doJSON("POST", "/api/v1/stats/refresh", nil, http.StatusOK, &refresh)
	require.True(t, refresh.System.Flushed)
	require.Equal(t, 3, refresh.Queue.QueuesUpdated)
	require.NoError(t, b.jobs.Flush(t.Context(), t1.Add(30*time.Second))) // a second write of t1 adds nothing twice
	w := window(t0.Add(-time.Minute), t1.Add(2*time.Minute))

	var status struct {
		BucketMinutes int `json:"bucketMinutes"`
		PointCount    int `json:"pointCount"`
		Throughput    []struct {
			Timestamp        string   `json:"timestamp"`
			Ingested         int      `json:"ingested"`
			Processed        int      `json:"processed"`
			PopMessages      int      `json:"popMessages"`
			IngestedPerSec   float64  `json:"ingestedPerSecond"`
			AvgLagMs         float64  `json:"avgLagMs"`
			MaxLagMs         float64  `json:"maxLagMs"`
			AckFailed        int      `json:"ackFailed"`
			DlqCount         int      `json:"dlqCount"`
			QueenCpuUserPct  *float64 `json:"queenCpuUserPct"`
			QueenRssMb       *float64 `json:"queenRssMb"`
			DbPoolSize       *float64 `json:"dbPoolSize"`
			MinFreeSlots     float64  `json:"minFreeSlots"`
			AvgEventLoopLag  float64  `json:"avgEventLoopLagMs"`
			ProcessedPerSecd float64  `json:"processedPerSecond"`
		} `json:"throughput"`
		Queues []struct {
			Name          string `json:"name"`
			Partitions    int    `json:"partitions"`
			TotalConsumed int    `json:"totalConsumed"`
		} `json:"queues"`
		Messages struct {
			Total, Pending, Processing, Completed, Failed, DeadLetter int
			Requests                                                  struct{ Push, Pop, Ack float64 }
			BatchEfficiency                                           struct{ Push, Pop, Ack float64 }
		} `json:"messages"`
		Leases          struct{ Active int } `json:"leases"`
		DeadLetterQueue struct {
			TotalMessages, Current, AffectedPartitions int
			TopErrors                                  []struct {
				Error string
				Count int
			}
		} `json:"deadLetterQueue"`
		Workers []struct {
			Hostname          string `json:"hostname"`
			MessagesProcessed int    `json:"messagesProcessed"`
		} `json:"workers"`
		Errors   struct{ DbErrors, AckFailed, DlqMessages int } `json:"errors"`
		StatsAge int                                            `json:"statsAge"`
	}
	b.doJSON("GET", "/api/v1/status?"+w, nil, http.StatusOK, &status)
	require.Equal(t, 1, status.BucketMinutes)
	require.Equal(t, 2, status.PointCount)
	require.Len(t, status.Throughput, 2)
	newest, older := status.Throughput[0], status.Throughput[1]
	require.Equal(t, fmtBucket(t1), newest.Timestamp, "newest first, second-precision keys")
	require.Equal(t, fmtBucket(t0), older.Timestamp)
	require.Equal(t, 3, newest.Ingested)
	require.Equal(t, 15, older.Ingested)
	require.Equal(t, 10, older.PopMessages)
	require.Equal(t, 10, older.Processed, "every applied ack")
	require.Equal(t, 2, older.AckFailed, "the dlq and the failed ack")
	require.Equal(t, 1, older.DlqCount)
	require.Equal(t, 0.25, older.IngestedPerSec)
	require.InDelta(t, 30000, older.AvgLagMs, 5000, "messages were 30 s old when popped")
	require.GreaterOrEqual(t, older.MaxLagMs, older.AvgLagMs)
	require.NotNil(t, older.QueenCpuUserPct, "system samples of the minute")
	require.NotNil(t, older.QueenRssMb)
	require.Positive(t, *older.QueenRssMb)
	require.NotNil(t, older.DbPoolSize)

	require.Equal(t, 18, status.Messages.Total)
	// orders: the failed 10th and the 3 late ones; billing: 5.
	require.Equal(t, 9, status.Messages.Pending)
	require.Equal(t, 8, status.Messages.Completed)
	require.Equal(t, 2, status.Messages.Failed)
	require.Equal(t, 1, status.Messages.DeadLetter)
	require.Equal(t, float64(4), status.Messages.Requests.Push)
	require.Equal(t, float64(2), status.Messages.Requests.Pop)
	require.Equal(t, float64(1), status.Messages.Requests.Ack)
	require.Equal(t, 4.5, status.Messages.BatchEfficiency.Push)
	require.Equal(t, 10.0, status.Messages.BatchEfficiency.Ack)
	require.Equal(t, 1, status.DeadLetterQueue.TotalMessages)
	require.Equal(t, 1, status.DeadLetterQueue.Current)
	require.Equal(t, 1, status.DeadLetterQueue.AffectedPartitions)
	require.Len(t, status.DeadLetterQueue.TopErrors, 1)
	require.Equal(t, 1, status.DeadLetterQueue.TopErrors[0].Count)
	require.Equal(t, struct{ DbErrors, AckFailed, DlqMessages int }{0, 2, 1}, status.Errors)
	require.Len(t, status.Queues, 2, "queues that ever received a message")
	require.Equal(t, "billing", status.Queues[0].Name)
	require.Equal(t, "orders", status.Queues[1].Name)
	require.Equal(t, 9, status.Queues[1].TotalConsumed, "8 completed and 1 dead-lettered passed the cursor")
	require.Len(t, status.Workers, 1)
	require.Equal(t, "broker-a", status.Workers[0].Hostname)
	require.GreaterOrEqual(t, status.StatsAge, 0)

	// Filtered by queue, the throughput is the queue's own.
	b.doJSON("GET", "/api/v1/status?queue=orders&"+w, nil, http.StatusOK, &status)
	require.Len(t, status.Throughput, 2)
	require.Equal(t, 3, status.Throughput[0].Ingested)
	require.Equal(t, 10, status.Throughput[1].Ingested)
	require.Equal(t, 10, status.Throughput[1].PopMessages)
	require.InDelta(t, 30000, status.Throughput[1].AvgLagMs, 5000)
	require.Len(t, status.Queues, 1)
	b.doJSON("GET", "/api/v1/status?namespace=nope&"+w, nil, http.StatusOK, &status)
	require.Empty(t, status.Queues)
	for _, tp := range status.Throughput {
		require.Zero(t, tp.Ingested, "no queue matches")
	}

	// Depth and dead letters per queue.
	var sq struct {
		Queues []struct {
			Name     string
			Messages struct{ Total, Pending, Processing, Completed, DeadLetter int }
		}
		Total int
	}
	b.doJSON("GET", "/api/v1/status/queues", nil, http.StatusOK, &sq)
	require.Equal(t, 3, sq.Total)
	byName := map[string]struct{ Total, Pending, Processing, Completed, DeadLetter int }{}
	for _, q := range sq.Queues {
		byName[q.Name] = q.Messages
	}
	require.Equal(t, struct{ Total, Pending, Processing, Completed, DeadLetter int }{13, 4, 0, 8, 1}, byName["orders"])
	require.Equal(t, struct{ Total, Pending, Processing, Completed, DeadLetter int }{5, 5, 0, 0, 0}, byName["billing"])
	b.doJSON("GET", "/api/v1/status/queues?limit=1&offset=1", nil, http.StatusOK, &sq)
	require.Len(t, sq.Queues, 1)

	var lag []struct {
		QueueName  string  `json:"queueName"`
		PopCount   int     `json:"popCount"`
		AvgLagMs   float64 `json:"avgLagMs"`
		BucketTime string  `json:"bucketTime"`
	}
	b.doJSON("GET", "/api/v1/analytics/queue-lag?"+w, nil, http.StatusOK, &lag)
	require.Len(t, lag, 1)
	require.Equal(t, "orders", lag[0].QueueName)
	require.Equal(t, 10, lag[0].PopCount)
	require.Equal(t, fmtBucket(t0), lag[0].BucketTime)
	require.InDelta(t, 30000, lag[0].AvgLagMs, 5000)

	var ops struct {
		BucketMinutes int
		Queues        []string
		Series        []struct {
			Bucket, QueueName                                      string
			PushRequests, PushMessages, PopMessages, PopEmpty      int
			AckRequests, AckSuccess, AckFailed, DlqCount           int
			PartitionsCreated                                      int
			PushPerSecond, PopPerSecond, AckPerSecond, ParkedCount float64
		}
	}
	b.doJSON("GET", "/api/v1/analytics/queue-ops?"+w, nil, http.StatusOK, &ops)
	require.Equal(t, []string{"billing", "idle", "orders"}, ops.Queues)
	created := 0
	type opsKey struct{ bucket, queue string }
	series := map[opsKey]int{}
	for i, s := range ops.Series {
		created += s.PartitionsCreated
		series[opsKey{s.Bucket, s.QueueName}] = i
	}
	require.Equal(t, 3, created, "one Default partition per queue")
	o0 := ops.Series[series[opsKey{fmtBucket(t0), "orders"}]]
	require.Equal(t, 2, o0.PushRequests)
	require.Equal(t, 10, o0.PushMessages)
	require.Equal(t, 10, o0.PopMessages)
	require.Equal(t, 1, o0.AckRequests)
	require.Equal(t, 8, o0.AckSuccess)
	require.Equal(t, 2, o0.AckFailed)
	require.Equal(t, 1, o0.DlqCount)
	require.Equal(t, 1, ops.Series[series[opsKey{fmtBucket(t0), "idle"}]].PopEmpty)
	require.Equal(t, 3, ops.Series[series[opsKey{fmtBucket(t1), "orders"}]].PushMessages)

	var wm struct {
		TimeSeries []struct {
			Timestamp                                 string
			PushMessages, PopMessages, AckMessages    int
			PushRequests, PopRequests, AckRequests    int
			JobsDone, AckSuccess, AckFailed, DlqCount int
		}
		Queues []struct {
			QueueName string
			PopCount  int
		}
		Summary struct {
			TotalPushMessages, TotalPopMessages, TotalAckMessages, TotalDlq, PendingMessages int
		}
		Workers []struct{ Hostname string }
	}
	b.doJSON("GET", "/api/v1/analytics/worker-metrics?"+w, nil, http.StatusOK, &wm)
	require.Len(t, wm.TimeSeries, 2)
	w0 := wm.TimeSeries[1]
	require.Equal(t, fmtBucket(t0), w0.Timestamp)
	require.Equal(t, 15, w0.PushMessages)
	require.Equal(t, 3, w0.PushRequests)
	require.Equal(t, 2, w0.PopRequests)
	require.Equal(t, 1, w0.AckRequests)
	require.Equal(t, 6, w0.JobsDone)
	require.Equal(t, 8, w0.AckSuccess)
	require.Equal(t, 1, w0.DlqCount)
	require.Equal(t, []struct {
		QueueName string
		PopCount  int
	}{{"orders", 10}}, wm.Queues)
	require.Equal(t, 18, wm.Summary.TotalPushMessages)
	require.Equal(t, 9, wm.Summary.PendingMessages)
	require.Len(t, wm.Workers, 1)

	var sys struct {
		ReplicaCount, PointCount int
		Replicas                 []struct {
			Hostname   string
			TimeSeries []struct {
				Timestamp   string
				SampleCount int
				Metrics     struct {
					Cpu struct {
						UserUs struct{ Avg, Min, Max, Last float64 } `json:"user_us"`
					}
					Memory struct {
						RssBytes struct{ Avg, Last float64 } `json:"rss_bytes"`
					}
					Database struct {
						PoolSize struct{ Last float64 } `json:"pool_size"`
					}
				}
			}
		}
	}
	b.doJSON("GET", "/api/v1/analytics/system-metrics?"+w, nil, http.StatusOK, &sys)
	require.Equal(t, 1, sys.ReplicaCount)
	require.Equal(t, "broker-a", sys.Replicas[0].Hostname)
	require.Len(t, sys.Replicas[0].TimeSeries, 2)
	require.Equal(t, fmtBucket(t0), sys.Replicas[0].TimeSeries[0].Timestamp, "oldest first")
	require.Positive(t, sys.Replicas[0].TimeSeries[0].Metrics.Memory.RssBytes.Last)
	require.Positive(t, sys.Replicas[0].TimeSeries[0].Metrics.Database.PoolSize.Last)

	var an struct {
		DataPoints []struct {
			Timestamp string
			Messages  int
		}
		Interval string
	}
	b.doJSON("GET", "/api/v1/status/analytics?interval=minute&"+w, nil, http.StatusOK, &an)
	require.Equal(t, "minute", an.Interval)
	require.Len(t, an.DataPoints, 5, "every minute of the window, empty ones too")
	require.Equal(t, 0, an.DataPoints[0].Messages)
	require.Equal(t, 15, an.DataPoints[1].Messages)
	require.Equal(t, 3, an.DataPoints[2].Messages)
	b.doJSON("GET", "/api/v1/status/analytics?interval=hour&queue=billing&"+w, nil, http.StatusOK, &an)
	total := 0
	for _, d := range an.DataPoints {
		total += d.Messages
	}
	require.Equal(t, 5, total)

	// The process counters since boot.
	var snap struct {
		Requests struct{ Total int }
		Queues   map[string]struct{ Pushed, Popped, Acked, Failed, Dlq int }
	}
	b.doJSON("GET", "/metrics", nil, http.StatusOK, &snap)
	require.Equal(t, struct{ Pushed, Popped, Acked, Failed, Dlq int }{13, 10, 8, 2, 1}, snap.Queues["orders"])
	require.Equal(t, 4+2+1, snap.Requests.Total)
}

func TestStatusQueueDetailAndMessages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.configure("detail", map[string]any{"leaseTime": 30, "retentionEnabled": true, "retentionSeconds": 600})
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
