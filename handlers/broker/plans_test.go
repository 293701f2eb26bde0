package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// The pop's hottest statements settle on their generic plan after the five
// plans PostgreSQL makes with the arguments, instead of being planned again
// at every call. PostgreSQL keeps a prepared statement's generic plan only
// if it costs no more on paper than the average of those custom plans; the
// statements read each argument that would change an estimate (the LIMIT,
// the partition or queue, the delay and window filters) through a one-row
// subquery, so that both kinds of plan estimate alike. Sent with those
// arguments in sight, with 4,000 messages a partition in the statistics,
// the claims' generic plans cost more (a LIMIT of a parameter is costed as
// a tenth of the rows expected, where the custom plan sees a batch of 10)
// and all twelve calls of each were planned.
func TestHotStatementsSettleOnTheirGenericPlan(t *testing.T) {
	tb := setup(t)
	ctx := t.Context()
	tb.pushMany("plans", 8000, 2)
	tb.exec("ANALYZE queen.messages, queen.partitions, queen.partition_consumers")
	var part, queue uuid.UUID
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'plans' AND p.name = 'P0'`).Scan(&part))
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = 'plans'`).Scan(&queue))

	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	const runs = 12
	callPopStatements(t, conn, part, queue, runs)
	// Five custom plans each, then the generic one for the other calls.
	require.Equal(t, map[string]int64{
		"PartitionConsumerClaimAndRead": 5, "PartitionConsumerAutoAckRead": 5, "PartitionListPopCandidates": 5,
	}, customPlans(t, conn, runs), "custom plans of %d calls", runs)
}

// A session that made its plans on a nearly empty table (a fresh database,
// as the benchmarks start from) keeps the claims' generic plans after the
// table has grown a hundredfold and an ANALYZE made it plan them again.
// With both kinds of plan estimating alike, the new generic plan cost what
// the grown table costs, more than the average of the five custom plans
// made on the small one, and PostgreSQL planned every call again until
// custom plans of the grown table had raised that average.
func TestClaimsKeepTheirGenericPlanWhileTheTableGrows(t *testing.T) {
	tb := setup(t)
	ctx := t.Context()
	tb.pushMany("grow", 160, 2)
	tb.exec("ANALYZE queen.messages, queen.partitions, queen.partition_consumers")
	var part, queue uuid.UUID
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'grow' AND p.name = 'P0'`).Scan(&part))
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = 'grow'`).Scan(&queue))

	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	callPopStatements(t, conn, part, queue, 6)

	tb.pushMany("grow", 16000, 2)
	tb.exec("ANALYZE queen.messages, queen.partitions, queen.partition_consumers")
	const runs = 12
	callPopStatements(t, conn, part, queue, runs-6)
	custom := customPlans(t, conn, runs)
	for _, name := range []string{"PartitionConsumerClaimAndRead", "PartitionConsumerAutoAckRead"} {
		require.LessOrEqual(t, custom[name], int64(6),
			"%s was planned with its arguments %d times of %d after the table grew", name, custom[name], runs)
	}
}

// callPopStatements runs the claim-and-read, the autoAck read (a batch of
// 10 each time) and the scan for candidates runs times on conn, for the
// group "g" on part of queue.
func callPopStatements(t *testing.T, conn *pgxpool.Conn, part, queue uuid.UUID, runs int) {
	t.Helper()
	ctx := t.Context()
	q := db.New(conn)
	for range runs {
		// The lease of 0 seconds has ended by the next call, so each claim
		// takes it again and reads the batch past the cursor.
		lease := "lease-plans"
		_, err := q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
			PartitionID: part, ConsumerGroup: "g", LeaseID: &lease, LeaseSeconds: 0, BatchSize: 10,
		})
		require.NoError(t, err)
		rows, err := autoAckReadAlone(ctx, q, db.PartitionConsumerAutoAckReadParams{
			PartitionID: part, ConsumerGroup: "g", BatchSize: 10,
		})
		require.NoError(t, err)
		require.Len(t, rows, 10, "the autoAck read delivers a whole batch")
		_, err = q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
			ConsumerGroup: "g", QueueID: queue, MaxCandidates: 1,
		})
		require.NoError(t, err)
	}
}

// autoAckReadAlone sends one autoAck read as a batch of its own, as the
// reads' group commit does when no other read waits (read_commit.go).
func autoAckReadAlone(ctx context.Context, q *db.Queries, p db.PartitionConsumerAutoAckReadParams) ([]db.PartitionConsumerAutoAckReadRow, error) {
	var rows []db.PartitionConsumerAutoAckReadRow
	var readErr error
	br := q.PartitionConsumerAutoAckRead(ctx, []db.PartitionConsumerAutoAckReadParams{p})
	br.Query(func(_ int, got []db.PartitionConsumerAutoAckReadRow, err error) { rows, readErr = got, err })
	return rows, errors.Join(readErr, br.Close())
}

// customPlans reads, per pop statement, how many of its runs executions on
// conn were planned with their arguments.
func customPlans(t *testing.T, conn *pgxpool.Conn, runs int) map[string]int64 {
	t.Helper()
	planned := map[string]int64{}
	for _, name := range []string{"PartitionConsumerClaimAndRead", "PartitionConsumerAutoAckRead", "PartitionListPopCandidates"} {
		var generic, custom int64
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '-- name: ' || $1::text || ' %'`, name).Scan(&generic, &custom))
		require.Equal(t, int64(runs), generic+custom, name)
		planned[name] = custom
	}
	return planned
}

// The statement that moves a cursor over rows another group's read kept
// (read_share.go) settles on its generic plan as the other pop statements
// do: after five custom plans.
func TestAutoAckAdvanceSettlesOnItsGenericPlan(t *testing.T) {
	tb := setup(t)
	ctx := t.Context()
	tb.pushMany("advplans", 200, 1)
	var part uuid.UUID
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'advplans' AND p.name = 'P'`).Scan(&part))
	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	q := db.New(conn)
	_, err = conn.Exec(ctx, `INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq)
		VALUES ($1, 'g', 0)`, part) // the cursor row, at seq 0
	require.NoError(t, err)
	const runs = 12
	for i := range int64(runs) {
		got, err := q.PartitionConsumerAutoAckAdvance(ctx, db.PartitionConsumerAutoAckAdvanceParams{
			PartitionIds: []uuid.UUID{part}, ConsumerGroups: []string{"g"}, ExpectedSeqs: []int64{i}, LastSeqs: []int64{i + 1},
			LastConsumedIds: []uuid.UUID{uuid.New()}, Ns: []int64{1},
		})
		require.NoError(t, err)
		require.Len(t, got, 1, "the cursor moved from %d", i)
	}
	var custom int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: PartitionConsumerAutoAckAdvance %'`).Scan(&custom))
	require.EqualValues(t, 5, custom)
}
