package broker

import (
	"context"
	"fmt"
	"slices"

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
// in their order, until budget messages are delivered. Each round trip is
// one statement that takes the first partition it can among those left,
// reads its batch and moves the group's cursor past it
// (PartitionConsumerAutoAckRead): one commit per delivery and no lease,
// and partitions other consumers of the group are popping right now are
// passed over in the database instead of costing a round trip each. A
// partition where the group has no cursor row yet is claimed the general
// way (claim), which creates the row where the group's subscription
// starts and finishes the autoAck after.
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
	ids := make([]uuid.UUID, 0, len(parts))
	for len(parts) > 0 && len(got) < maxParts && budget > 0 {
		ids = ids[:0]
		for _, p := range parts {
			ids = append(ids, p.id)
		}
		rows, err := b.q.PartitionConsumerAutoAckRead(ctx, db.PartitionConsumerAutoAckReadParams{
			ConsumerGroup: pr.Group, PartitionIds: ids, DelaySeconds: q.DelayedProcessing, BatchSize: int32(budget),
		})
		if err = pgerr.Translate(err); err != nil {
			return got, fmt.Errorf("autoAck claim on %q: %w", q.Name, err)
		}
		if len(rows) == 0 {
			return got, nil // cannot happen: the statement answers one row at least
		}
		if first := rows[0]; first.Seq > 0 && first.PartitionID != nil {
			i := slices.IndexFunc(parts, func(p partRef) bool { return p.id == *first.PartitionID })
			if i < 0 {
				return got, fmt.Errorf("autoAck claim on %q: delivered from partition %s, not a candidate", q.Name, *first.PartitionID)
			}
			got = append(got, autoAckClaimed(q, parts[i], rows))
			budget -= len(rows)
			parts = parts[i+1:]
			continue
		}
		i := slices.IndexFunc(parts, func(p partRef) bool { return p.id == rows[0].FirstMissing })
		if rows[0].FirstMissing == uuid.Nil || i < 0 {
			return got, nil
		}
		c, err := b.claim(ctx, pr, q, parts[i].id, parts[i].name, leaseID, budget, targeted)
		if err != nil {
			return got, err
		}
		if c != nil && len(c.messages) > 0 {
			got = append(got, *c)
			budget -= len(c.messages)
		}
		parts = parts[i+1:]
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
