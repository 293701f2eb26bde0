package broker

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// cursorRow is a partition_consumers row as the claim tests read it.
type cursorRow struct {
	lastSeq, consumed, batches int64
	lastID                     *uuid.UUID
	leaseID                    *string
	batchSize                  int32
}

func (tb *testBundle) cursor(partition uuid.UUID, group string) (cursorRow, bool) {
	tb.t.Helper()
	var c cursorRow
	err := tb.pool.QueryRow(tb.t.Context(), `SELECT last_seq, total_messages_consumed, total_batches_consumed,
	       last_consumed_id, lease_id, batch_size
	FROM queen.partition_consumers WHERE partition_id = $1 AND consumer_group = $2`, partition, group).
		Scan(&c.lastSeq, &c.consumed, &c.batches, &c.lastID, &c.leaseID, &c.batchSize)
	if err != nil {
		return cursorRow{}, false
	}
	return c, true
}

// queen.claim_messages (migration 0014): the claim, the read and its
// finish in one statement, each outcome checked on the cursor row it leaves.
func TestClaimMessagesFunction(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	pushed := tb.push(item("cq", "p", "m1", `{"n":1}`), item("cq", "p", "m2", ""), item("cq", "p", "m3", ""))
	pid := pushed[0].PartitionID
	claim := func(group, lease string, batch int32, autoAck bool, edit ...func(*db.PartitionConsumerClaimParams)) []db.PartitionConsumerClaimRow {
		t.Helper()
		arg := db.PartitionConsumerClaimParams{
			PartitionID: pid, ConsumerGroup: group, LeaseID: lease, LeaseSeconds: 60, BatchSize: batch, AutoAck: autoAck,
		}
		for _, f := range edit {
			f(&arg)
		}
		rows, err := tb.b.q.PartitionConsumerClaim(ctx, arg)
		require.NoError(t, err)
		return rows
	}
	seqs := func(rows []db.PartitionConsumerClaimRow) []int64 {
		var out []int64
		for _, r := range rows {
			out = append(out, r.Seq)
		}
		return out
	}

	// A full batch: leased, nothing else changes.
	rows := claim(QueueModeGroup, "L1", 2, false)
	require.Equal(t, []int64{1, 2}, seqs(rows))
	require.Equal(t, "m1", rows[0].TransactionID)
	require.JSONEq(t, `{"n":1}`, string(rows[0].Payload))
	require.False(t, rows[0].HasTrace)
	require.Empty(t, rows[0].ProducerSub)
	c, ok := tb.cursor(pid, QueueModeGroup)
	require.True(t, ok)
	require.Equal(t, "L1", *c.leaseID)
	require.EqualValues(t, 2, c.batchSize)
	require.Zero(t, c.lastSeq)

	// The live lease of another consumer: nothing, the lease unchanged.
	require.Empty(t, claim(QueueModeGroup, "L2", 2, false))
	c, _ = tb.cursor(pid, QueueModeGroup)
	require.Equal(t, "L1", *c.leaseID)

	// autoAck: the cursor passes the batch and the lease ends, same commit.
	rows = claim("g", "L3", 5, true)
	require.Equal(t, []int64{1, 2, 3}, seqs(rows))
	c, _ = tb.cursor(pid, "g")
	require.EqualValues(t, 3, c.lastSeq)
	require.Equal(t, rows[2].ID, *c.lastID)
	require.EqualValues(t, 3, c.consumed)
	require.EqualValues(t, 1, c.batches)
	require.Nil(t, c.leaseID)
	require.Zero(t, c.batchSize)

	// Nothing left: the claim releases its lease at once.
	require.Empty(t, claim("g", "L4", 5, true))
	c, _ = tb.cursor(pid, "g")
	require.EqualValues(t, 3, c.lastSeq)
	require.Nil(t, c.leaseID)
	require.EqualValues(t, 1, c.batches)

	// A short batch records what was delivered, so the lease ends when that
	// many are acked.
	rows = claim("h", "L5", 5, false)
	require.Len(t, rows, 3)
	c, _ = tb.cursor(pid, "h")
	require.Equal(t, "L5", *c.leaseID)
	require.EqualValues(t, 3, c.batchSize)
	require.Zero(t, c.lastSeq)

	// A subscription point after every message: the new cursor starts past
	// them, nothing is delivered, the lease is released.
	later := func(a *db.PartitionConsumerClaimParams) {
		a.StartAfterTime = pgtype.Timestamptz{Time: time.Now().Add(time.Hour), Valid: true}
	}
	require.Empty(t, claim("s", "L6", 5, false, later))
	c, ok = tb.cursor(pid, "s")
	require.True(t, ok)
	require.EqualValues(t, 3, c.lastSeq)
	require.Nil(t, c.leaseID)

	// Delayed processing: messages younger than the delay are not due.
	delayed := func(a *db.PartitionConsumerClaimParams) { a.DelaySeconds = 3600 }
	require.Empty(t, claim("d", "L7", 5, true, delayed))
	c, _ = tb.cursor(pid, "d")
	require.Zero(t, c.lastSeq, "autoAck passes only what it delivered")
	require.Nil(t, c.leaseID)

	// Another consumer claiming the same (partition, group) right now holds
	// the try-lock: no row, no cursor written.
	tx, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(format('%s/%s', $1::uuid, $2::text), 12648430))`, pid, "k")
	require.NoError(t, err)
	require.Empty(t, claim("k", "L8", 5, false))
	_, ok = tb.cursor(pid, "k")
	require.False(t, ok)
	require.NoError(t, tx.Rollback(ctx))
	require.Len(t, claim("k", "L8", 5, false), 3)

	// A deleted partition is a foreign key violation, as before.
	_, err = tb.b.q.PartitionConsumerClaim(ctx, db.PartitionConsumerClaimParams{
		PartitionID: uuid.New(), ConsumerGroup: "x", LeaseID: "L9", LeaseSeconds: 60, BatchSize: 5,
	})
	require.ErrorIs(t, pgerr.Translate(err), pgerr.ErrForeignKey)
}
