package broker

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// The pop's claim-and-read and its scan for candidates keep one plan per
// session (migration 0025). Sent as they were, with a backlog in the
// statistics, their generic plan cost more on paper than the plans made
// with the arguments (a LIMIT of a parameter is costed as a tenth of the
// rows expected), so PostgreSQL planned them again at every execution.
func TestPopStatementsArePlannedOncePerSession(t *testing.T) {
	tb := setup(t)
	ctx := t.Context()
	tb.pushMany("plans", 8000, 8)
	tb.exec("ANALYZE queen.messages, queen.partitions, queen.partition_consumers")
	var part, queue uuid.UUID
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT p.id FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'plans' AND p.name = 'P0'`).Scan(&part))
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = 'plans'`).Scan(&queue))

	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	q := db.New(conn)
	const runs = 12
	for range runs {
		lease := "lease-plans"
		_, err := q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
			PartitionID: part, ConsumerGroup: "g", LeaseID: &lease, LeaseSeconds: 0, BatchSize: 5,
		})
		require.NoError(t, err)
		_, err = q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
			ConsumerGroup: "g", QueueID: queue, MaxCandidates: 1,
		})
		require.NoError(t, err)
	}
	for _, name := range []string{"PartitionConsumerClaimAndRead", "PartitionListPopCandidates"} {
		var generic, custom int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '-- name: ' || $1::text || ' %'`, name).Scan(&generic, &custom))
		require.Equal(t, int64(runs), generic+custom, name)
		require.LessOrEqual(t, custom, int64(5), "%s was planned with its arguments %d times of %d", name, custom, runs)
	}
	// What the statements call is planned without its arguments, once.
	for _, fn := range []string{"partition_claim_and_read", "partition_pop_candidates"} {
		var config []string
		require.NoError(t, conn.QueryRow(ctx, `SELECT proconfig FROM pg_proc
			WHERE pronamespace = 'queen'::regnamespace AND proname = $1`, fn).Scan(&config))
		require.Contains(t, config, "plan_cache_mode=force_generic_plan", fn)
	}
}
