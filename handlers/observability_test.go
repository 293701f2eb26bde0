package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
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
	return &adminBundle{testBundle: newBundle(t, srv, o.pool, hs.URL), jobs: js, reg: reg}
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
	var first []client.PushItem
	for i := range 6 {
		first = append(first, item("orders", "", fmt.Sprintf("o%d", i), i))
	}
	b.push(first...)
	var second []client.PushItem
	for i := 6; i < 10; i++ {
		second = append(second, item("orders", "", fmt.Sprintf("o%d", i), i))
	}
	b.push(second...)
	var bill []client.PushItem
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
