package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// readSetup makes queue q's partitions p1..p3 each hold m0, consumed by
// each of groups with autoAck (their cursor rows exist), then pushes
// <p>-m1..<p>-m5 to each.
func readSetup(t *testing.T, q string, groups ...string) *testBundle {
	t.Helper()
	tb := setup(t)
	_, _, err := tb.b.Configure(t.Context(), "", q, "", "", QueueOptionsDefault())
	require.NoError(t, err)
	for _, p := range []string{"p1", "p2", "p3"} {
		tb.push(item(q, p, p+"-m0", ""))
		for _, g := range groups {
			require.Equal(t, []string{p + "-m0"}, ids(tb.pop(PopRequest{Queue: q, Partition: p, Group: g, AutoAck: true, Batch: 10})))
		}
		for i := 1; i <= 5; i++ {
			tb.push(item(q, p, fmt.Sprintf("%s-m%d", p, i), ""))
		}
	}
	return tb
}

// holdReads makes the reads' flush in flight wait on a transaction that
// locks the cursor table, then runs the given reads, the first alone in
// that flush and the others queued behind it, and commits the lock once
// they all wait. Each read's answer comes on the returned channel.
func holdReads(t *testing.T, tb *testBundle, first func(), rest ...func()) {
	t.Helper()
	tx, err := tb.pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(t.Context(), `LOCK TABLE queen.partition_consumers IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	queued := tb.b.reader.queued.Load()
	go first()
	// Taken in by the group commit, the first read is flushed at once: it
	// is in flight (held by the lock) before the next reads come.
	require.Eventually(t, func() bool { return tb.b.reader.queued.Load() == queued+1 }, 10*time.Second, time.Millisecond)
	for _, f := range rest {
		go f()
	}
	require.Eventually(t, func() bool { return tb.b.reader.queued.Load() == queued+1+int64(len(rest)) }, 10*time.Second, time.Millisecond,
		"the other reads wait for the flush in flight")
	require.NoError(t, tx.Commit(t.Context()))
}

// The autoAck reads of several partitions that wait for the reads' flush
// in flight are sent in one batch, one commit: three pops, two batches,
// each pop its partition's messages once.
func TestReadsOfSeveralPartitionsShareOneCommit(t *testing.T) {
	t.Parallel()
	tb := readSetup(t, "reads", "a")
	batches := tb.b.shared.readBatches.Load()
	got := make(chan popped, 3)
	pop := func(p string) func() {
		return func() {
			res, err := tb.b.Pop(t.Context(), PopRequest{Queue: "reads", Partition: p, Group: "a", AutoAck: true, Batch: 10})
			got <- popped{p, ids(res), err}
		}
	}
	holdReads(t, tb, pop("p1"), pop("p2"), pop("p3"))
	for range 3 {
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, fiveOf(r.part), r.ids)
	}
	require.EqualValues(t, 2, tb.b.shared.readBatches.Load()-batches, "p2's and p3's reads in one batch")
	for _, p := range []string{"p1", "p2", "p3"} {
		require.Nil(t, tb.pop(PopRequest{Queue: "reads", Partition: p, Group: "a", AutoAck: true, Batch: 10}), "nothing delivered twice")
	}
}

// A read that fails in a shared batch fails alone: the batch is sent again
// read by read, the others deliver (their cursors moved once), and the
// failing one's error is translated.
func TestFailingReadFailsOnlyItsOwnClaim(t *testing.T) {
	t.Parallel()
	tb := readSetup(t, "fails", "a")
	var parts [3]uuid.UUID
	for i, p := range []string{"p1", "p2", "p3"} {
		require.NoError(t, tb.pool.QueryRow(t.Context(), `SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
			WHERE q.name = 'fails' AND p.name = $1`, p).Scan(&parts[i]))
	}
	type answer struct {
		i    int
		rows []db.PartitionConsumerAutoAckReadRow
		err  error
	}
	got := make(chan answer, 3)
	read := func(i int, batch int32) func() {
		return func() {
			rows, err := tb.b.readAutoAck(t.Context(), readItem{PartitionID: parts[i], ConsumerGroup: "a", BatchSize: batch})
			got <- answer{i, rows, err}
		}
	}
	batches := tb.b.shared.readBatches.Load()
	// p2's read asks for a negative batch: PostgreSQL refuses its LIMIT.
	holdReads(t, tb, read(0, 10), read(1, -1), read(2, 10))
	for range 3 {
		a := <-got
		if a.i == 1 {
			require.ErrorIs(t, a.err, pgerr.ErrInvalidInput, "translated")
			continue
		}
		require.NoError(t, a.err)
		require.Len(t, a.rows, 5)
	}
	require.EqualValues(t, 4, tb.b.shared.readBatches.Load()-batches, "p1's; p2's and p3's together, failed; each alone")
	require.Nil(t, tb.pop(PopRequest{Queue: "fails", Partition: "p3", Group: "a", AutoAck: true, Batch: 10}), "p3's cursor moved once")
	require.Equal(t, fiveOf("p2"), ids(tb.pop(PopRequest{Queue: "fails", Partition: "p2", Group: "a", AutoAck: true, Batch: 10})), "p2's did not")
}
