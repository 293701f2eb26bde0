package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// After an ANALYZE caught the tables empty (every queue deleted, or
// retention removed everything) and they were filled again, the reads of
// the data plane read as many index entries as they return once the
// statistics watch has run (migration 0023). Before it, with one row
// expected of anything, the claim-and-read read the whole partition and
// sorted it at every pop, and the scan for pop candidates read every
// partition of the table.
func TestReadsAfterTheStatisticsRecordedEmptyTables(t *testing.T) {
	tb := setup(t)
	ctx := t.Context()
	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// Every plan is made without the arguments, as a prepared statement's
	// is after five executions.
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	check := func(reads map[string]planRead) {
		t.Helper()
		for name, r := range reads {
			entries := indexEntriesRead(t, conn.Conn(), r.table, r.run)
			require.LessOrEqual(t, entries, int64(3*planBatch),
				"%s read %d index entries of %s for a batch of %d", name, entries, r.table, planBatch)
		}
	}
	watch := func(stale ...string) {
		t.Helper()
		q := db.New(tb.pool)
		var analyzed []string
		require.Eventually(t, func() bool {
			tables, err := q.AnalyzeStaleTables(ctx)
			require.NoError(t, err)
			analyzed = append(analyzed, tables...)
			for _, s := range stale {
				if !slices.Contains(analyzed, s) {
					return false
				}
			}
			return true
		}, 20*time.Second, 10*time.Millisecond)
	}

	// Only queen.messages recorded empty: the case measured in
	// docs/benchmarks.md (the claim-and-read read 3,000 entries).
	part, _ := tb.refillAfterEmptyStatistics("one", "queen.messages", 0)
	watch("messages")
	check(cursorReads(ctx, part))

	// Both tables recorded empty (the scan for pop candidates read every
	// partition of the table, twice).
	part, wide := tb.refillAfterEmptyStatistics("two", "queen.messages, queen.partitions", 1200)
	watch("messages", "partitions")
	check(cursorReads(ctx, part))
	check(partitionScans(ctx, wide, "two-wide"))
}

const planBatch = 10

// planRead is one read and the table whose index entries it is held to.
type planRead struct {
	table string
	run   func(q *db.Queries) error
}

// cursorReads are the reads of the next messages past a cursor, on part.
func cursorReads(ctx context.Context, part uuid.UUID) map[string]planRead {
	return map[string]planRead{
		"claim and read": {"queen.messages", func(q *db.Queries) error {
			lease := "lease-1"
			_, err := q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
				PartitionID: part, ConsumerGroup: QueueModeGroup, LeaseID: &lease, LeaseSeconds: 30, BatchSize: planBatch,
			})
			return err
		}},
		"autoAck read": {"queen.messages", func(q *db.Queries) error {
			_, err := autoAckReadAlone(ctx, q, db.PartitionConsumerAutoAckReadParams{
				PartitionID: part, ConsumerGroup: "auto", BatchSize: planBatch,
			})
			return err
		}},
		"ack window": {"queen.messages", func(q *db.Queries) error {
			_, err := q.MessageListAckWindow(ctx, db.MessageListAckWindowParams{
				TenantIds: []uuid.UUID{defaultTenantID}, PartitionIds: []uuid.UUID{part},
				ConsumerGroups: []string{"auto"}, Counts: []int32{planBatch},
			})
			return err
		}},
	}
}

// partitionScans are the reads that walk a queue's partitions, on the queue
// wide named wideName (one message in each of many partitions) and its
// partition P0.
func partitionScans(ctx context.Context, wide uuid.UUID, wideName string) map[string]planRead {
	return map[string]planRead{
		"pop candidates": {"queen.partitions", func(q *db.Queries) error {
			_, err := q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
				ConsumerGroup: QueueModeGroup, QueueID: wide, MaxCandidates: planBatch,
			})
			return err
		}},
		"re-poll probe": {"queen.messages", func(q *db.Queries) error {
			_, err := q.PartitionPollReady(ctx, db.PartitionPollReadyParams{
				TenantIds: []uuid.UUID{defaultTenantID}, QueueNames: []string{wideName}, Namespaces: []string{""},
				Tasks: []string{""}, PartitionNames: []string{"P0"}, ConsumerGroups: []string{QueueModeGroup},
			})
			return err
		}},
	}
}

// refillAfterEmptyStatistics deletes every queue, records the empty moment
// in the statistics of the tables named (an ANALYZE, as autovacuum would),
// and fills two queues again: round (3,000 messages in one partition, whose
// id it returns) and round-wide (spread partitions of one message, whose
// queue id it returns; none when spread is 0). The group "auto" has a cursor on the first
// partition, with no lease, as an autoAck pop leaves it.
func (tb *testBundle) refillAfterEmptyStatistics(round, analyzeEmpty string, spread int) (part, wide uuid.UUID) {
	t, ctx := tb.t, tb.t.Context()
	t.Helper()
	const backlog = 3000
	fill := func(queue string) {
		tb.pushMany(queue, backlog, 1)
		if spread > 0 {
			tb.pushMany(queue+"-wide", spread, spread)
		}
	}
	fill(round + "-before")
	tb.flushRowCounts()
	tb.exec("ANALYZE queen.messages, queen.partitions")
	rows, err := tb.pool.Query(ctx, "SELECT name FROM queen.queues")
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, name := range names {
		_, err := tb.b.DeleteQueue(ctx, DefaultTenant, name)
		require.NoError(t, err)
	}
	tb.flushRowCounts()
	tb.exec("ANALYZE " + analyzeEmpty)
	var relpages int
	var reltuples float64
	require.NoError(t, tb.pool.QueryRow(ctx,
		"SELECT relpages, reltuples FROM pg_class WHERE oid = 'queen.messages'::regclass").Scan(&relpages, &reltuples))
	require.Positive(t, relpages, "the empty table keeps its pages")
	require.Zero(t, reltuples, "the statistics record the empty moment")

	fill(round)
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1`, round).Scan(&part))
	if spread > 0 {
		require.NoError(t, tb.pool.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = $1`, round+"-wide").Scan(&wide))
	}
	tb.exec("INSERT INTO queen.partition_consumers (partition_id, consumer_group) VALUES ($1, 'auto')", part)
	tb.flushRowCounts()
	return part, wide
}

// flushRowCounts makes the broker's connections report their row counts
// to the statistics, and waits until queen.messages' live-row count is
// its number of rows. A backend reports when it has been idle for ten
// seconds, or when it exits: the pool's idle connections are closed.
// Changes an ANALYZE counted and reported after it would be counted twice.
func (tb *testBundle) flushRowCounts() {
	tb.t.Helper()
	tb.pool.Reset()
	require.Eventually(tb.t, func() bool {
		var live, rows int
		require.NoError(tb.t, tb.pool.QueryRow(tb.t.Context(),
			`SELECT (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'queen.messages'::regclass),
			        (SELECT count(*) FROM queen.messages)`).Scan(&live, &rows))
		return live == rows
	}, 20*time.Second, 10*time.Millisecond)
}

// indexEntriesRead runs read in a transaction that is rolled back and
// returns how many entries of table's indexes it read.
func indexEntriesRead(t *testing.T, conn *pgx.Conn, table string, read func(q *db.Queries) error) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(context.Background())) }()
	entries := func() int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT COALESCE(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::bigint
			FROM pg_index WHERE indrelid = $1::regclass`, table).Scan(&n))
		return n
	}
	// The counters hold what the session did since its last report to the
	// statistics, which can be more than this transaction: take the delta.
	before := entries()
	require.NoError(t, read(db.New(tx)))
	return entries() - before
}

// pushMany pushes n messages to queue, over partitions P0, P1, … (parts
// of them), or to partition P when parts is 1.
func (tb *testBundle) pushMany(queue string, n, parts int) {
	tb.t.Helper()
	items := make([]PushItem, n)
	for i := range items {
		part := "P"
		if parts > 1 {
			part = fmt.Sprintf("P%d", i%parts)
		}
		items[i] = item(queue, part, fmt.Sprintf("%s-%d", queue, i), "")
	}
	tb.push(items...)
}

func (tb *testBundle) exec(sql string, args ...any) {
	tb.t.Helper()
	_, err := tb.pool.Exec(tb.t.Context(), sql, args...)
	require.NoError(tb.t, err)
}
