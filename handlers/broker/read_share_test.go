package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// sharedSetup makes queue q's partition p1 hold m0, consumed by groups a
// and b with autoAck (their cursor rows exist, and this broker knows both
// cursors), then pushes m1..m5 and lets group a read them: the rows are
// kept for group b.
func sharedSetup(t *testing.T, q string, opts QueueOptions) (*testBundle, PopRequest, PopRequest) {
	t.Helper()
	tb := setup(t)
	_, _, err := tb.b.Configure(t.Context(), "", q, "", "", opts)
	require.NoError(t, err)
	a := PopRequest{Queue: q, Group: "a", AutoAck: true, Batch: 10}
	b := PopRequest{Queue: q, Group: "b", AutoAck: true, Batch: 10}
	tb.push(item(q, "p1", "m0", ""))
	require.Equal(t, []string{"m0"}, ids(tb.pop(a)))
	require.Equal(t, []string{"m0"}, ids(tb.pop(b)))
	for i := 1; i <= 5; i++ {
		tb.push(item(q, "p1", fmt.Sprintf("m%d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	require.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, ids(tb.pop(a)))
	return tb, a, b
}

// ids is txIDs of a result that may be nil (nothing delivered).
func ids(r *PopResult) []string {
	if r == nil {
		return nil
	}
	return txIDs(r)
}

// lastSeqOf is group's last_seq on queue q's partition p1.
func (tb *testBundle) lastSeqOf(q, group string) int64 {
	tb.t.Helper()
	var seq int64
	require.NoError(tb.t, tb.pool.QueryRow(tb.t.Context(), `SELECT pc.last_seq FROM queen.partition_consumers pc
		JOIN queen.partitions p ON p.id = pc.partition_id JOIN queen.queues qu ON qu.id = p.queue_id
		WHERE qu.name = $1 AND p.name = 'p1' AND pc.consumer_group = $2`, q, group).Scan(&seq))
	return seq
}

// A second group's autoAck pop of messages another group's pop just read
// on this broker moves its cursor without reading them again, and delivers
// the same messages, payloads included, in the same order; its next pop
// finds nothing more.
func TestSecondGroupIsServedFromTheFirstGroupsRead(t *testing.T) {
	t.Parallel()
	tb, a, b := sharedSetup(t, "share", QueueOptionsDefault())
	reads := tb.b.shared.reads.Load()
	b.Batch = 5
	got := tb.pop(b)
	require.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, ids(got))
	for i, m := range got.Messages {
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(m.Payload))
	}
	require.EqualValues(t, 1, tb.b.shared.served.Load(), "served from the kept rows")
	require.Equal(t, reads, tb.b.shared.reads.Load(), "no read")
	require.Equal(t, tb.lastSeqOf("share", "a"), tb.lastSeqOf("share", "b"), "b's cursor moved past m5")
	require.Nil(t, tb.pop(b), "nothing delivered twice")
	require.Nil(t, tb.pop(a))
}

// When the group's cursor is not where this broker last saw it (another
// broker's pop moved it), the statement that moves it finds no row and the
// pop reads: it delivers what is past the real cursor, nothing twice and
// nothing skipped.
func TestStaleCursorFallsBackToTheRead(t *testing.T) {
	t.Parallel()
	tb, _, b := sharedSetup(t, "stale", QueueOptionsDefault())
	// Another broker delivered m1 and m2 to group b.
	var m2 int64
	require.NoError(t, tb.pool.QueryRow(t.Context(), `SELECT m.seq FROM queen.messages m
		WHERE m.transaction_id = 'm2'`).Scan(&m2))
	_, err := tb.pool.Exec(t.Context(), `UPDATE queen.partition_consumers SET last_seq = $1 WHERE consumer_group = 'b'`, m2)
	require.NoError(t, err)

	b.Batch = 3
	require.Equal(t, []string{"m3", "m4", "m5"}, ids(tb.pop(b)))
	require.EqualValues(t, 1, tb.b.shared.fellBack.Load(), "the kept rows were tried")
	require.EqualValues(t, 0, tb.b.shared.served.Load())
	require.Nil(t, tb.pop(b))
}

// A message pushed after the read whose rows served a group is delivered
// to that group's next pop, by a read.
func TestMessagePushedAfterTheKeptReadComesNext(t *testing.T) {
	t.Parallel()
	tb, _, b := sharedSetup(t, "later", QueueOptionsDefault())
	tb.push(item("later", "p1", "m6", ""))
	b.Batch = 5
	require.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, ids(tb.pop(b)))
	require.EqualValues(t, 1, tb.b.shared.served.Load())
	require.Equal(t, []string{"m6"}, ids(tb.pop(b)))
	require.Nil(t, tb.pop(b))
}

// A message deleted on this broker after a group read it is not served to
// another group from the kept rows.
func TestDeletedMessageIsNotServedFromAKeptRead(t *testing.T) {
	t.Parallel()
	tb, _, b := sharedSetup(t, "delmsg", QueueOptionsDefault())
	var part uuid.UUID
	require.NoError(t, tb.pool.QueryRow(t.Context(), `SELECT m.partition_id FROM queen.messages m
		WHERE m.transaction_id = 'm2'`).Scan(&part))
	ok, err := tb.b.DeleteMessage(t.Context(), "", part, "m2")
	require.NoError(t, err)
	require.True(t, ok)
	b.Batch = 4
	require.Equal(t, []string{"m1", "m3", "m4", "m5"}, ids(tb.pop(b)))
	require.EqualValues(t, 0, tb.b.shared.served.Load())
}

// A queue deleted, or cleared, on this broker leaves nothing kept of it.
func TestDeletedQueueLeavesNothingKept(t *testing.T) {
	t.Parallel()
	for _, clear := range []bool{false, true} {
		tb, _, _ := sharedSetup(t, "delq", QueueOptionsDefault())
		require.Len(t, tb.b.shared.m, 1)
		if clear {
			_, err := tb.b.ClearQueue(t.Context(), "", "delq", nil)
			require.NoError(t, err)
		} else {
			_, err := tb.b.DeleteQueue(t.Context(), "", "delq")
			require.NoError(t, err)
		}
		require.Empty(t, tb.b.shared.m, "clear %v", clear)
	}
}

// A queue with a delay keeps nothing and serves nothing from another
// group's read.
func TestDelayQueueNeverSharesReads(t *testing.T) {
	t.Parallel()
	opts := QueueOptionsDefault()
	opts.DelayedProcessing = 1
	tb := setup(t)
	_, _, err := tb.b.Configure(t.Context(), "", "delay", "", "", opts)
	require.NoError(t, err)
	a := PopRequest{Queue: "delay", Group: "a", AutoAck: true, Batch: 10, Wait: true}
	b := a
	b.Group = "b"
	tb.push(item("delay", "p1", "m0", ""))
	require.Equal(t, []string{"m0"}, ids(tb.pop(a)))
	require.Equal(t, []string{"m0"}, ids(tb.pop(b)))
	tb.push(item("delay", "p1", "m1", ""), item("delay", "p1", "m2", ""), item("delay", "p1", "m3", ""))
	require.Equal(t, []string{"m1", "m2", "m3"}, ids(tb.pop(a)))
	b.Batch = 3
	require.Equal(t, []string{"m1", "m2", "m3"}, ids(tb.pop(b)))
	require.EqualValues(t, 0, tb.b.shared.served.Load())
	require.Empty(t, tb.b.shared.m)
}

// The claims of two groups that wait for a third group's read of the
// partition in flight are served from its rows and move their cursors in
// one statement (one commit).
func TestGroupsWaitingForOneReadMoveTogether(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, _, err := tb.b.Configure(t.Context(), "", "together", "", "", QueueOptionsDefault())
	require.NoError(t, err)
	req := func(g string, batch int) PopRequest {
		return PopRequest{Queue: "together", Group: g, AutoAck: true, Batch: batch}
	}
	tb.push(item("together", "p1", "m0", ""))
	first := tb.pop(req("a", 10))
	require.Equal(t, []string{"m0"}, ids(first))
	require.Equal(t, []string{"m0"}, ids(tb.pop(req("b", 10))))
	require.Equal(t, []string{"m0"}, ids(tb.pop(req("c", 10))))
	for i := 1; i <= 5; i++ {
		tb.push(item("together", "p1", fmt.Sprintf("m%d", i), ""))
	}

	r := tb.b.shared.begin(first.PartitionID) // a read of p1 in flight
	require.NotNil(t, r)
	got := make(chan []string, 2)
	for _, g := range []string{"b", "c"} {
		go func() {
			res, err := tb.b.Pop(t.Context(), req(g, 5))
			require.NoError(t, err)
			got <- ids(res)
		}()
	}
	require.Eventually(t, func() bool {
		tb.b.shared.mu.Lock()
		defer tb.b.shared.mu.Unlock()
		return r.waiters == 2
	}, 10*time.Second, time.Millisecond, "both claims wait for the read")
	// The read in flight: group a's, its rows kept as its claim keeps them
	// (a pop of a would wait for the read registered above).
	epoch, sent := tb.b.shared.epoch.Load(), time.Now()
	rows, err := autoAckReadAlone(t.Context(), tb.b.q, db.PartitionConsumerAutoAckReadParams{
		PartitionID: first.PartitionID, ConsumerGroup: "a", BatchSize: 10,
	})
	require.NoError(t, err)
	require.Len(t, rows, 5)
	var queueID uuid.UUID
	require.NoError(t, tb.pool.QueryRow(t.Context(), `SELECT id FROM queen.queues WHERE name = 'together'`).Scan(&queueID))
	tb.b.shared.keep(queueID, first.PartitionID, rows, 10, sent, epoch)
	tb.b.shared.end(first.PartitionID, r)
	for range 2 {
		require.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, <-got)
	}
	require.EqualValues(t, 2, tb.b.shared.served.Load())
	require.EqualValues(t, 1, tb.b.shared.advances.Load(), "one statement moved both cursors")
	require.Equal(t, tb.lastSeqOf("together", "a"), tb.lastSeqOf("together", "b"))
	require.Equal(t, tb.lastSeqOf("together", "a"), tb.lastSeqOf("together", "c"))
}
