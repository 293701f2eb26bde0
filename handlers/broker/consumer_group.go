package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// DeleteConsumerGroup removes a group's cursors, on every queue of the
// tenant or on one ("" for all), and with withMeta its subscription start
// points. It
// returns the number of cursors deleted. The group's next wildcard pops scan
// every partition again (watermarks reset after the commit).
func (b *Broker) DeleteConsumerGroup(ctx context.Context, tenant, group, queue string, withMeta bool) (int64, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return 0, err
	}
	var n int64
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		qtx := b.q.WithTx(tx)
		var err error
		if queue == "" {
			n, err = qtx.PartitionConsumerDeleteByGroup(ctx, db.PartitionConsumerDeleteByGroupParams{ConsumerGroup: group, TenantID: tid})
		} else {
			n, err = qtx.PartitionConsumerDeleteByGroupAndQueue(ctx, db.PartitionConsumerDeleteByGroupAndQueueParams{
				ConsumerGroup: group, TenantID: tid, QueueName: queue,
			})
		}
		if err != nil || !withMeta {
			return err
		}
		if queue == "" {
			_, err = qtx.SubscriptionDeleteByGroup(ctx, db.SubscriptionDeleteByGroupParams{TenantID: tid, ConsumerGroup: group})
		} else {
			_, err = qtx.SubscriptionDeleteByGroupAndQueue(ctx, db.SubscriptionDeleteByGroupAndQueueParams{
				TenantID: tid, ConsumerGroup: group, QueueName: queue,
			})
		}
		return err
	})
	if err != nil {
		return 0, pgerr.Translate(fmt.Errorf("delete consumer group %q: %w", group, err))
	}
	if queue == "" {
		err = b.q.ConsumerWatermarkResetGroup(ctx, db.ConsumerWatermarkResetGroupParams{ConsumerGroup: group, TenantID: tid})
	} else {
		err = b.resetWatermark(ctx, tid, group, queue)
	}
	if err != nil {
		return 0, pgerr.Translate(fmt.Errorf("reset watermarks of %q: %w", group, err))
	}
	return n, nil
}

// SetSubscriptionStart moves the stored start points of a group in the
// tenant: where it starts on partitions it has not read yet. It returns the
// rows updated.
func (b *Broker) SetSubscriptionStart(ctx context.Context, tenant, group string, at time.Time) (int64, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return 0, err
	}
	n, err := b.q.SubscriptionUpdateTimestamp(ctx, db.SubscriptionUpdateTimestampParams{
		SubscriptionTimestamp: pgtype.Timestamptz{Time: at, Valid: true}, TenantID: tid, ConsumerGroup: group,
	})
	if err != nil {
		return 0, pgerr.Translate(fmt.Errorf("update subscription of %q: %w", group, err))
	}
	if err := b.q.ConsumerWatermarkResetGroup(ctx, db.ConsumerWatermarkResetGroupParams{ConsumerGroup: group, TenantID: tid}); err != nil {
		return 0, pgerr.Translate(fmt.Errorf("reset watermarks of %q: %w", group, err))
	}
	return n, nil
}

// SeekQueue moves a group's cursor on every partition of a queue: past every
// stored message (at nil), or to the last message created at or before at.
// ErrQueueNotFound when the queue does not exist. It returns the cursors
// moved.
func (b *Broker) SeekQueue(ctx context.Context, tenant, group, queue string, at *time.Time) (int64, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return 0, err
	}
	k := key(tenant, queue)
	if _, ok, err := b.lookupQueue(ctx, k); err != nil || !ok {
		if err != nil {
			return 0, pgerr.Translate(err)
		}
		return 0, ErrQueueNotFound
	}
	tid := tenantUUID(tenant)
	params := db.PartitionConsumerSeekQueueParams{ConsumerGroup: group, ToEnd: at == nil, TenantID: tid, QueueName: queue}
	if at != nil {
		params.TargetTime = pgtype.Timestamptz{Time: *at, Valid: true}
	}
	n, err := b.q.PartitionConsumerSeekQueue(ctx, params)
	if err != nil {
		return 0, pgerr.Translate(fmt.Errorf("seek %q on %q: %w", group, queue, err))
	}
	if err := b.resetWatermark(ctx, tid, group, queue); err != nil {
		return 0, pgerr.Translate(err)
	}
	b.notify.QueuesReady([]QueueKey{k})
	return n, nil
}

// SoughtPartition is the outcome of SeekPartitionToEnd.
type SoughtPartition struct {
	Updated bool       // a cursor moved over stored messages
	MovedTo *time.Time // the partition's newest message time
}

// SeekPartitionToEnd moves a group's cursor on one partition past every
// stored message. ErrPartitionNotFound when the queue or the partition does
// not exist.
func (b *Broker) SeekPartitionToEnd(ctx context.Context, tenant, group, queue, partition string) (SoughtPartition, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return SoughtPartition{}, err
	}
	q, ok, err := b.lookupQueue(ctx, key(tenant, queue))
	if err != nil {
		return SoughtPartition{}, pgerr.Translate(err)
	}
	if !ok {
		return SoughtPartition{}, ErrPartitionNotFound
	}
	part, err := b.q.PartitionGetByQueueAndName(ctx, db.PartitionGetByQueueAndNameParams{QueueID: q.ID, Name: partition})
	if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrNotFound) {
		return SoughtPartition{}, ErrPartitionNotFound
	}
	if err != nil {
		return SoughtPartition{}, fmt.Errorf("read partition %q of %q: %w", partition, queue, err)
	}
	n, err := b.q.PartitionConsumerSeekQueue(ctx, db.PartitionConsumerSeekQueueParams{
		ConsumerGroup: group, ToEnd: true, TenantID: tenantUUID(tenant), QueueName: queue, PartitionName: partition,
	})
	if err != nil {
		return SoughtPartition{}, pgerr.Translate(fmt.Errorf("seek %q on %q/%q: %w", group, queue, partition, err))
	}
	out := SoughtPartition{Updated: n > 0 && part.LastSeq > 0}
	if part.LastMessageAt.Valid {
		out.MovedTo = &part.LastMessageAt.Time
	}
	return out, nil
}

// resetWatermark makes the group's next wildcard pop on the queue scan every
// partition again. It runs after the change that may have made old
// partitions pending (a seek back, deleted cursors) has committed, so that a
// scan still seeing the old state cannot advance the watermark past them.
func (b *Broker) resetWatermark(ctx context.Context, tenant uuid.UUID, group, queue string) error {
	err := b.q.ConsumerWatermarkResetQueue(ctx, db.ConsumerWatermarkResetQueueParams{ConsumerGroup: group, TenantID: tenant, QueueName: queue})
	if err != nil {
		return fmt.Errorf("reset watermark of %q on %q: %w", group, queue, err)
	}
	return nil
}
