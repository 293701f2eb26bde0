package broker

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// partRef is a partition a pop may claim.
type partRef struct {
	id   uuid.UUID
	name string
}

// claimAutoAck is an autoAck pop's claim of up to maxParts of parts, tried
// in their order, until budget messages are delivered. Where the group's
// cursor row on a partition exists, one statement reads the batch and
// moves the cursor past it (PartitionConsumerAutoAckRead): one commit per
// delivery and no lease, and a partition another consumer of the group is
// popping right now is passed over at once. Where the row does not exist
// yet, the partition is claimed the general way (claim), which creates it
// where the group's subscription starts and finishes the autoAck after.
//
// (Sending all the candidates in one statement that takes the first it
// can was tried: fewer round trips, but PostgreSQL spent more on that
// statement than on the round trips it saved; docs/benchmarks.md.)
//
// The subscription lookup only matters for a new cursor row, which claim
// makes itself; it is made first here too when the pop carries a start
// point of its own (subscriptionMode new, or subscriptionFrom), because the
// group's first such pop stores it even where its cursor rows exist.
func (b *Broker) claimAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, parts []partRef, leaseID string, budget, maxParts int, targeted bool) ([]claimed, error) {
	if len(parts) > 0 && pr.Group != QueueModeGroup && (pr.subscribeNew || pr.subscribeFrom != nil) {
		if _, err := b.subscriptionStart(ctx, pr, q.Name, parts[0].name, targeted); err != nil {
			return nil, err
		}
	}
	var got []claimed
	for _, p := range parts {
		if len(got) >= maxParts || budget <= 0 {
			break
		}
		rows, err := b.q.PartitionConsumerAutoAckRead(ctx, db.PartitionConsumerAutoAckReadParams{
			PartitionID: p.id, ConsumerGroup: pr.Group, DelaySeconds: q.DelayedProcessing, BatchSize: int32(budget),
		})
		if err = pgerr.Translate(err); err != nil {
			return got, fmt.Errorf("autoAck claim of partition %s: %w", p.id, err)
		}
		if len(rows) == 0 || !rows[0].CursorFound {
			c, err := b.claim(ctx, pr, q, p.id, p.name, leaseID, budget, targeted)
			if err != nil {
				return got, err
			}
			if c != nil && len(c.messages) > 0 {
				got = append(got, *c)
				budget -= len(c.messages)
			}
			continue
		}
		if rows[0].Seq == 0 {
			continue
		}
		got = append(got, autoAckClaimed(q, p, rows))
		budget -= len(rows)
	}
	return got, nil
}

// claimOneAutoAck is claimAutoAck of one partition, in claim's shape.
func (b *Broker) claimOneAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, partID uuid.UUID, partName, leaseID string, limit int, targeted bool) (*claimed, error) {
	got, err := b.claimAutoAck(ctx, pr, q, []partRef{{partID, partName}}, leaseID, limit, 1, targeted)
	if err != nil || len(got) == 0 {
		return nil, err
	}
	return &got[0], nil
}

// autoAckClaimed is what PartitionConsumerAutoAckRead delivered from p, in
// the shape the general claim gives.
func autoAckClaimed(q db.QueenQueue, p partRef, rows []db.PartitionConsumerAutoAckReadRow) claimed {
	c := claimed{queue: q, partitionID: p.id, partitionName: p.name, retryCount: int(rows[0].BatchRetryCount)}
	c.messages = make([]db.PartitionConsumerClaimAndReadRow, len(rows))
	for i, r := range rows {
		c.messages[i] = db.PartitionConsumerClaimAndReadRow{
			BatchRetryCount: r.BatchRetryCount, Seq: r.Seq, ID: r.ID, TransactionID: r.TransactionID,
			TraceID: r.TraceID, Payload: r.Payload, IsEncrypted: r.IsEncrypted, ProducerSub: r.ProducerSub,
			CreatedAt: r.CreatedAt,
		}
	}
	return c
}
