package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// QueueOptions are a queue's settings (POST /api/v1/configure).
type QueueOptions struct {
	Priority                  int
	LeaseTime                 int // seconds; 0 means 60 for claims
	RetryLimit                int
	RetryDelay                int // milliseconds
	TTL                       int // seconds
	MaxSize                   int
	DeadLetterQueue           bool
	DlqAfterMaxRetries        bool
	DelayedProcessing         int // seconds
	WindowBuffer              int // seconds
	RetentionSeconds          int
	CompletedRetentionSeconds int
	RetentionEnabled          bool
	EncryptionEnabled         bool
	MaxWaitTimeSeconds        int
}

// QueueOptionsDefault is what a configure that leaves an option out stores.
func QueueOptionsDefault() QueueOptions {
	return QueueOptions{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, TTL: 3600}
}

// Queue is a queue with its options.
type Queue struct {
	ID        uuid.UUID
	Name      string
	Namespace string
	Task      string
	CreatedAt time.Time
	Options   QueueOptions
}

// QueueFromRow is the queue of a queue row (for the read routes, which
// read rows themselves).
func QueueFromRow(q db.QueenQueue) Queue {
	return Queue{
		ID: q.ID, Name: q.Name, Namespace: q.Namespace, Task: q.Task, CreatedAt: q.CreatedAt.Time,
		Options: QueueOptions{
			Priority: int(q.Priority), LeaseTime: int(q.LeaseTime), RetryLimit: int(q.RetryLimit),
			RetryDelay: int(q.RetryDelay), TTL: int(q.Ttl), MaxSize: int(q.MaxQueueSize),
			DeadLetterQueue: q.DeadLetterQueue, DlqAfterMaxRetries: q.DlqAfterMaxRetries,
			DelayedProcessing: int(q.DelayedProcessing), WindowBuffer: int(q.WindowBuffer),
			RetentionSeconds: int(q.RetentionSeconds), CompletedRetentionSeconds: int(q.CompletedRetentionSeconds),
			RetentionEnabled: q.RetentionEnabled, EncryptionEnabled: q.EncryptionEnabled,
			MaxWaitTimeSeconds: int(q.MaxWaitTimeSeconds),
		},
	}
}

// Configure creates a queue or replaces all of its options, and makes sure
// it has its Default partition (whose id it returns).
func (b *Broker) Configure(ctx context.Context, tenant, name, namespace, task string, o QueueOptions) (Queue, uuid.UUID, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return Queue{}, uuid.UUID{}, err
	}
	params := db.QueueUpsertConfigParams{
		TenantID: tenantUUID(tenant), Name: name, Namespace: namespace, Task: task,
		Priority: int32(o.Priority), LeaseTime: int32(o.LeaseTime), RetryLimit: int32(o.RetryLimit),
		RetryDelay: int32(o.RetryDelay), Ttl: int32(o.TTL), MaxQueueSize: int32(o.MaxSize),
		DeadLetterQueue: o.DeadLetterQueue, DlqAfterMaxRetries: o.DlqAfterMaxRetries,
		DelayedProcessing: int32(o.DelayedProcessing), WindowBuffer: int32(o.WindowBuffer),
		RetentionSeconds: int32(o.RetentionSeconds), CompletedRetentionSeconds: int32(o.CompletedRetentionSeconds),
		RetentionEnabled: o.RetentionEnabled, EncryptionEnabled: o.EncryptionEnabled,
		MaxWaitTimeSeconds: int32(o.MaxWaitTimeSeconds),
	}
	var q db.QueenQueue
	var partID uuid.UUID
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		qtx := b.q.WithTx(tx)
		var err error
		if q, err = qtx.QueueUpsertConfig(ctx, params); err != nil {
			return err
		}
		partID, err = qtx.PartitionEnsure(ctx, db.PartitionEnsureParams{QueueID: q.ID, Name: "Default"})
		return err
	})
	if err != nil {
		return Queue{}, uuid.UUID{}, pgerr.Translate(fmt.Errorf("configure queue %q: %w", name, err))
	}
	k := key(tenant, q.Name)
	b.notify.QueueChanged([]QueueKey{k})
	b.queues.put(tenant, q)
	// Pops parked on its namespace or task may have a new queue to look at.
	b.notify.QueuesReady([]QueueKey{k})
	return QueueFromRow(q), partID, nil
}

// DeleteQueue removes a queue and everything in it, and its subscriptions.
// It reports whether the queue existed; deleting a missing queue is not an
// error (SDK clean-ups call it blindly).
func (b *Broker) DeleteQueue(ctx context.Context, tenant, name string) (bool, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return false, err
	}
	var n int64
	tid := tenantUUID(tenant)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		qtx := b.q.WithTx(tx)
		var err error
		if n, err = qtx.QueueDeleteByName(ctx, db.QueueDeleteByNameParams{TenantID: tid, Name: name}); err != nil {
			return err
		}
		_, err = qtx.SubscriptionDeleteByQueue(ctx, db.SubscriptionDeleteByQueueParams{TenantID: tid, QueueName: name})
		return err
	})
	b.shared.forgetAll() // its messages are not served from reads kept here
	b.notify.QueueChanged([]QueueKey{key(tenant, name)})
	if err != nil {
		return false, pgerr.Translate(fmt.Errorf("delete queue %q: %w", name, err))
	}
	return n > 0, nil
}

// clearAttempts bounds how often a clear starts over because a cursor row
// appeared under it (see PartitionConsumerLockForClearNowait).
const clearAttempts = 5

// Cleared is what ClearQueue deleted.
type Cleared struct {
	Partitions int64
	Messages   int64
}

// ClearQueue deletes a queue's partitions (or the one named) with their
// messages, and keeps the queue. ErrNotFound when the queue, or the named
// partition, does not exist. Locks are taken in the order the rest of the
// broker takes them: cursor rows first (as an ack-and-push transaction
// does), then partitions in the order pushes lock them; the generated
// queries say why each step.
//
// The watermarks of the queue are reset once the clear has committed. A
// push that waited for the clear stamps its new partition with its
// transaction's start time, which can be older than a watermark advanced by
// a scan during a long clear; the reset discards such advances (their scan
// predates the reset). Deleting partitions by itself never makes an old
// partition pending, so nothing else about the watermarks changes.
func (b *Broker) ClearQueue(ctx context.Context, tenant, name string, partition *string) (Cleared, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return Cleared{}, err
	}
	var (
		q         db.QueenQueue
		res       db.PartitionDeleteManyRow
		queueSeen bool
		partSeen  bool
	)
	for attempt := 1; ; attempt++ {
		queueSeen, partSeen, res = false, false, db.PartitionDeleteManyRow{}
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			qtx := b.q.WithTx(tx)
			var err error
			q, err = qtx.QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: name})
			if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			queueSeen = true
			key := db.PartitionConsumerLockForClearParams{QueueID: q.ID, PartitionName: partition}
			if err := qtx.PartitionConsumerLockForClear(ctx, key); err != nil {
				return err
			}
			ids, err := qtx.PartitionLockForClear(ctx, db.PartitionLockForClearParams{QueueID: q.ID, PartitionName: partition})
			if err != nil || len(ids) == 0 {
				return err
			}
			partSeen = true
			if err := qtx.PartitionConsumerLockForClearNowait(ctx, ids); err != nil {
				return err
			}
			res, err = qtx.PartitionDeleteMany(ctx, ids)
			return err
		})
		err = pgerr.Translate(err)
		if attempt < clearAttempts && errors.Is(err, pgerr.ErrLockNotAvailable) {
			continue
		}
		break
	}
	b.shared.forgetAll() // its messages are not served from reads kept here
	if err != nil {
		return Cleared{}, fmt.Errorf("clear queue %q: %w", name, err)
	}
	if !queueSeen {
		return Cleared{}, fmt.Errorf("%q: %w", name, ErrQueueNotFound)
	}
	if partition != nil && !partSeen {
		return Cleared{}, fmt.Errorf("%q of %q: %w", *partition, name, ErrPartitionNotFound)
	}
	if err := b.q.ConsumerWatermarkResetByQueue(ctx, q.ID); err != nil {
		return Cleared{}, pgerr.Translate(fmt.Errorf("reset watermarks of %q: %w", name, err))
	}
	return Cleared{Partitions: res.PartitionsDeleted, Messages: res.MessagesDeleted}, nil
}
