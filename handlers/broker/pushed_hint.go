package broker

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// A push committed here wakes one parked autoAck pop of each key per
// partition it filled (wake_pushed.go). Such a pop used to scan the queue
// for candidates (PartitionListPopCandidates) and claim one, though the
// push knew which partition it had just filled for it. Now the wake-up
// carries that partition, and the woken pop claims it directly (the autoAck
// read of a known partition, claimAutoAck): one statement per delivery
// instead of two. Only when that claim comes back empty or busy (another
// pop took the messages first, or is taking them now) does the pop scan, as
// every woken pop did before: a wake-up is never answered by less than a
// look.
//
// What the hint does not cover stays covered as before:
//
//   - a pop that takes a full batch from its partition without reaching
//     the last message the push stored there hands the partition on to a
//     parked pop, which claims it in turn (handOn); so does a woken pop
//     that ends without looking (timeout, client gone, or answered by a
//     look already under way), unless that answer delivered the last
//     message the push stored there. A pop not looking gets it first, one
//     looking when no other takes it (it claims it after its look). A
//     scan's pop that leaves candidates (untried, or one taken short of
//     the last seq the scan saw there) hands them on the same way, unless
//     the scan stopped at its limit. With no parked pop to take it, the
//     hand-on is a wake-up for anything, as before;
//   - a push that filled more partitions than it found pops to wake is not
//     excused (known_empty.go): the next long-poll of the key looks. The
//     pops it could not wake were all woken already; a hinted one answers
//     from its partition, and its consumer's next long-poll looks;
//   - a hinted pop is not counted as due (due_looks.go): it may not scan,
//     so no hand-on waits for it. A wake-up for anything that reaches it
//     before it looks (the mesh, NOTIFY, a hand-on, the re-poll) drops its
//     hint: it scans and counts as due again;
//   - pops that cannot use a hint (several partitions, a named partition)
//     take the wake-up as a wake-up for anything, and scan.

// pushedPart is a partition a push filled, offered to the pop it wakes:
// the partition, its queue's id, and the last message the push stored
// there. With listed, it is instead what a scan's pop left of the
// candidates the scan saw (untried ones, and one taken short of the last
// seq the scan saw there), offered to the pop a hand-on wakes (handOn),
// which claims them as the scanning pop would have: the generation need
// not move, and the next long-poll of the key need not look. The zero
// value offers nothing.
type pushedPart struct {
	queueID uuid.UUID
	id      uuid.UUID
	name    string
	last    uuid.UUID
	listed  []partRef
}

// pushedHintable reports whether an autoAck claim of a partition of q can
// answer a pop without the scan: the scan also passes over partitions
// whose window buffer is open, which the claim does not check, and with a
// delay the pushed messages are not claimable yet.
func pushedHintable(q db.QueenQueue) bool {
	return q.WindowBuffer == 0 && q.DelayedProcessing == 0
}

// takesHint reports whether a pop can answer a wake-up from the partition
// it offers: a queue-wide autoAck pop of one partition.
func (pr popPlan) takesHint() bool {
	return pr.AutoAck && pr.Queue != "" && pr.Partition == "" && pr.MaxPartitions == 1
}

// hintStats counts the pops that claimed the partition their wake-up
// offered, and every pop's scans, for tests and docs.
type hintStats struct {
	answered atomic.Int64 // the claim delivered: no scan
	fellBack atomic.Int64 // empty or busy: the pop scanned
	scans    atomic.Int64 // PartitionListPopCandidates calls (claimAny)
	handedOn atomic.Int64 // offered partitions handed on to a parked pop (handOn)
}

// claimPushed is a woken pop's claim of the partition its wake-up offered,
// in claimAutoAck's shape. Nothing claimed (nil, nil) means the pop must
// look as any woken pop does. It does not record the key empty even when
// it takes all there is: it saw one partition, not the queue.
func (b *Broker) claimPushed(ctx context.Context, pr popPlan, q db.QueenQueue, leaseID string) ([]claimed, error) {
	h := pr.hint
	if h.queueID != q.ID || !pushedHintable(q) {
		return nil, nil // the queue was replaced or reconfigured since the push
	}
	pr.started = emptyState{}
	parts := h.listed
	if parts == nil {
		parts = []partRef{{id: h.id, name: h.name, pushed: h.last}}
	}
	got, err := b.claimAutoAck(ctx, pr, q, parts, leaseID, pr.Batch, 1, false)
	if err == nil {
		if len(got) > 0 {
			b.hinted.answered.Add(1)
		} else {
			b.hinted.fellBack.Add(1)
		}
	}
	return got, err
}

// delivered reports whether r delivered the message id; a nil r
// delivered nothing.
func (r *PopResult) delivered(id uuid.UUID) bool {
	return r != nil && slices.ContainsFunc(r.Messages, func(m Message) bool { return m.ID == id })
}

// deliveredID reports whether c delivered the message id.
func deliveredID(c *claimed, id uuid.UUID) bool {
	return slices.ContainsFunc(c.messages, func(m db.PartitionConsumerClaimAndReadRow) bool { return m.ID == id }) ||
		slices.ContainsFunc(c.autoAcked, func(m db.PartitionConsumerAutoAckReadRow) bool { return m.ID == id })
}
