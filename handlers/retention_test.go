package handlers

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/jobs"
)

// remaining lists the transaction ids still stored in a queue.
func (b *testBundle) remaining(queue string) []string {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT m.transaction_id FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 ORDER BY 1`, queue)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(b.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// agedMessageID is the SQL for message m's id moved back by the seconds in
// parameter secs ("$2"): a UUIDv7's first 48 bits are the time the broker
// stored it, which the time-filtered queries read (migration 0013).
func agedMessageID(secs string) string {
	return `encode(substring(int8send(('x' || left(replace(m.id::text, '-', ''), 12))::bit(48)::bigint
		- (` + secs + `::float8 * 1000)::bigint) FROM 3) || substring(uuid_send(m.id) FROM 7), 'hex')::uuid`
}

// age moves messages' creation back by d: created_at and the id's time,
// with the dead-letter and trace rows that refer to the id (their keys
// are checked at the end of the statement).
func (b *testBundle) age(queue string, d time.Duration, txIDs ...string) {
	b.t.Helper()
	b.exec(`WITH aged AS (
		SELECT m.id AS old_id, `+agedMessageID("$2")+` AS new_id
		FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 AND ($3::text[] IS NULL OR m.transaction_id = ANY($3))
	), msgs AS (
		UPDATE queen.messages m SET created_at = m.created_at - make_interval(secs => $2), id = a.new_id
		FROM aged a WHERE m.id = a.old_id
	), dlq AS (
		UPDATE queen.dead_letter_queue d SET message_id = a.new_id FROM aged a WHERE d.message_id = a.old_id
	)
	UPDATE queen.message_traces t SET message_id = a.new_id FROM aged a WHERE t.message_id = a.old_id`,
		queue, d.Seconds(), txIDs)
}

func (b *testBundle) pushN(queue, partition, prefix string, n int) {
	b.t.Helper()
	var items []client.PushItem
	for i := range n {
		items = append(items, item(queue, partition, fmt.Sprintf("%s%d", prefix, i), i))
	}
	b.push(items...)
}

func TestRetentionDeletesExactlyWhatItShould(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, adminOpts{batchSize: 2}) // several batches per run
	ctx := t.Context()

	// retentionSeconds: old messages go whatever their state.
	b.configure("ret", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(60)})
	b.pushN("ret", "", "r", 5)
	b.age("ret", 2*time.Minute, "r0", "r1", "r3")
	// completedRetentionSeconds: only old messages every cursor passed;
	// dead-lettered ones stay.
	b.configure("done", &client.QueueOptions{RetentionEnabled: ptr(true), CompletedRetentionSeconds: ptr(60)})
	b.pushN("done", "", "d", 6)
	p := b.pop("/api/v1/pop/queue/done?batch=4")
	for i, m := range p.Messages {
		status := "completed"
		if i == 3 {
			status = "dlq"
		}
		require.True(t, b.ack(m.TransactionID, m.PartitionID, status, "", p.LeaseID).Success)
	}
	b.age("done", 2*time.Minute)
	// retentionEnabled false: nothing goes.
	b.configure("keep", &client.QueueOptions{RetentionEnabled: ptr(false), RetentionSeconds: ptr(60), CompletedRetentionSeconds: ptr(60)})
	b.pushN("keep", "", "k", 2)
	b.age("keep", 2*time.Minute)

	now := time.Now()
	run, err := b.jobs.RunRetention(ctx, now)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Equal(t, []string{"r2", "r4"}, b.remaining("ret"))
	require.Equal(t, []string{"d3", "d4", "d5"}, b.remaining("done"), "the dead-lettered d3 and the unconsumed d4, d5 stay")
	require.Equal(t, []string{"k0", "k1"}, b.remaining("keep"))
	require.Equal(t, int64(3), run.Total(jobs.KindRetention))
	require.Equal(t, int64(3), run.Total(jobs.KindCompletedRetention))

	// A second run finds nothing and records nothing.
	run, err = b.jobs.RunRetention(ctx, now)
	require.NoError(t, err)
	require.Zero(t, run.Total(""))

	// The DLQ row of d3 survived; the counts the dashboard shows follow.
	var sq struct {
		Queues []struct {
			Name     string
			Messages struct{ Total, Pending, DeadLetter int }
		}
	}
	b.doJSON("GET", "/api/v1/status/queues?queue=done", nil, http.StatusOK, &sq)
	require.Len(t, sq.Queues, 1)
	require.Equal(t, struct{ Total, Pending, DeadLetter int }{3, 2, 1}, sq.Queues[0].Messages)

	var ret struct {
		Series []struct {
			RetentionMsgs, CompletedRetentionMsgs, EvictionMsgs, TotalMsgs, EventCount int
		}
		Totals struct {
			RetentionMsgs, CompletedRetentionMsgs, EvictionMsgs, TotalMsgs, EventCount int
		}
	}
	b.doJSON("GET", "/api/v1/analytics/retention", nil, http.StatusOK, &ret)
	require.Equal(t, 3, ret.Totals.RetentionMsgs)
	require.Equal(t, 3, ret.Totals.CompletedRetentionMsgs)
	require.Equal(t, 6, ret.Totals.TotalMsgs)
	require.Equal(t, 2, ret.Totals.EventCount)
	b.doJSON("GET", "/api/v1/analytics/retention?queue=ret", nil, http.StatusOK, &ret)
	require.Equal(t, 3, ret.Totals.TotalMsgs)
}

// queenctl queue configure --retention N (and --completed-retention, and
// the JS and Python create() options) never send retentionEnabled: a
// retention time given alone turns retention on; an explicit false wins.
func TestRetentionTimeAloneTurnsRetentionOn(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	configure := func(queue string, options map[string]any) bool {
		var r struct {
			Options struct {
				RetentionEnabled bool `json:"retentionEnabled"`
			} `json:"options"`
		}
		b.doJSON("POST", "/api/v1/configure", map[string]any{"queue": queue, "options": options}, http.StatusOK, &r)
		return r.Options.RetentionEnabled
	}
	require.True(t, configure("pending", map[string]any{"retentionSeconds": 60}))
	require.True(t, configure("completed", map[string]any{"completedRetentionSeconds": 60}))
	require.False(t, configure("off", map[string]any{"retentionSeconds": 60, "retentionEnabled": false}))
	require.False(t, configure("zero", map[string]any{"retentionSeconds": 0, "completedRetentionSeconds": 0}))
	require.False(t, configure("plain", nil))
	for _, q := range []string{"pending", "completed", "off", "zero", "plain"} {
		b.pushN(q, "", "m", 2)
	}
	p := b.pop("/api/v1/pop/queue/completed?batch=2")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}
	for _, q := range []string{"pending", "completed", "off", "zero", "plain"} {
		b.age(q, 2*time.Minute, "m0")
	}
	run, err := b.jobs.RunRetention(t.Context(), time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"m1"}, b.remaining("pending"))
	require.Equal(t, []string{"m1"}, b.remaining("completed"))
	for _, q := range []string{"off", "zero", "plain"} {
		require.Equal(t, []string{"m0", "m1"}, b.remaining(q), q)
	}
	require.Equal(t, int64(1), run.Total(jobs.KindRetention))
	require.Equal(t, int64(1), run.Total(jobs.KindCompletedRetention))

	// Reconfiguring replaces every option: the same retention time with an
	// explicit false turns it off again.
	require.False(t, configure("pending", map[string]any{"retentionSeconds": 60, "retentionEnabled": false}))
}

func TestEvictionDeletesWaitingMessagesOnly(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := t.Context()
	b.configure("ev", &client.QueueOptions{MaxWaitTimeSeconds: ptr(60)})
	b.pushN("ev", "", "e", 5)
	p := b.pop("/api/v1/pop/queue/ev/partition/Default?batch=2")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}
	// A partition under a live lease waits for the next run.
	b.pushN("ev", "leased", "l", 2)
	require.NotNil(t, b.pop("/api/v1/pop/queue/ev/partition/leased?batch=1"))
	b.age("ev", 2*time.Minute)
	b.push(item("ev", "", "fresh", 1)) // not waiting long enough

	run, err := b.jobs.RunEviction(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(3), run.Total(jobs.KindEviction))
	require.Equal(t, []string{"e0", "e1", "fresh", "l0", "l1"}, b.remaining("ev"),
		"consumed e0, e1 stay (completed retention is not eviction); e2..e4 waited too long")

	// The cursor moved over the deleted messages: the next pop is the fresh
	// one, and the partition counts are exact.
	p = b.pop("/api/v1/pop/queue/ev/partition/Default?batch=10")
	require.Len(t, p.Messages, 1)
	require.Equal(t, "fresh", p.Messages[0].TransactionID)
	var parts struct {
		Partitions []struct {
			Partition string
			Pending   int
		}
	}
	b.doJSON("GET", "/api/v1/resources/partitions?queue=ev", nil, http.StatusOK, &parts)
	pending := map[string]int{}
	for _, pt := range parts.Partitions {
		pending[pt.Partition] = pt.Pending
	}
	require.Equal(t, 1, pending["Default"], "fresh, in flight")
	require.Equal(t, 2, pending["leased"])

	var ret struct {
		Totals struct{ EvictionMsgs, EventCount int }
	}
	b.doJSON("GET", "/api/v1/analytics/retention?queue=ev", nil, http.StatusOK, &ret)
	require.Equal(t, 3, ret.Totals.EvictionMsgs)
	require.Equal(t, 1, ret.Totals.EventCount)
}

// Several brokers on one database: concurrent runs never delete twice, and
// together delete exactly the expired messages.
func TestRetentionRunsSafelyOnSeveralBrokers(t *testing.T) {
	t.Parallel()
	a := setupAdmin(t, adminOpts{hostname: "a", batchSize: 3})
	b := setupAdmin(t, adminOpts{hostname: "b", pool: a.pool, batchSize: 3})
	a.configure("multi", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(60)})
	for p := range 4 {
		a.pushN("multi", fmt.Sprintf("p%d", p), fmt.Sprintf("p%d-", p), 5)
	}
	a.age("multi", 2*time.Minute)
	a.push(item("multi", "p0", "young", 1))

	now := time.Now()
	var wg sync.WaitGroup
	runs := make([]jobs.Run, 4)
	errs := make([]error, 4)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc := a.jobs
			if i%2 == 1 {
				svc = b.jobs
			}
			runs[i], errs[i] = svc.RunRetention(t.Context(), now)
		}()
	}
	wg.Wait()
	var deleted int64
	for i := range runs {
		require.NoError(t, errs[i])
		deleted += runs[i].Total("")
	}
	require.Equal(t, int64(20), deleted)
	require.Equal(t, []string{"young"}, a.remaining("multi"))
	var events int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT COALESCE(sum(deleted_count), 0) FROM queen.retention_history`).Scan(&events))
	require.Equal(t, 20, events, "history adds up to what was deleted")
}

// Old metrics rows are purged; recent ones stay.
func TestMetricsCleanup(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Minute)
	old := now.Add(-10 * 24 * time.Hour)
	b.push(item("c", "", "", 1))
	require.NoError(t, b.jobs.Flush(ctx, old)) // written as a minute 10 days ago
	require.NoError(t, b.jobs.Tick(ctx, now))  // the minute now begins
	b.push(item("c", "", "", 2))
	require.NoError(t, b.jobs.Flush(ctx, now))
	count := func(table string) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM queen."+table).Scan(&n))
		return n
	}
	require.Equal(t, 2, count("worker_metrics"))
	require.Equal(t, 2, count("queue_lag_metrics"))
	require.Equal(t, 2, count("system_metrics"))

	run, err := b.jobs.RunCleanup(ctx, now)
	require.NoError(t, err)
	var tables []string
	for _, d := range run.Deleted {
		tables = append(tables, d.Queue)
	}
	sort.Strings(tables)
	require.Equal(t, []string{"queue_lag_metrics", "worker_metrics"}, tables, "7 days for per-minute rows, 90 for system metrics")
	require.Equal(t, 1, count("worker_metrics"))
	require.Equal(t, 1, count("queue_lag_metrics"))
	require.Equal(t, 2, count("system_metrics"))
}

// Start and Stop are idempotent, and Stop writes the last counters.
func TestJobsStartStop(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.jobs.Start(t.Context())
	b.jobs.Start(t.Context())
	b.push(item("stop", "", "", 1))
	b.jobs.Stop()
	b.jobs.Stop()
	var pushed int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT push_messages FROM queen.worker_metrics_summary").Scan(&pushed))
	require.Equal(t, 1, pushed)
}
