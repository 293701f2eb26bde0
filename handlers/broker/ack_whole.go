package broker

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// The common ack is a consumer completing the whole batch its pop gave it,
// under the pop's lease, through the broker that delivered it. For that
// case the outcome of the cursor state machine (cursor.go) is known before
// the cursor row is read: the cursor moves to the batch's last message,
// every message counts as consumed, and the lease ends at the last one. So
// when a flush of acks is made only of such batches, as this broker
// remembers them (delivered.go), one statement checks on the locked rows
// that they are what the memory says, and writes them: one round trip in
// its own implicit transaction, where the general path takes four (BEGIN,
// lock, write, COMMIT). If any row is not as remembered (the lease expired
// or was taken over, part of the batch was acked before, a message was
// deleted, the cursor moved), the statement writes nothing, and the flush
// takes the general path, which sees why.

// wholeBatch is one (partition, group) of a flush that acks a whole
// remembered batch.
type wholeBatch struct {
	batch  *deliveredBatch
	vacant int64
	n      int
	first  int64 // lowest seq
	last   int   // index of the item with the highest seq
	lastID uuid.UUID
	seq    int64 // highest seq
}

// wholeBatches reads the flush as whole remembered batches: every item a
// completed ack with a lease, of a message remembered under that lease,
// and the items of each (partition, group) every message of one batch not
// acked in part before, each once. ok is false otherwise. msgs[i] is what
// is remembered of items[i].
func (d *deliveries) wholeBatches(items []AckItem) (byCursor map[cursorKey]*wholeBatch, msgs []ackedMsg, ok bool) {
	byCursor = make(map[cursorKey]*wholeBatch, 2)
	msgs = make([]ackedMsg, len(items))
	seen := make(map[deliveredKey]struct{}, len(items))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, it := range items {
		if it.Status != AckCompleted || it.LeaseID == "" {
			return nil, nil, false
		}
		k := deliveredKey{tenantUUID(it.tenant), it.PartitionID, it.TransactionID}
		m, found := d.msgs[k]
		if _, dup := seen[k]; !found || dup || m.batch.lease != it.LeaseID || m.batch.left != len(m.batch.keys) {
			return nil, nil, false
		}
		seen[k] = struct{}{}
		msgs[i] = m.msg
		ck := cursorKey{it.PartitionID, it.Group}
		w := byCursor[ck]
		switch {
		case w == nil:
			w = &wholeBatch{batch: m.batch, vacant: m.vacant, first: m.msg.Seq, seq: m.msg.Seq, last: i, lastID: m.msg.ID}
			byCursor[ck] = w
		case w.batch != m.batch || w.vacant != m.vacant:
			return nil, nil, false
		}
		w.n++
		w.first = min(w.first, m.msg.Seq)
		if m.msg.Seq > w.seq {
			w.seq, w.last, w.lastID = m.msg.Seq, i, m.msg.ID
		}
	}
	for _, w := range byCursor {
		if w.n != len(w.batch.keys) {
			return nil, nil, false
		}
	}
	return byCursor, msgs, true
}

// ackWhole applies a flush of whole remembered batches in one statement.
// applied is false when the flush is not made of such batches, or when a
// row was not as remembered: nothing was written then.
func (b *Broker) ackWhole(ctx context.Context, items []AckItem) (res []AckResult, applied bool, err error) {
	byCursor, msgs, ok := b.delivered.wholeBatches(items)
	if !ok {
		return nil, false, nil
	}
	var p db.PartitionConsumerAckWholeBatchesParams
	for ck, w := range byCursor {
		p.PartitionIds = append(p.PartitionIds, ck.partition)
		p.ConsumerGroups = append(p.ConsumerGroups, ck.group)
		p.LeaseIds = append(p.LeaseIds, w.batch.lease)
		p.Counts = append(p.Counts, int32(w.n))
		p.FirstSeqs = append(p.FirstSeqs, w.first)
		p.LastSeqs = append(p.LastSeqs, w.seq)
		p.LastIds = append(p.LastIds, w.lastID)
		p.VacantSeqs = append(p.VacantSeqs, w.vacant)
	}
	rows, err := b.q.PartitionConsumerAckWholeBatches(ctx, p)
	if err != nil {
		return nil, false, fmt.Errorf("ack whole batches: %w", err)
	}
	switch len(rows) {
	case 0:
		return nil, false, nil
	case len(byCursor):
	default:
		// The statement writes every row or none; this is a broken
		// invariant, and what it wrote is committed.
		return nil, false, fmt.Errorf("ack whole batches: %d of %d cursors written", len(rows), len(byCursor))
	}
	res = make([]AckResult, len(items))
	for i, it := range items {
		// As cursor.ack: the lease ends at the batch's last message.
		w := byCursor[cursorKey{it.PartitionID, it.Group}]
		res[i] = AckResult{
			TransactionID: it.TransactionID, Queue: msgs[i].QueueName, Partition: msgs[i].PartitionName,
			LeaseReleased: i == w.last,
		}
	}
	return res, true, nil
}
