package broker

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// setLastMessageAt moves a partition's newest-message time, as if its last
// push had started then.
func (tb *testBundle) setLastMessageAt(queue, partition string, at time.Time) {
	tb.t.Helper()
	_, err := tb.pool.Exec(tb.t.Context(), `UPDATE queen.partitions p SET last_message_at = $3
		FROM queen.queues q WHERE q.id = p.queue_id AND q.name = $1 AND p.name = $2`, queue, partition, at)
	require.NoError(tb.t, err)
}

func (tb *testBundle) hint(queue, group string) popHint {
	tb.t.Helper()
	h, ok := tb.b.popHints.Load(watermarkKey{key(DefaultTenant, queue), group})
	require.True(tb.t, ok, "no start hint for %s/%s", queue, group)
	return h.(popHint)
}

func (tb *testBundle) popOne(queue, group string) *PopResult {
	tb.t.Helper()
	return tb.pop(PopRequest{Tenant: DefaultTenant, Queue: queue, Group: group, Batch: 1})
}

func (tb *testBundle) ackOne(p *PopResult, status AckStatus, group string) {
	tb.t.Helper()
	res, err := tb.b.Ack(tb.t.Context(), DefaultTenant, []AckItem{ackOf(p.Messages[0].TransactionID, p, status, group)})
	require.NoError(tb.t, err)
	require.NoError(tb.t, res[0].Refused)
}

// The start hint climbs over consumed partitions, never over a leased one,
// never within watermarkMargin of the clock, and a seek or a group deletion
// voids it.
func TestPopStartHint(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const q, g = "hint", "g"
	tb.push(item(q, "a", "a1", ""), item(q, "b", "b1", ""), item(q, "c", "c1", ""), item(q, "d", "d1", ""))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i, p := range []string{"a", "b", "c", "d"} {
		tb.setLastMessageAt(q, p, base.Add(time.Duration(i)*time.Minute))
	}

	// a consumed, b held under a lease, c consumed (pops of the partition:
	// no scan yet).
	at := func(part string) *PopResult {
		return tb.pop(PopRequest{Tenant: DefaultTenant, Queue: q, Partition: part, Group: g, Batch: 1})
	}
	tb.ackOne(at("a"), AckCompleted, g)
	pb := at("b")
	require.NotNil(t, pb)
	tb.ackOne(at("c"), AckCompleted, g)

	// The next scan starts at b, the oldest partition still pending,
	// though it is leased and the scan's first candidate is d.
	pd := tb.popOne(q, g)
	require.Equal(t, "d", pd.Partition)
	require.True(t, tb.hint(q, g).from.Time.Equal(base.Add(time.Minute)), "hint %v, b at %v", tb.hint(q, g).from.Time, base.Add(time.Minute))
	tb.ackOne(pd, AckCompleted, g)

	// b's lease released: it is found again.
	tb.ackOne(pb, AckRetry, g)
	again := tb.popOne(q, g)
	require.NotNil(t, again)
	require.Equal(t, "b", again.Partition)
	tb.ackOne(again, AckCompleted, g)

	// All consumed, nothing in flight: the hint moves up to the push floor,
	// above every partition and above the clock less the margin.
	require.Nil(t, tb.popOne(q, g))
	h := tb.hint(q, g)
	require.True(t, h.from.Time.After(base.Add(3*time.Minute)), "hint %v stayed below the consumed partitions", h.from.Time)
	require.True(t, h.from.Time.After(h.at.Time.Add(-watermarkMargin)), "hint %v not above the margin of %v", h.from.Time, h.at.Time)

	// A push stamped below the hint, as no commit can be (the late commits
	// are TestPopStartHintLateCommit's): the next scan from the stored
	// watermark finds it.
	tb.push(item(q, "e", "e1", ""))
	tb.setLastMessageAt(q, "e", time.Now().Add(-watermarkMargin/2))
	tb.b.fullScanAt.Store(watermarkKey{key(DefaultTenant, q), g}, time.Now()) // none due
	require.Nil(t, tb.popOne(q, g))
	tb.b.fullScanAt.Delete(watermarkKey{key(DefaultTenant, q), g})
	pe := tb.popOne(q, g)
	require.NotNil(t, pe)
	require.Equal(t, "e", pe.Partition)
	tb.ackOne(pe, AckCompleted, g)
	require.Nil(t, tb.popOne(q, g))

	// A seek back makes a, b, c and d pending again below the hint.
	from := base.Add(-time.Minute)
	_, err := tb.b.SeekQueue(t.Context(), DefaultTenant, g, q, &from)
	require.NoError(t, err)
	got := tb.pop(PopRequest{Tenant: DefaultTenant, Queue: q, Group: g, Batch: 10, MaxPartitions: 10, AutoAck: true})
	require.NotNil(t, got)
	require.Equal(t, 5, len(got.Messages))
	require.Nil(t, tb.popOne(q, g))

	// So does deleting the group's cursors.
	_, err = tb.b.DeleteConsumerGroup(t.Context(), DefaultTenant, g, "", false)
	require.NoError(t, err)
	got = tb.pop(PopRequest{Tenant: DefaultTenant, Queue: q, Group: g, Batch: 10, MaxPartitions: 10, AutoAck: true, SubscriptionMode: "all"})
	require.NotNil(t, got)
	require.Equal(t, 5, len(got.Messages))
}

// A push whose transaction started before the hint climbed and commits after
// it, stamped with that start, is found by the next scan: the push floor
// holds the hint at the start of the oldest open transaction. With the hint
// bounded by the scans alone (or by a floor that ignored open transactions)
// the scan would start above the push and skip it until a full scan.
func TestPopStartHintLateCommit(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	const q, g = "late", "g"
	tb.push(item(q, "a", "a1", ""))
	tb.ackOne(tb.popOne(q, g), AckCompleted, g)

	// A transaction that will push later opens now.
	tx, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var started time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&started))

	// Pushes after it are consumed, and the floor is read again well after
	// its start (beyond the slack): a floor blind to open transactions would
	// now let the hint pass it.
	tb.push(item(q, "b", "b1", ""))
	tb.ackOne(tb.popOne(q, g), AckCompleted, g)
	require.Eventually(t, func() bool {
		require.Nil(t, tb.popOne(q, g))
		cur := tb.b.floor.cur.Load()
		return cur != nil && cur.readAt.After(time.Now().Add(-pushFloorEvery)) &&
			time.Since(started) > 3*pushFloorSlack
	}, 10*time.Second, 20*time.Millisecond)
	h := tb.hint(q, g)
	require.False(t, h.from.Time.After(started), "hint %v above the open transaction's start %v", h.from.Time, started)

	// The transaction pushes as queen.push_messages does, stamping its
	// start, and commits.
	var queueID uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = $1`, q).Scan(&queueID))
	var partID uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO queen.partitions (queue_id, name, last_seq, last_message_at)
		VALUES ($1, 'c', 1, now()) RETURNING id`, queueID).Scan(&partID))
	_, err = tx.Exec(ctx, `INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload)
		VALUES ($1, $2, 1, 'c1', 'null')`, uuid.Must(uuid.NewV7()), partID)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// Found by the next scan from the hint, not by a scan from the stored
	// watermark: none is due.
	tb.b.fullScanAt.Store(watermarkKey{key(DefaultTenant, q), g}, time.Now())
	pc := tb.popOne(q, g)
	require.NotNil(t, pc, "the late commit was skipped")
	require.Equal(t, "c", pc.Partition)
	tb.ackOne(pc, AckCompleted, g)

	// Nothing open any more: the hint climbs above it and close to the clock.
	require.Eventually(t, func() bool {
		require.Nil(t, tb.popOne(q, g))
		h := tb.hint(q, g)
		return h.from.Time.After(started) && h.from.Time.After(h.at.Time.Add(-watermarkMargin))
	}, 10*time.Second, 20*time.Millisecond)
}
