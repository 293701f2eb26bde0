package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// moveSetup is readSetup with groups a and b, and group a then reads
// each partition's m1..m5: the rows are kept for group b (this broker
// knows every cursor).
func moveSetup(t *testing.T, q string) *testBundle {
	t.Helper()
	tb := readSetup(t, q, "a", "b")
	for _, p := range []string{"p1", "p2", "p3"} {
		require.Equal(t, fiveOf(p), ids(tb.pop(PopRequest{Queue: q, Partition: p, Group: "a", AutoAck: true, Batch: 10})))
	}
	return tb
}

// fiveOf is partition p's m1..m5.
func fiveOf(p string) []string {
	out := make([]string, 5)
	for i := range out {
		out[i] = fmt.Sprintf("%s-m%d", p, i+1)
	}
	return out
}

// lastSeqIn is group's last_seq on queue q's partition p.
func (tb *testBundle) lastSeqIn(q, p, group string) int64 {
	tb.t.Helper()
	var seq int64
	require.NoError(tb.t, tb.pool.QueryRow(tb.t.Context(), `SELECT pc.last_seq FROM queen.partition_consumers pc
		JOIN queen.partitions p ON p.id = pc.partition_id JOIN queen.queues qu ON qu.id = p.queue_id
		WHERE qu.name = $1 AND p.name = $2 AND pc.consumer_group = $3`, q, p, group).Scan(&seq))
	return seq
}

// popped is one pop's answer.
type popped struct {
	part string
	ids  []string
	err  error
}

// holdMoves starts group b's pops of the three partitions, each served
// from group a's kept rows, so that p1's move is the flush in flight and
// p2's and p3's wait for it together: the flush is held by a transaction
// that locks the cursor table, which the test ends (commit or rollback)
// when it is done with it. ctx2 is p2's pop's context.
func holdMoves(t *testing.T, tb *testBundle, q string, ctx2 context.Context) (pgx.Tx, chan popped) {
	t.Helper()
	tx, err := tb.pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(t.Context(), `LOCK TABLE queen.partition_consumers IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	got := make(chan popped, 3)
	start := func(ctx context.Context, p string) {
		go func() {
			res, err := tb.b.Pop(ctx, PopRequest{Queue: q, Partition: p, Group: "b", AutoAck: true, Batch: 5})
			got <- popped{p, ids(res), err}
		}()
	}
	queued := tb.b.mover.queued.Load()
	start(t.Context(), "p1")
	// Taken in by the group commit, p1's move is flushed at once: the
	// flush is in flight (held by the lock) before the next move comes.
	require.Eventually(t, func() bool { return tb.b.mover.queued.Load() == queued+1 }, 10*time.Second, time.Millisecond)
	start(ctx2, "p2")
	start(t.Context(), "p3")
	require.Eventually(t, func() bool { return tb.b.mover.queued.Load() == queued+3 }, 10*time.Second, time.Millisecond,
		"p2's and p3's moves wait for the flush in flight")
	return tx, got
}

// The serves of several partitions that wait for the flush in flight are
// committed together: three served claims, two statements, and each
// delivers its partition's messages once.
func TestServesOfSeveralPartitionsShareOneCommit(t *testing.T) {
	t.Parallel()
	tb := moveSetup(t, "moves")
	advances := tb.b.shared.advances.Load()
	tx, got := holdMoves(t, tb, "moves", t.Context())
	require.NoError(t, tx.Commit(t.Context()))
	for range 3 {
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, fiveOf(r.part), r.ids)
	}
	require.EqualValues(t, 3, tb.b.shared.served.Load())
	require.EqualValues(t, 2, tb.b.shared.advances.Load()-advances, "p2's and p3's moves in one statement")
	requireBCaughtUpWithA(t, tb, "moves", "p1", "p2", "p3")
}

// A move that misses in a shared flush (the cursor moved behind this
// broker's back, as another broker's read moves it) does not keep the
// others in the flush from moving: its claim reads from the real cursor,
// nothing twice and nothing skipped.
func TestMoveThatMissesLeavesTheOthersInItsFlush(t *testing.T) {
	t.Parallel()
	tb := moveSetup(t, "miss")
	tx, got := holdMoves(t, tb, "miss", t.Context())
	// Another broker delivered p3's m1 and m2 to group b (the lock is the
	// test's own).
	_, err := tx.Exec(t.Context(), `UPDATE queen.partition_consumers pc SET last_seq = m.seq
		FROM queen.messages m WHERE m.transaction_id = 'p3-m2' AND pc.partition_id = m.partition_id AND pc.consumer_group = 'b'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(t.Context()))
	want := map[string][]string{"p1": fiveOf("p1"), "p2": fiveOf("p2"), "p3": fiveOf("p3")[2:]}
	for range 3 {
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, want[r.part], r.ids, r.part)
	}
	require.EqualValues(t, 2, tb.b.shared.served.Load())
	require.EqualValues(t, 1, tb.b.shared.fellBack.Load(), "p3's move missed, its claim read")
	requireBCaughtUpWithA(t, tb, "miss", "p1", "p2", "p3")
}

// A pop cancelled while its move waits in the group commit does not
// cancel the flush that carries the other claims' moves (p3's), and its
// own move, queued, is committed and answered: the pop delivers what its
// cursor moved past (its client may be gone, as after a read that
// committed), nothing twice.
func TestCancelledPopKeepsTheOthersMoves(t *testing.T) {
	t.Parallel()
	tb := moveSetup(t, "cancel")
	ctx2, cancel := context.WithCancel(t.Context())
	advances := tb.b.shared.advances.Load()
	tx, got := holdMoves(t, tb, "cancel", ctx2)
	cancel()
	require.NoError(t, tx.Commit(t.Context()))
	for range 3 {
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, fiveOf(r.part), r.ids, r.part)
	}
	require.EqualValues(t, 3, tb.b.shared.served.Load())
	require.EqualValues(t, 2, tb.b.shared.advances.Load()-advances, "p2's and p3's moves in one statement")
	requireBCaughtUpWithA(t, tb, "cancel", "p2", "p3")
}

// requireBCaughtUpWithA checks that group b's cursor on each partition of
// queue q stands where group a's does (b was served what a read) and that
// a pop of b finds nothing more: nothing skipped, nothing delivered twice.
func requireBCaughtUpWithA(t *testing.T, tb *testBundle, q string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		require.Equal(t, tb.lastSeqIn(q, p, "a"), tb.lastSeqIn(q, p, "b"), p)
		require.Nil(t, tb.pop(PopRequest{Queue: q, Partition: p, Group: "b", AutoAck: true, Batch: 10}), "nothing delivered twice")
	}
}
