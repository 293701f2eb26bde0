package broker

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// The cursor state machine. A (partition, consumer group) cursor row holds
// the group's position (last_seq), its lease and the counts of the batch the
// lease covers. Acks, transactions and stream cycles all move it through
// these methods, inside their transaction, between lockCursors and
// writeCursors; the dashboard's "move to DLQ" passes the head through
// passHead. Nothing else writes a cursor, except the claim that takes the
// lease (claim.go) and the seeks of consumer_group.go.

// cursorKey identifies a cursor row.
type cursorKey struct {
	partition uuid.UUID
	group     string
}

// cursor is a locked cursor row being moved by one transaction.
type cursor struct {
	row        db.PartitionConsumerLockManyRow
	lastSeq    int64
	lastID     uuid.UUID
	consumed   int64
	batches    int64
	acked      int32
	retries    int32
	leaseHeld  bool
	release    bool
	blockedSeq int64 // > 0: a failed ack at this seq; later seqs wait for redelivery
	touched    bool
}

// ackMode selects the retry rules: transactions dead-letter failed acks at
// once, as the reference broker does.
type ackMode int

const (
	ackNormal ackMode = iota
	ackTransactional
)

// lockCursors locks the cursor rows of keys (in key order, so concurrent
// transactions cannot deadlock) and returns them by key. A key without a row
// is absent: the group never claimed that partition.
func lockCursors(ctx context.Context, q *db.Queries, keys []cursorKey) (map[cursorKey]*cursor, error) {
	var lock db.PartitionConsumerLockManyParams
	for _, k := range keys {
		lock.PartitionIds = append(lock.PartitionIds, k.partition)
		lock.ConsumerGroups = append(lock.ConsumerGroups, k.group)
	}
	rows, err := q.PartitionConsumerLockMany(ctx, lock)
	if err != nil {
		return nil, fmt.Errorf("lock cursors: %w", err)
	}
	out := make(map[cursorKey]*cursor, len(rows))
	for _, r := range rows {
		out[cursorKey{r.PartitionID, r.ConsumerGroup}] = &cursor{
			row: r, lastSeq: r.LastSeq, acked: r.AckedCount, retries: r.BatchRetryCount,
			leaseHeld: r.LeaseID != nil && r.LeaseActive,
		}
	}
	return out, nil
}

// checkLease refuses a lease that is not the group's live lease; "" skips
// the check. Validity is judged on the row as locked, before the batch.
func (c *cursor) checkLease(leaseID string) error {
	if leaseID != "" && (c.row.LeaseID == nil || *c.row.LeaseID != leaseID || !c.row.LeaseActive) {
		return ErrLeaseLost
	}
	return nil
}

// passed reports whether the cursor, as locked, is at or past seq.
func (c *cursor) passed(seq int64) bool { return seq <= c.row.LastSeq }

// ackStep is what one acknowledgement did to a cursor.
type ackStep struct {
	released    bool
	deadLetter  bool  // the message goes to the dead-letter queue
	deadRetries int32 // the retries it had, stored with the dead letter
	refused     error // ErrBlocked
}

// ack applies one acknowledgement of message m (seq, id) with status.
// Within a batch, acks must come per cursor in seq order (applyAcks sorts
// them), so that a failed ack is never skipped by a later completed one.
func (c *cursor) ack(seq int64, id uuid.UUID, status AckStatus, mode ackMode) ackStep {
	if c.blockedSeq > 0 && seq > c.blockedSeq && status != AckRetry {
		return ackStep{refused: ErrBlocked}
	}
	c.touched = true
	if status == AckFailed && mode == ackNormal && c.retries < c.row.RetryLimit {
		// Redeliver from the unchanged cursor.
		c.retries++
		c.release = true
		c.blockedSeq = seq
		return ackStep{released: true}
	}
	var step ackStep
	switch status {
	case AckRetry:
		c.release = true
		return ackStep{released: true}
	case AckFailed, AckDLQ:
		step.deadLetter, step.deadRetries = true, c.retries
		// The next message starts with a fresh retry budget (the
		// reference forgets this and dead-letters it early).
		c.retries = 0
	}
	// completed, or dead-lettered: the cursor passes the message, never
	// moving backwards.
	if seq > c.lastSeq {
		c.lastSeq, c.lastID = seq, id
		c.consumed++
	}
	c.acked++
	if c.leaseHeld && c.row.BatchSize > 0 && c.acked >= c.row.BatchSize {
		c.release = true
		c.retries = 0
		c.batches++
	}
	step.released = c.release || !c.leaseHeld
	return step
}

// passTo moves the cursor to message (seq, id), passing everything before
// it: a stream cycle's unit is the popped batch (or a gate's allowed head),
// count messages. release ends the lease and the batch.
func (c *cursor) passTo(seq int64, id uuid.UUID, count int, release bool) {
	c.touched = true
	c.lastSeq, c.lastID = seq, id
	c.consumed += int64(count)
	c.acked = c.row.AckedCount + int32(count)
	c.retries = c.row.BatchRetryCount
	if release {
		c.release = true
		c.batches, c.acked, c.retries = 1, 0, 0
	}
}

// writeCursors writes the cursors a transaction moved, one statement.
func writeCursors(ctx context.Context, q *db.Queries, cursors map[cursorKey]*cursor) error {
	var apply db.PartitionConsumerApplyManyParams
	for _, c := range cursors {
		if !c.touched {
			continue
		}
		apply.PartitionIds = append(apply.PartitionIds, c.row.PartitionID)
		apply.ConsumerGroups = append(apply.ConsumerGroups, c.row.ConsumerGroup)
		apply.LastSeqs = append(apply.LastSeqs, c.lastSeq)
		apply.LastIds = append(apply.LastIds, c.lastID)
		apply.Consumed = append(apply.Consumed, c.consumed)
		apply.Batches = append(apply.Batches, c.batches)
		apply.AckedCounts = append(apply.AckedCounts, c.acked)
		apply.RetryCounts = append(apply.RetryCounts, c.retries)
		apply.Releases = append(apply.Releases, c.release)
	}
	if len(apply.PartitionIds) == 0 {
		return nil
	}
	if err := q.PartitionConsumerApplyMany(ctx, apply); err != nil {
		return fmt.Errorf("move cursors: %w", err)
	}
	return nil
}

// passHead moves a group's cursor over one message, only when it is the
// group's next message and the group holds no live lease on the partition
// (the operator's "move to DLQ"; a group without a cursor gets one). It
// reports whether it moved.
func passHead(ctx context.Context, q *db.Queries, partition uuid.UUID, group string, seq int64, id uuid.UUID) (bool, error) {
	n, err := q.PartitionConsumerPassHead(ctx, db.PartitionConsumerPassHeadParams{
		PartitionID: partition, ConsumerGroup: group, Seq: seq, MessageID: &id,
	})
	if err != nil {
		return false, fmt.Errorf("pass the head of %s for %q: %w", partition, group, err)
	}
	return n > 0, nil
}
