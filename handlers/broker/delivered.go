package broker

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// deliveries remembers what this broker's pops delivered under a lease, so
// that the ack of a popped batch need not read its messages back
// (MessageListAckWindow was PostgreSQL's second largest statement of a
// pop + ack cycle, docs/benchmarks.md). What an ack needs of a message, its
// seq, id and creation time and its queue's and partition's names, never
// changes while the message exists; whether it still exists is told by the
// partition's vacant_seqs, the count of its deleted messages that every
// delete moves in the statement that deletes (migration 0008): the claim
// read it in the snapshot it read the batch in, and the ack's cursor lock
// reads it again (applyAcks). When the two differ, or the ack meets a
// message this broker does not remember (another broker popped it, this one
// restarted, or forgot), the ack reads the messages as before (findAcked).
//
// Memory is bounded: a batch is forgotten when its lease has expired, when
// it is acked, and, oldest first, when more than deliveriesMax messages are
// held.
type deliveries struct {
	mu      sync.Mutex
	msgs    map[deliveredKey]deliveredMsg
	batches []*deliveredBatch // in the order remembered
	held    int               // keys over batches
	max     int
}

// deliveriesMax is the most messages remembered at once: 8 consumers of
// batch 100 hold 800; about 200 bytes each.
const deliveriesMax = 1 << 15

// deliveredKey names a delivered message as an ack does. The tenant is the
// one that popped it: another tenant's ack of the same ids does not find it.
type deliveredKey struct {
	tenant uuid.UUID
	pid    uuid.UUID
	txID   string
}

// deliveredMsg is what an ack needs of a delivered message.
type deliveredMsg struct {
	msg    ackedMsg
	vacant int64           // the partition's vacant_seqs when the pop read it
	batch  *deliveredBatch // the batch that remembered it
}

type deliveredBatch struct {
	until time.Time // the lease's end, after which the batch is forgotten
	keys  []deliveredKey
	left  int    // keys not acked yet
	lease string // the lease the batch was claimed under
}

func newDeliveries(max int) *deliveries {
	return &deliveries{msgs: make(map[deliveredKey]deliveredMsg), max: max}
}

// remember records what a pop of tenant delivered: each claimed batch is
// kept until its queue's lease time has passed.
func (d *deliveries) remember(tenant uuid.UUID, got []claimed, now time.Time) {
	n := 0
	for _, c := range got {
		n += len(c.messages)
	}
	if n == 0 || n > d.max {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked(now, n)
	for _, c := range got {
		if len(c.messages) == 0 {
			continue
		}
		lease := c.queue.LeaseTime
		if lease <= 0 {
			lease = defaultLeaseSeconds
		}
		b := &deliveredBatch{
			until: now.Add(time.Duration(lease) * time.Second), keys: make([]deliveredKey, len(c.messages)),
			left: len(c.messages), lease: c.lease,
		}
		for i, m := range c.messages {
			k := deliveredKey{tenant, c.partitionID, m.TransactionID}
			b.keys[i] = k
			d.msgs[k] = deliveredMsg{
				msg: ackedMsg{
					TenantID: tenant, ID: m.ID, PartitionID: c.partitionID, TransactionID: m.TransactionID,
					Seq: m.Seq, CreatedAt: m.CreatedAt, PartitionName: c.partitionName, QueueName: c.queue.Name,
				},
				vacant: m.VacantSeqs, batch: b,
			}
		}
		d.batches = append(d.batches, b)
		d.held += len(b.keys)
	}
}

// sweepLocked forgets, from the oldest, the batches that were acked in
// full or whose lease ended, and the oldest ones while room is short for n
// more messages.
func (d *deliveries) sweepLocked(now time.Time, n int) {
	drop := 0
	for drop < len(d.batches) {
		b := d.batches[drop]
		if b.left > 0 && d.held+n <= d.max && !now.After(b.until) {
			break
		}
		for _, k := range b.keys {
			if m, ok := d.msgs[k]; ok && m.batch == b {
				delete(d.msgs, k)
			}
		}
		d.held -= len(b.keys)
		d.batches[drop] = nil
		drop++
	}
	if drop > 0 {
		d.batches = d.batches[drop:]
	}
}

// lookup returns what is remembered of a message.
func (d *deliveries) lookup(k deliveredKey) (deliveredMsg, bool) {
	d.mu.Lock()
	m, ok := d.msgs[k]
	d.mu.Unlock()
	return m, ok
}

// forget drops acked messages; a batch whose every message was acked goes
// at the next sweep.
func (d *deliveries) forget(items []AckItem) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range items {
		k := deliveredKey{tenantUUID(it.tenant), it.PartitionID, it.TransactionID}
		if m, ok := d.msgs[k]; ok {
			m.batch.left--
			delete(d.msgs, k)
		}
	}
}
