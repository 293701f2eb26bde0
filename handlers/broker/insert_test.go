package broker

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seqRows is every stored message of (queue, partition) in sequence order,
// as "seq:transactionId", and the partition's last_seq and vacant_seqs.
func (tb *testBundle) seqRows(queue, partition string) (rows []string, last, vacant int64) {
	tb.t.Helper()
	ctx := tb.t.Context()
	r, err := tb.pool.Query(ctx, `SELECT m.seq, m.transaction_id FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 AND p.name = $2 ORDER BY m.seq`, queue, partition)
	require.NoError(tb.t, err)
	defer r.Close()
	for r.Next() {
		var seq int64
		var tx string
		require.NoError(tb.t, r.Scan(&seq, &tx))
		rows = append(rows, fmt.Sprintf("%d:%s", seq, tx))
	}
	require.NoError(tb.t, r.Err())
	require.NoError(tb.t, tb.pool.QueryRow(ctx, `SELECT p.last_seq, p.vacant_seqs FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 AND p.name = $2`, queue, partition).Scan(&last, &vacant))
	return rows, last, vacant
}

// One flush (one statement) that holds repeats of its own items, repeats
// of stored messages and new messages over two partitions: each new
// message takes the next number in request order, no number is reserved
// for a duplicate, and every duplicate answers with the original's id.
func TestPushStatementDuplicatesInsideOneFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stored := b.push(item("dd", "p", "s1", ""), item("dd", "p", "s2", ""))

	j1 := newJobOf([]PushItem{item("dd", "p", "s2", ""), item("dd", "p", "n1", ""), item("dd", "q", "m1", "")})
	j2 := newJobOf([]PushItem{item("dd", "p", "n1", ""), item("dd", "p", "n2", ""), item("dd", "p", "s1", ""), item("dd", "q", "m1", "")})
	b.b.pusher.flush([]*coalescedJob[PushItem, PushResult]{j1, j2}, 7)
	r1, r2 := <-j1.done, <-j2.done
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)

	status := func(out []PushResult) []PushStatus {
		var s []PushStatus
		for _, r := range out {
			s = append(s, r.Status)
		}
		return s
	}
	require.Equal(t, []PushStatus{Duplicate, Queued, Queued}, status(r1.out))
	require.Equal(t, []PushStatus{Duplicate, Queued, Duplicate, Duplicate}, status(r2.out))
	require.Equal(t, stored[1].MessageID, r1.out[0].MessageID, "a stored message's id")
	require.Equal(t, stored[0].MessageID, r2.out[2].MessageID)
	require.Equal(t, r1.out[1].MessageID, r2.out[0].MessageID, "a repeat inside the flush answers the first")
	require.Equal(t, r1.out[2].MessageID, r2.out[3].MessageID)
	require.Equal(t, r1.out[1].PartitionID, r2.out[0].PartitionID)
	require.NotEqual(t, r1.out[1].PartitionID, r1.out[2].PartitionID)

	rows, last, vacant := b.seqRows("dd", "p")
	require.Equal(t, []string{"1:s1", "2:s2", "3:n1", "4:n2"}, rows)
	require.Equal(t, int64(4), last)
	require.Zero(t, vacant)
	rows, last, vacant = b.seqRows("dd", "q")
	require.Equal(t, []string{"1:m1"}, rows)
	require.Equal(t, int64(1), last)
	require.Zero(t, vacant)
}

// Concurrent flushes (separate statements, each committing alone) that push
// the same transaction ids into the same partitions: each id is stored
// once, every other push of it answers duplicate with the stored id, and
// the numbers stay gapless (1..n, no vacancy), because duplicates are
// looked up only after the partition is locked.
func TestPushStatementDuplicatesAcrossConcurrentFlushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const writers, ids = 8, 20
	results := make([][]PushResult, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var items []PushItem
			for i := range ids {
				// Every writer sends the same ids, starting at a different
				// one, over two partitions.
				k := (i + w*3) % ids
				items = append(items, item("cc", fmt.Sprintf("p%d", k%2), fmt.Sprintf("t%02d", k), ""))
			}
			out, err := b.b.pushDirect(t.Context(), items)
			assert.NoError(t, err) // require may not stop the test from here
			results[w] = out
		})
	}
	wg.Wait()

	queued := map[string]int{}
	idOf := map[string]string{}
	for w, out := range results {
		require.Len(t, out, ids)
		for i, r := range out {
			tx := fmt.Sprintf("t%02d", (i+w*3)%ids)
			if r.Status == Queued {
				queued[tx]++
			}
			if prev, ok := idOf[tx]; ok {
				require.Equal(t, prev, r.MessageID.String(), "%s answers one id", tx)
			}
			idOf[tx] = r.MessageID.String()
		}
	}
	require.Len(t, queued, ids)
	for tx, n := range queued {
		require.Equal(t, 1, n, "%s queued once", tx)
	}
	for _, p := range []string{"p0", "p1"} {
		rows, last, vacant := b.seqRows("cc", p)
		require.Len(t, rows, ids/2)
		for i, r := range rows {
			require.Regexp(t, fmt.Sprintf("^%d:", i+1), r)
		}
		require.Equal(t, int64(ids/2), last)
		require.Zero(t, vacant)
	}
}

// Messages have no foreign key to their partition any more (migration
// 0012): a trigger removes them with it. Whichever way a partition goes
// (queue delete, clear, SQL by hand), its messages go too and the others
// stay.
func TestMessagesGoWithTheirPartition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.push(item("fk1", "a", "a1", ""), item("fk1", "a", "a2", ""), item("fk1", "b", "b1", ""),
		item("fk1", "c", "c1", ""), item("fk2", "a", "x1", ""), item("keep", "a", "k1", ""))
	count := func() (all, orphans int) {
		t.Helper()
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = m.partition_id))
			FROM queen.messages m`).Scan(&all, &orphans))
		return all, orphans
	}
	all, orphans := count()
	require.Equal(t, 6, all)
	require.Zero(t, orphans)

	_, err := b.pool.Exec(ctx, `DELETE FROM queen.partitions p USING queen.queues q
		WHERE q.id = p.queue_id AND q.name = 'fk1' AND p.name = 'b'`)
	require.NoError(t, err)
	all, orphans = count()
	require.Equal(t, 5, all)
	require.Zero(t, orphans)

	part := "c"
	_, err = b.b.ClearQueue(ctx, DefaultTenant, "fk1", &part)
	require.NoError(t, err)
	deleted, err := b.b.DeleteQueue(ctx, DefaultTenant, "fk2")
	require.NoError(t, err)
	require.True(t, deleted)
	all, orphans = count()
	require.Equal(t, 3, all, "fk1/a holds two, keep/a one")
	require.Zero(t, orphans)
}

// Inside a caller's transaction the duplicate check is on from the start:
// a stored transactionId is answered duplicate without failing the
// statement, so the transaction goes on and commits.
func TestPushStatementDuplicatesInsideATransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	stored := b.push(item("tx", "p", "s1", ""))
	k := key(DefaultTenant, "tx")
	queues, err := b.b.ensureQueues(ctx, []QueueKey{k})
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	out, err := b.b.insertMessages(ctx, tx, queues, []PushItem{item("tx", "p", "n1", ""), item("tx", "p", "s1", "")}, false)
	require.NoError(t, err)
	require.Equal(t, Queued, out[0].Status)
	require.Equal(t, Duplicate, out[1].Status)
	require.Equal(t, stored[0].MessageID, out[1].MessageID)
	out, err = b.b.insertMessages(ctx, tx, queues, []PushItem{item("tx", "p", "n2", "")}, false)
	require.NoError(t, err)
	require.Equal(t, Queued, out[0].Status)
	require.NoError(t, tx.Commit(ctx))

	rows, last, vacant := b.seqRows("tx", "p")
	require.Equal(t, []string{"1:s1", "2:n1", "3:n2"}, rows)
	require.Equal(t, int64(3), last)
	require.Zero(t, vacant)
}
