package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// fillPartitions pushes n messages to each of the named partitions of queue.
func (tb *testBundle) fillPartitions(queue string, n int, partitions ...string) {
	tb.t.Helper()
	var items []PushItem
	for _, p := range partitions {
		for i := range n {
			items = append(items, item(queue, p, fmt.Sprintf("tx-%s-%s-%d", queue, p, i), ""))
		}
	}
	tb.push(items...)
}

// consumeOne pops and acks one message of each named partition of queue:
// a cursor row on each, as a consumed queue has them (a partition without
// one is never kept).
func (tb *testBundle) consumeOne(queue string, partitions ...string) {
	tb.t.Helper()
	for _, part := range partitions {
		p := tb.pop(PopRequest{Queue: queue, Partition: part, Batch: 1})
		require.NotNil(tb.t, p)
		_, err := tb.b.Ack(tb.t.Context(), DefaultTenant, []AckItem{ackOf(p.Messages[0].TransactionID, p, AckCompleted, "")})
		require.NoError(tb.t, err)
	}
}

func (tb *testBundle) kept(queue string) int {
	tb.b.recent.mu.Lock()
	defer tb.b.recent.mu.Unlock()
	s := tb.b.recent.m[watermarkKey{key(DefaultTenant, queue), QueueModeGroup}]
	if s == nil {
		return 0
	}
	return len(s.parts)
}

// The partitions a pop's scan listed with more than a batch to give, and
// did not claim, are claimed by the next pops without a scan, one each.
func TestPopsClaimWhatARecentScanListed(t *testing.T) {
	tb := setup(t)
	tb.fillPartitions("recent", 5, "a", "b", "c")
	tb.consumeOne("recent", "a", "b", "c")

	seen := map[string]bool{}
	first := tb.pop(PopRequest{Queue: "recent", Batch: 2})
	seen[first.Partition] = true
	require.Equal(t, 2, tb.kept("recent"), "the two partitions the scan listed and the pop did not claim")
	for left := 1; left >= 0; left-- {
		p := tb.pop(PopRequest{Queue: "recent", Batch: 2})
		require.NotNil(t, p)
		require.Len(t, p.Messages, 2)
		require.False(t, seen[p.Partition], "each kept partition goes to one pop")
		seen[p.Partition] = true
		require.Equal(t, left, tb.kept("recent"), "taken from the list, not scanned")
	}
	require.Nil(t, tb.pop(PopRequest{Queue: "recent", Batch: 2}), "every partition is leased")
}

// Partitions with a batch or less to give are not kept: consumers that keep
// up scan at every pop, as before.
func TestPartitionsWithoutABacklogAreNotKept(t *testing.T) {
	tb := setup(t)
	tb.fillPartitions("shallow", 3, "a", "b", "c")
	tb.consumeOne("shallow", "a", "b", "c")
	require.NotNil(t, tb.pop(PopRequest{Queue: "shallow", Batch: 2}))
	require.Zero(t, tb.kept("shallow"), "2 messages left in each, not more than the batch")
	require.NotNil(t, tb.pop(PopRequest{Queue: "shallow", Batch: 1}))
	require.Equal(t, 1, tb.kept("shallow"), "with a batch of 1, the partition neither pop claimed")
}

// A queue with a window buffer keeps nothing: the window is tested by the
// scan only, and a push within the list's moment would reopen it.
func TestWindowBufferedQueuesKeepNothing(t *testing.T) {
	tb := setup(t)
	_, _, err := tb.b.Configure(t.Context(), DefaultTenant, "windowed", "", "", QueueOptions{WindowBuffer: 1})
	require.NoError(t, err)
	tb.fillPartitions("windowed", 5, "a", "b", "c")
	_, err = tb.pool.Exec(t.Context(), `UPDATE queen.partitions SET last_message_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	tb.consumeOne("windowed", "a", "b", "c")
	require.NotNil(t, tb.pop(PopRequest{Queue: "windowed", Batch: 2}))
	require.Zero(t, tb.kept("windowed"))
}

// A kept partition drained since the scan (by another broker's consumers,
// say) costs its claim, which finds nothing and releases; the pop then
// scans, and delivers what the scan finds, here a partition filled after
// the list was made.
func TestAPopScansWhenTheKeptPartitionsAreDrained(t *testing.T) {
	tb := setup(t)
	tb.fillPartitions("stale", 5, "a", "b", "c")
	tb.consumeOne("stale", "a", "b", "c")
	first := tb.pop(PopRequest{Queue: "stale", Batch: 2})
	require.Equal(t, 2, tb.kept("stale"))
	_, err := tb.pool.Exec(t.Context(), `
		UPDATE queen.partition_consumers pc SET last_seq = p.last_seq
		FROM queen.partitions p WHERE p.id = pc.partition_id AND p.id <> $1`, first.PartitionID)
	require.NoError(t, err)
	tb.fillPartitions("stale", 1, "d")

	p := tb.pop(PopRequest{Queue: "stale", Batch: 2})
	require.NotNil(t, p, "the scan after the drained kept partitions finds d")
	require.Equal(t, "d", p.Partition)
	require.Zero(t, tb.kept("stale"))
	var leased int
	require.NoError(t, tb.pool.QueryRow(t.Context(), `
		SELECT count(*) FROM queen.partition_consumers WHERE lease_id IS NOT NULL`).Scan(&leased))
	require.Equal(t, 2, leased, "the first pop's and d's: the drained ones' claims were released")
}

// A list is used by the queue it was made for, within recentScanTTL, and
// a newer scan's replaces it.
func TestRecentScansExpire(t *testing.T) {
	t.Parallel()
	var r recentScans
	k, qid, now := watermarkKey{key(DefaultTenant, "q"), QueueModeGroup}, uuid.New(), time.Now()
	deep := func(name string) db.PartitionListPopCandidatesRow {
		return db.PartitionListPopCandidatesRow{ID: uuid.New(), Name: name, LastSeq: 500, CursorSeq: 100}
	}
	r.keep(k, qid, []db.PartitionListPopCandidatesRow{deep("a"), deep("b")}, 100, now, now)
	_, ok := r.take(k, uuid.New(), now)
	require.False(t, ok, "another queue of the same name")

	r.keep(k, qid, []db.PartitionListPopCandidatesRow{deep("a"), deep("b")}, 100, now, now)
	_, ok = r.take(k, qid, now.Add(recentScanTTL+time.Millisecond))
	require.False(t, ok, "too old")

	r.keep(k, qid, []db.PartitionListPopCandidatesRow{deep("a"), deep("b")}, 100, now, now)
	r.keep(k, qid, []db.PartitionListPopCandidatesRow{deep("c"), {Name: "no cursor", LastSeq: 500, CursorSeq: -1}}, 100, now, now)
	p, ok := r.take(k, qid, now.Add(recentScanTTL))
	require.True(t, ok)
	require.Equal(t, "c", p.name, "the newer scan's list, without the partition no cursor row is on")
	_, ok = r.take(k, qid, now)
	require.False(t, ok)
}

// Pops that scan at the same time list the same partitions: what one of
// them claimed after another's scan was sent is not kept by the other, and
// a kept partition claimed by a pop that scanned is not given out.
func TestRecentScansPassOverWhatThisBrokerClaimed(t *testing.T) {
	t.Parallel()
	var r recentScans
	k, qid, scanned := watermarkKey{key(DefaultTenant, "q"), QueueModeGroup}, uuid.New(), time.Now()
	a, b, c := db.PartitionListPopCandidatesRow{ID: uuid.New(), Name: "a", LastSeq: 500, CursorSeq: 100},
		db.PartitionListPopCandidatesRow{ID: uuid.New(), Name: "b", LastSeq: 500, CursorSeq: 100},
		db.PartitionListPopCandidatesRow{ID: uuid.New(), Name: "c", LastSeq: 500, CursorSeq: 100}
	r.claiming(a.ID, scanned.Add(-2*time.Millisecond)) // returned before the scan: its listing is newer
	r.claimReturned(a.ID, scanned.Add(-2*time.Millisecond), scanned.Add(-time.Millisecond))
	r.claiming(b.ID, scanned.Add(-time.Millisecond)) // by another pop, returned after the scan was sent
	r.claimReturned(b.ID, scanned.Add(-time.Millisecond), scanned.Add(time.Millisecond))
	now := scanned.Add(2 * time.Millisecond)
	r.keep(k, qid, []db.PartitionListPopCandidatesRow{a, b, c}, 100, scanned, now)
	r.claiming(c.ID, now.Add(time.Millisecond)) // by a pop that scanned, in flight

	p, ok := r.take(k, qid, now.Add(2*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, "a", p.name)
	_, ok = r.take(k, qid, now.Add(2*time.Millisecond))
	require.False(t, ok, "b was not kept, c is passed over")
}

// A pop that scanned tries last the candidates another pop of this broker
// claimed since its scan was sent, in the order it shuffled the others.
func TestScannedCandidatesClaimedMeanwhileGoLast(t *testing.T) {
	t.Parallel()
	var r recentScans
	scanned := time.Now()
	cands := []db.PartitionListPopCandidatesRow{{ID: uuid.New(), Name: "a"}, {ID: uuid.New(), Name: "b"}, {ID: uuid.New(), Name: "c"}, {ID: uuid.New(), Name: "d"}}
	r.claiming(cands[0].ID, scanned.Add(-time.Millisecond))   // in flight when the scan was sent
	r.claiming(cands[2].ID, scanned.Add(-2*time.Millisecond)) // returned before the scan: listed free since
	r.claimReturned(cands[2].ID, scanned.Add(-2*time.Millisecond), scanned.Add(-time.Millisecond))
	r.claimedLast(cands, scanned)
	names := []string{cands[0].Name, cands[1].Name, cands[2].Name, cands[3].Name}
	require.Equal(t, []string{"b", "c", "d", "a"}, names)
}

// What claims are remembered stays bounded without any list kept (pops of
// several partitions each keep none): past claimedSweepAt, a claim forgets
// those older than recentScanTTL.
func TestClaimsRememberedStayBounded(t *testing.T) {
	t.Parallel()
	var r recentScans
	start := time.Now()
	for i := range claimedSweepAt {
		r.claiming(uuid.New(), start.Add(time.Duration(i)*time.Microsecond))
	}
	r.claiming(uuid.New(), start.Add(recentScanTTL+time.Second))
	require.Len(t, r.claimed, 1)
}
