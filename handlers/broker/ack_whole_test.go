package broker

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// cursorRow is what an ack writes of a cursor row.
type cursorRow struct {
	LastSeq, Consumed, Batches int64
	Acked, Retries, BatchSize  int32
	LeaseHeld, LastIDIsLast    bool
	ConsumedAtSet              bool
}

func (tb *testBundle) cursorOf(p *PopResult) cursorRow {
	tb.t.Helper()
	var c cursorRow
	last := p.Messages[len(p.Messages)-1].ID
	require.NoError(tb.t, tb.pool.QueryRow(tb.t.Context(), `
		SELECT last_seq, total_messages_consumed, total_batches_consumed, acked_count, batch_retry_count,
		       batch_size, lease_id IS NOT NULL OR lease_expires_at IS NOT NULL OR lease_acquired_at IS NOT NULL,
		       last_consumed_id IS NOT DISTINCT FROM $2, last_consumed_at IS NOT NULL
		FROM queen.partition_consumers WHERE partition_id = $1 AND consumer_group = '__QUEUE_MODE__'`,
		p.PartitionID, last).Scan(&c.LastSeq, &c.Consumed, &c.Batches, &c.Acked, &c.Retries, &c.BatchSize,
		&c.LeaseHeld, &c.LastIDIsLast, &c.ConsumedAtSet))
	return c
}

// pushPop pushes n messages to one partition of queue and pops them with a
// batch of batch (n or more) under one lease.
func (tb *testBundle) pushPop(queue string, n, batch int) *PopResult {
	tb.t.Helper()
	items := make([]PushItem, n)
	for i := range items {
		items[i] = item(queue, "p", fmt.Sprintf("tx-%s-%d", queue, i+1), "")
	}
	tb.push(items...)
	p := tb.pop(PopRequest{Queue: queue, Batch: batch})
	require.NotNil(tb.t, p)
	require.Len(tb.t, p.Messages, n)
	return p
}

func completedAcks(p *PopResult) []AckItem {
	items := make([]AckItem, len(p.Messages))
	for i, m := range p.Messages {
		items[i] = ackOf(m.TransactionID, p, AckCompleted, "")
	}
	return items
}

// generalAck applies items through the general path (applyAcks), in the
// transaction ackDirect opens for it.
func (tb *testBundle) generalAck(items []AckItem) []AckResult {
	tb.t.Helper()
	var res []AckResult
	require.NoError(tb.t, pgx.BeginFunc(tb.t.Context(), tb.pool, func(tx pgx.Tx) error {
		var err error
		res, err = applyAcks(tb.t.Context(), tb.b.q.WithTx(tx), items, ackNormal, tb.b.delivered)
		return err
	}))
	return res
}

// The ack of whole remembered batches (one statement) writes the cursor rows
// and answers the results the general path writes and answers for the same
// batches: a full batch, a batch smaller than the pop asked for, and two
// batches in one flush, out of order.
func TestAckWholeBatchesAsTheGeneralPath(t *testing.T) {
	tb := setup(t)
	for _, shape := range []struct {
		name     string
		n, batch int
	}{{"full", 5, 5}, {"short", 3, 10}} {
		whole, general := tb.pushPop("w"+shape.name, shape.n, shape.batch), tb.pushPop("g"+shape.name, shape.n, shape.batch)
		items := completedAcks(whole)
		got, applied, err := tb.b.ackWhole(t.Context(), items)
		require.NoError(t, err)
		require.True(t, applied, shape.name)
		want := tb.generalAck(completedAcks(general))
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, items[i].TransactionID, got[i].TransactionID, shape.name)
			require.Equal(t, want[i].LeaseReleased, got[i].LeaseReleased, "%s %d", shape.name, i)
			require.Equal(t, want[i].Partition, got[i].Partition)
			require.Equal(t, "w"+shape.name, got[i].Queue)
			require.NoError(t, got[i].Refused)
			require.False(t, got[i].DeadLettered)
		}
		require.Equal(t, tb.cursorOf(general), tb.cursorOf(whole), shape.name)
		require.Equal(t, cursorRow{LastSeq: int64(shape.n), Consumed: int64(shape.n), Batches: 1, Acked: int32(shape.n),
			LastIDIsLast: true, ConsumedAtSet: true}, tb.cursorOf(whole), shape.name)
	}

	a, b := tb.pushPop("wtwo-a", 4, 4), tb.pushPop("wtwo-b", 2, 2)
	items := append(completedAcks(b), completedAcks(a)...)
	items[0], items[1] = items[1], items[0]
	res, applied, err := tb.b.ackWhole(t.Context(), items)
	require.NoError(t, err)
	require.True(t, applied)
	for i, r := range res {
		require.Equal(t, i == 0 || i == len(items)-1, r.LeaseReleased, "released at each batch's last message: %d", i)
	}
	require.False(t, tb.cursorOf(a).LeaseHeld)
	require.False(t, tb.cursorOf(b).LeaseHeld)
}

// Where a flush is not made of whole remembered batches, or a cursor row
// is not as the broker remembers it, the one statement writes nothing, for
// any of the flush's cursors, and Ack answers through the general path.
func TestAckWholeWritesNothingUnlessEveryBatchIsAsRemembered(t *testing.T) {
	tb := setup(t)
	notApplied := func(items []AckItem, held ...*PopResult) {
		t.Helper()
		res, applied, err := tb.b.ackWhole(t.Context(), items)
		require.NoError(t, err)
		require.False(t, applied)
		require.Nil(t, res)
		for _, p := range held {
			require.True(t, tb.cursorOf(p).LeaseHeld, "nothing written")
			require.Zero(t, tb.cursorOf(p).LastSeq, "nothing written")
		}
	}

	// Part of a batch, then the rest of it.
	p := tb.pushPop("part", 4, 4)
	items := completedAcks(p)
	notApplied(items[:2], p)
	res, err := tb.b.Ack(t.Context(), DefaultTenant, items[:2])
	require.NoError(t, err)
	require.False(t, res[1].LeaseReleased)
	notApplied(items[2:])
	res, err = tb.b.Ack(t.Context(), DefaultTenant, items[2:])
	require.NoError(t, err)
	require.True(t, res[1].LeaseReleased)
	require.EqualValues(t, 4, tb.cursorOf(p).LastSeq)

	// A status other than completed, an ack without a lease or with another
	// one, a message named twice.
	p = tb.pushPop("shape", 2, 2)
	for name, edit := range map[string]func([]AckItem) []AckItem{
		"failed":   func(it []AckItem) []AckItem { it[1].Status = AckFailed; return it },
		"no lease": func(it []AckItem) []AckItem { it[0].LeaseID, it[1].LeaseID = "", ""; return it },
		"a lease":  func(it []AckItem) []AckItem { it[0].LeaseID, it[1].LeaseID = "x", "x"; return it },
		"twice":    func(it []AckItem) []AckItem { it[1] = it[0]; return it },
	} {
		t.Log(name)
		notApplied(edit(completedAcks(p)), p)
	}

	// Two whole batches in one flush, one of whose leases expired: neither
	// cursor is written, and the general path refuses the expired one only.
	a, b := tb.pushPop("exp-a", 2, 2), tb.pushPop("exp-b", 3, 3)
	_, err = tb.pool.Exec(t.Context(), `UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 second'
		WHERE partition_id = $1`, b.PartitionID)
	require.NoError(t, err)
	both := append(completedAcks(a), completedAcks(b)...)
	notApplied(both, a)
	require.Zero(t, tb.cursorOf(b).LastSeq)
	res, err = tb.b.Ack(t.Context(), DefaultTenant, both)
	require.NoError(t, err)
	for i, r := range res {
		if i < 2 {
			require.NoError(t, r.Refused)
		} else {
			require.ErrorIs(t, r.Refused, ErrLeaseLost)
		}
	}
	require.EqualValues(t, 2, tb.cursorOf(a).LastSeq)

	// A message of the batch deleted since the pop (the partition's
	// vacant_seqs moved): not written, and the general path finds it gone.
	p = tb.pushPop("del", 3, 3)
	gone, err := tb.b.DeleteMessage(t.Context(), DefaultTenant, p.PartitionID, p.Messages[2].TransactionID)
	require.NoError(t, err)
	require.True(t, gone)
	notApplied(completedAcks(p), p)
	res, err = tb.b.Ack(t.Context(), DefaultTenant, completedAcks(p))
	require.NoError(t, err)
	require.ErrorIs(t, res[2].Refused, ErrNotFound)
}
