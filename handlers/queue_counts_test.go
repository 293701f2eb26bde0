package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// queueCounted is one queue's counts from its stored messages: what
// PartitionCountsByQueue and PartitionDeadLetterCounts must give.
type queueCounted struct {
	partitions, total, pending, processing, deadLetter int
}

// countedQueues counts every queue's partitions and stored messages, the
// messages past the queue-mode cursor (pending, in-flight included), the
// un-acked part of live queue-mode leases (at most the partition's pending)
// and the dead letters, without the sequence arithmetic of the routes.
func (b *testBundle) countedQueues() map[string]queueCounted {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `
		WITH per AS (
			SELECT q.name AS queue,
			       (SELECT count(*) FROM queen.messages m WHERE m.partition_id = p.id) AS stored,
			       (SELECT count(*) FROM queen.messages m
			         WHERE m.partition_id = p.id AND m.seq > COALESCE(c.last_seq, 0)) AS pending,
			       CASE WHEN c.lease_id IS NOT NULL AND c.lease_expires_at > now()
			            THEN GREATEST(c.batch_size - c.acked_count, 0) ELSE 0 END AS leased,
			       (SELECT count(*) FROM queen.dead_letter_queue d WHERE d.partition_id = p.id) AS dead
			FROM queen.partitions p
			JOIN queen.queues q ON q.id = p.queue_id
			LEFT JOIN queen.partition_consumers c ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
		)
		SELECT queue, count(*)::int, sum(stored)::int, sum(pending)::int, sum(LEAST(leased, pending))::int, sum(dead)::int
		FROM per GROUP BY queue`)
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[string]queueCounted{}
	for rows.Next() {
		var name string
		var c queueCounted
		require.NoError(b.t, rows.Scan(&name, &c.partitions, &c.total, &c.pending, &c.processing, &c.deadLetter))
		out[name] = c
	}
	require.NoError(b.t, rows.Err())
	return out
}

// requireQueueCountsCounted compares countedQueues with every route that
// shows a queue's counts: the queue listing, the queue detail, the
// partition listing's total of one queue, and the overview's sums.
func (b *testBundle) requireQueueCountsCounted() {
	b.t.Helper()
	want := b.countedQueues()
	require.NotEmpty(b.t, want)

	var list struct{ Queues []wireQueue }
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &list)
	listed := map[string]wireQueue{}
	for _, q := range list.Queues {
		listed[q.Name] = q
	}
	var sum queueCounted
	for name, w := range want {
		sum.total += w.total
		sum.pending += w.pending
		sum.processing += w.processing
		sum.deadLetter += w.deadLetter

		q, ok := listed[name]
		require.True(b.t, ok, "queue %s listed", name)
		require.Equal(b.t, w.partitions, q.Partitions, "partitions of %s", name)
		require.Equal(b.t, wireCounts{Total: w.total, Pending: w.pending - w.processing, Processing: w.processing, DeadLetter: w.deadLetter},
			q.Messages, "counts of %s in the listing", name)

		var detail struct {
			Totals struct{ Partitions, Total, Pending, Processing, DeadLetter int }
		}
		b.doJSON("GET", "/api/v1/resources/queues/"+url.PathEscape(name)+"?limit=0", nil, http.StatusOK, &detail)
		require.Equal(b.t, w.partitions, detail.Totals.Partitions, "partitions of %s in its detail", name)
		require.Equal(b.t, w.total, detail.Totals.Total, "total of %s in its detail", name)
		require.Equal(b.t, w.pending, detail.Totals.Pending, "pending of %s in its detail", name)
		require.Equal(b.t, w.processing, detail.Totals.Processing, "processing of %s in its detail", name)
		require.Equal(b.t, w.deadLetter, detail.Totals.DeadLetter, "dead letters of %s in its detail", name)

		var page struct {
			Partitions []wirePartition
			Total      int
		}
		b.doJSON("GET", "/api/v1/resources/partitions?limit=1&queue="+url.QueryEscape(name), nil, http.StatusOK, &page)
		require.Equal(b.t, w.partitions, page.Total, "partitions of %s in the partition listing", name)
	}

	var ov struct{ Messages wireCounts }
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(b.t, wireCounts{Total: sum.total, Pending: sum.pending - sum.processing, Processing: sum.processing, DeadLetter: sum.deadLetter},
		ov.Messages, "the overview's counts")
}

// TestCountFlightsShareOnePass: the requests for one queue's counts that
// arrive while the pass over every queue runs take their counts from it,
// those for a queue share that queue's pass, and nothing is kept once a
// pass ended.
func TestCountFlightsShareOnePass(t *testing.T) {
	t.Parallel()
	var f countFlights
	a, b := uuid.New(), uuid.New()
	all := []db.PartitionCountsByQueueRow{{QueueID: a, Partitions: 3}, {QueueID: b, Partitions: 5}}

	// The pass over every queue, held open until released.
	started, release := make(chan struct{}), make(chan struct{})
	type result struct {
		rows []db.PartitionCountsByQueueRow
		err  error
	}
	passed := make(chan result, 1)
	go func() {
		rows, err := f.join(uuid.Nil, func() ([]db.PartitionCountsByQueueRow, error) {
			close(started)
			<-release
			return all, nil
		}).wait(t.Context())
		passed <- result{rows, err}
	}()
	<-started

	// One queue while it runs: join returns the pass under way (without
	// waiting for it), no pass of its own.
	joined := f.join(b, func() ([]db.PartitionCountsByQueueRow, error) {
		return nil, errors.New("a queue's pass ran while the pass over every queue was under way")
	})
	close(release)
	rows, err := joined.wait(t.Context())
	require.NoError(t, err)
	require.Equal(t, all, rows)
	r := <-passed
	require.NoError(t, r.err)
	require.Equal(t, all, r.rows)

	// Once it ended, a queue's request runs its own pass, and a failure
	// reaches every request that shared it.
	ran := 0
	rows, err = f.join(a, func() ([]db.PartitionCountsByQueueRow, error) {
		ran++
		return all[:1], nil
	}).wait(t.Context())
	require.NoError(t, err)
	require.Equal(t, all[:1], rows)
	require.Equal(t, 1, ran)

	_, err = f.join(a, func() ([]db.PartitionCountsByQueueRow, error) {
		return nil, errors.New("boom")
	}).wait(t.Context())
	require.ErrorContains(t, err, "boom")
	require.Nil(t, f.all)
	require.Empty(t, f.one)
}

// TestPartitionPassesRunSerially: a pass over every partition is planned
// without parallel workers (migration 0024) even where the planner would
// give it one: here with parallelism made free, as a large table under
// the default costs makes it look.
func TestPartitionPassesRunSerially(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN("serial-scans", "p1", "m", 3)
	conn, err := b.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	_, err = tx.Exec(t.Context(), `SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0;
		SET LOCAL min_parallel_table_scan_size = 0; SET LOCAL max_parallel_workers_per_gather = 2`)
	require.NoError(t, err)
	rows, err := tx.Query(t.Context(), `EXPLAIN SELECT p.queue_id, count(*), sum(p.last_seq) FROM queen.partitions p GROUP BY 1`)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	require.NotContains(t, strings.Join(plan, "\n"), "Gather", "a parallel plan for the pass over the partitions")
}
