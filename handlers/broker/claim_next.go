package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// claimNextTries is how many times a pop tries the one-statement claim when
// candidates were there but each was taken by a concurrent claim first: the
// next statement's snapshot no longer lists the partitions they leased.
const claimNextTries = 3

// claimsNext reports whether a wildcard pop of q that has claimed got
// partitions so far claims its next one with claimNext: queue mode without
// autoAck, one partition to go, no delayed processing. A named group's new
// cursor starts where its subscription says, which depends on the partition
// (subscriptionStart), so its claim needs the partition first; autoAck pops
// have their own path (autoack.go); a pop of several partitions tries the
// scan's candidates one by one, and so does a pop of a queue with delayed
// processing, where a candidate's messages may all be too young and the
// next candidate must be tried.
func (pr popPlan) claimsNext(q db.QueenQueue, got int) bool {
	return !pr.AutoAck && pr.Group == QueueModeGroup && pr.MaxPartitions-got == 1 && q.DelayedProcessing == 0
}

// scanFrom is where a pop's scan of a queue starts, as claimAny works it
// out (watermark.go, push_floor.go).
type scanFrom struct {
	queue QueueKey
	due   bool // the watermark is due to be advanced
	hint  popHint
	floor pgtype.Timestamptz
}

// claimNext is the scan of claimAny and the claim of one of its candidates
// in one round trip (PartitionConsumerClaimNextAndRead) instead of two. nil:
// nothing claimed.
func (b *Broker) claimNext(ctx context.Context, pr popPlan, q db.QueenQueue, from scanFrom, leaseID string, limit int) (*claimed, error) {
	leaseSeconds := q.LeaseTime
	if leaseSeconds <= 0 {
		leaseSeconds = defaultLeaseSeconds
	}
	hint := from.hint
	for try := 0; try < claimNextTries; try++ {
		rows, err := b.q.PartitionConsumerClaimNextAndRead(ctx, db.PartitionConsumerClaimNextAndReadParams{
			QueueID: q.ID, ConsumerGroup: pr.Group, WindowSeconds: q.WindowBuffer,
			MaxCandidates: int32(pr.MaxPartitions*2 + 8), HintFrom: hint.from, HintAt: hint.at,
			LeaseID: &leaseID, LeaseSeconds: leaseSeconds, BatchSize: int32(limit), DelaySeconds: q.DelayedProcessing,
		})
		if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrForeignKey) {
			// The partition was deleted (queue clear or delete) since the
			// statement's snapshot: nothing in it to claim any more.
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("claim a partition of %q: %w", q.Name, err)
		}
		first := rows[0]
		if first.Candidates > 0 {
			b.setStartHint(from.queue, q, pr.Group, hintFrom(first.OldestPending, first.ScannedAt, from.floor))
		}
		// As claimAny: after an empty scan, and every few seconds under load.
		if first.Candidates == 0 || (from.due && try == 0) {
			h, err := b.advanceWatermark(ctx, q, pr.Group, hint, from.floor)
			if err != nil {
				return nil, err
			}
			b.setStartHint(from.queue, q, pr.Group, h)
		}
		if first.Candidates == 0 {
			return nil, nil
		}
		if !first.Claimed {
			hint = b.startHint(from.queue, q, pr.Group, false)
			continue
		}
		c := &claimed{queue: q, partitionID: first.PartitionID, partitionName: first.PartitionName, retryCount: int(first.BatchRetryCount)}
		if first.Seq > 0 {
			c.messages = make([]db.PartitionConsumerClaimAndReadRow, len(rows))
			for i, r := range rows {
				c.messages[i] = db.PartitionConsumerClaimAndReadRow{
					BatchRetryCount: r.BatchRetryCount, Seq: r.Seq, ID: r.ID, TransactionID: r.TransactionID,
					TraceID: r.TraceID, Payload: r.Payload, IsEncrypted: r.IsEncrypted, ProducerSub: r.ProducerSub,
					CreatedAt: r.CreatedAt, VacantSeqs: r.VacantSeqs,
				}
			}
		}
		c, err = b.finishClaim(ctx, pr, c, leaseID, limit)
		if err != nil {
			return nil, err
		}
		if len(c.messages) > 0 {
			return c, nil
		}
		// Released: what the scan saw past the cursor is gone (deleted
		// since). Another candidate may hold something.
		hint = b.startHint(from.queue, q, pr.Group, false)
	}
	return nil, nil
}
