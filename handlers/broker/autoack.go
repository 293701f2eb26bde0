package broker

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// claimAutoAck is an autoAck pop's claim of one partition whose cursor row
// exists: one statement reads the batch and moves the cursor past it
// (PartitionConsumerAutoAckRead), one commit instead of a lease write and
// a cursor write, and no lease at all. found is false when the group has
// no cursor row on the partition yet; the caller then claims the general
// way, which creates the row where the group's subscription starts. A nil
// claim with found true means nothing to deliver: another pop of the
// group holds the row or a lease, or nothing is past the cursor.
//
// The subscription lookup is only needed for a new cursor row: where one
// exists its start point no longer matters. It is still made first when
// the pop carries a start point of its own (subscriptionMode new, or
// subscriptionFrom), because the first such pop stores it for the group.
func (b *Broker) claimAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, partID uuid.UUID, partName string, limit int, targeted bool) (c *claimed, found bool, err error) {
	if pr.Group != QueueModeGroup && (pr.subscribeNew || pr.subscribeFrom != nil) {
		if _, err := b.subscriptionStart(ctx, pr, q.Name, partName, targeted); err != nil {
			return nil, true, err
		}
	}
	rows, err := b.q.PartitionConsumerAutoAckRead(ctx, db.PartitionConsumerAutoAckReadParams{
		PartitionID:   partID,
		ConsumerGroup: pr.Group,
		DelaySeconds:  q.DelayedProcessing,
		BatchSize:     int32(limit),
	})
	if err = pgerr.Translate(err); err != nil {
		return nil, true, fmt.Errorf("autoAck read of partition %s: %w", partID, err)
	}
	if len(rows) == 0 || !rows[0].CursorFound {
		return nil, false, nil
	}
	if rows[0].Seq == 0 {
		return nil, true, nil
	}
	c = &claimed{queue: q, partitionID: partID, partitionName: partName, retryCount: int(rows[0].BatchRetryCount)}
	c.messages = make([]db.PartitionConsumerClaimAndReadRow, len(rows))
	for i, r := range rows {
		c.messages[i] = db.PartitionConsumerClaimAndReadRow{
			BatchRetryCount: r.BatchRetryCount, Seq: r.Seq, ID: r.ID, TransactionID: r.TransactionID,
			TraceID: r.TraceID, Payload: r.Payload, IsEncrypted: r.IsEncrypted, ProducerSub: r.ProducerSub,
			CreatedAt: r.CreatedAt,
		}
	}
	return c, true, nil
}
