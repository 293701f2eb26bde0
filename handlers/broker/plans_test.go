package broker

import (
	"testing"

	"github.com/google/uuid"
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
	q := db.New(conn)
	const runs = 12
	for range runs {
		// The lease of 0 seconds has ended by the next call, so each claim
		// takes it again and reads the batch past the cursor.
		lease := "lease-plans"
		_, err := q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
			PartitionID: part, ConsumerGroup: "g", LeaseID: &lease, LeaseSeconds: 0, BatchSize: 10,
		})
		require.NoError(t, err)
		rows, err := q.PartitionConsumerAutoAckRead(ctx, db.PartitionConsumerAutoAckReadParams{
			PartitionID: part, ConsumerGroup: "g", BatchSize: 10,
		})
		require.NoError(t, err)
		require.Len(t, rows, 10, "the autoAck read delivers a whole batch")
		_, err = q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
			ConsumerGroup: "g", QueueID: queue, MaxCandidates: 1,
		})
		require.NoError(t, err)
	}
	planned := map[string]int64{}
	for _, name := range []string{"PartitionConsumerClaimAndRead", "PartitionConsumerAutoAckRead", "PartitionListPopCandidates"} {
		var generic, custom int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '-- name: ' || $1::text || ' %'`, name).Scan(&generic, &custom))
		require.Equal(t, int64(runs), generic+custom, name)
		planned[name] = custom
	}
	// Five custom plans each, then the generic one for the other calls.
	require.Equal(t, map[string]int64{
		"PartitionConsumerClaimAndRead": 5, "PartitionConsumerAutoAckRead": 5, "PartitionListPopCandidates": 5,
	}, planned, "custom plans of %d calls", runs)
}
