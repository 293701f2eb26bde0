package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// deadLetters is the one dead-letter writer: acks past the retry limit and
// `dlq` acks (ack.go), stream cycles reporting failure (stream.go) and the
// operator's move (MoveToDLQ) add rows to it inside their transaction, and
// write them with one statement.
type deadLetters struct{ p db.DeadLetterInsertManyParams }

func (d *deadLetters) add(message, partition uuid.UUID, createdAt pgtype.Timestamptz, group, reason string, retries int32) {
	d.p.MessageIds = append(d.p.MessageIds, message)
	d.p.PartitionIds = append(d.p.PartitionIds, partition)
	d.p.ConsumerGroups = append(d.p.ConsumerGroups, group)
	d.p.ErrorMessages = append(d.p.ErrorMessages, reason)
	d.p.RetryCounts = append(d.p.RetryCounts, retries)
	d.p.OriginalCreatedAts = append(d.p.OriginalCreatedAts, createdAt)
}

func (d *deadLetters) write(ctx context.Context, q *db.Queries) error {
	if len(d.p.MessageIds) == 0 {
		return nil
	}
	if err := q.DeadLetterInsertMany(ctx, d.p); err != nil {
		return fmt.Errorf("insert dead letters: %w", err)
	}
	return nil
}

// Replayed is a dead letter replayed as a new push.
type Replayed struct {
	DeadLetterID          uuid.UUID
	Group                 string // the dead letter's consumer group
	OriginalTransactionID string
	Item                  PushItem // what was pushed: queue, partition, transaction id dlq:<row id>
	Result                PushResult
}

// deadLetterSnapshot is a dead-letter row with what a replay pushes; both
// ways of finding one (by message, by row id) read these columns.
type deadLetterSnapshot db.DeadLetterGetByIDRow

// ReplayDeadLetter replays one dead-letter row of the tenant, by its id, to
// its own queue and partition or to the ones given (in the tenant).
// ErrNotFound when the row does not exist in the tenant (or was replayed or
// purged meanwhile), ErrMaintenance during push
// maintenance: a replay is a push, and pushes go to the spool then.
func (b *Broker) ReplayDeadLetter(ctx context.Context, tenant string, id uuid.UUID, queue, partition string) (Replayed, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return Replayed{}, err
	}
	if b.maint.push.Load() {
		return Replayed{}, ErrMaintenance
	}
	row, err := b.q.DeadLetterGetByID(ctx, db.DeadLetterGetByIDParams{ID: id, TenantID: tenantUUID(tenant)})
	if err != nil {
		return Replayed{}, pgerr.Translate(fmt.Errorf("read dead letter %s: %w", id, err))
	}
	dl := deadLetterSnapshot(row)
	if queue == "" {
		queue = dl.QueueName
	}
	if partition == "" {
		partition = dl.PartitionName
	}
	return b.replayDeadLetter(ctx, tenant, dl, queue, partition)
}

// RetryMessage replays a message's newest dead-letter row (of group, when
// given) to its own queue and partition. Errors as ReplayDeadLetter.
func (b *Broker) RetryMessage(ctx context.Context, tenant string, partitionID uuid.UUID, txID, group string) (Replayed, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return Replayed{}, err
	}
	if b.maint.push.Load() {
		return Replayed{}, ErrMaintenance
	}
	row, err := b.q.DeadLetterGetForReplay(ctx, db.DeadLetterGetForReplayParams{
		PartitionID: partitionID, TransactionID: txID, TenantID: tenantUUID(tenant), ConsumerGroup: group,
	})
	if err != nil {
		return Replayed{}, pgerr.Translate(fmt.Errorf("read dead letter: %w", err))
	}
	dl := deadLetterSnapshot(row)
	return b.replayDeadLetter(ctx, tenant, dl, dl.QueueName, dl.PartitionName)
}

// replayDeadLetter pushes a dead letter's payload to queue and partition
// through the normal insert, with transaction id `dlq:<row id>`, and
// deletes the row, in one transaction. The row is deleted first: of two
// concurrent replays of one row only the one that deleted it pushes. The
// payload is opened and sealed again as the destination queue asks
// (ENC-4); one that cannot be opened (no key, another key) is stored as it
// is, never sealed twice.
func (b *Broker) replayDeadLetter(ctx context.Context, tenant string, dl deadLetterSnapshot, queue, partition string) (Replayed, error) {
	payload := b.seal.open(dl.Payload, dl.IsEncrypted)
	r := Replayed{
		DeadLetterID: dl.DlqID, Group: dl.ConsumerGroup, OriginalTransactionID: dl.TransactionID,
		Item: PushItem{
			Queue: queue, Partition: partition, TransactionID: "dlq:" + dl.DlqID.String(),
			Payload: json.RawMessage(payload), sealed: dl.IsEncrypted && bytes.Equal(payload, dl.Payload),
			tenant: tenant,
		},
	}
	if dl.ProducerSub != nil {
		r.Item.ProducerSub = *dl.ProducerSub
	}
	if dl.TraceID != nil {
		r.Item.TraceID = dl.TraceID.String()
	}
	dest := key(tenant, queue)
	removed := false
	err := b.withQueues(ctx, []QueueKey{dest}, func(queues map[QueueKey]db.QueenQueue) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			n, err := b.q.WithTx(tx).DeadLetterDeleteByID(ctx, dl.DlqID)
			if err != nil || n == 0 {
				return err
			}
			out, err := b.insertMessages(ctx, tx, queues, []PushItem{r.Item}, false)
			if err != nil {
				return err
			}
			removed, r.Result = true, out[0]
			return nil
		})
	})
	if err != nil {
		return Replayed{}, fmt.Errorf("replay dead letter %s: %w", dl.DlqID, err)
	}
	if !removed {
		return Replayed{}, ErrNotFound // replayed or purged since it was read
	}
	if r.Result.Status == Queued {
		b.rec.Pushed(queue, 1)
		b.notify.QueuesReady([]QueueKey{dest})
	}
	return r, nil
}

// operatorDeadLetter is the reason stored when the operator gives none.
const operatorDeadLetter = "Moved to dead-letter queue by an operator"

// MoveToDLQ dead-letters a message for one consumer group ("": queue mode)
// and moves the group's cursor over it. A cursor is a position, so only the
// group's next message can be passed, and not under a live lease
// (ErrConflict). moved is false when the message was already dead-lettered
// for the group. ErrNotFound: no such message in the tenant.
func (b *Broker) MoveToDLQ(ctx context.Context, tenant string, partitionID uuid.UUID, txID, group, reason string) (moved bool, err error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return false, err
	}
	if group == "" {
		group = QueueModeGroup
	}
	if reason == "" {
		reason = operatorDeadLetter
	}
	msg, err := b.q.MessageGetByTransactionID(ctx, db.MessageGetByTransactionIDParams{
		PartitionID: partitionID, TransactionID: txID, TenantID: tid,
	})
	if err != nil {
		return false, pgerr.Translate(fmt.Errorf("read message: %w", err))
	}
	var conflict bool
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q := b.q.WithTx(tx)
		exists, err := q.DeadLetterExistsForGroup(ctx, db.DeadLetterExistsForGroupParams{MessageID: msg.ID, ConsumerGroup: group})
		if err != nil || exists {
			return err
		}
		passed, err := passHead(ctx, q, partitionID, group, msg.Seq, msg.ID)
		if err != nil {
			return err
		}
		if !passed {
			conflict = true
			return nil
		}
		moved = true
		var dead deadLetters
		dead.add(msg.ID, partitionID, msg.CreatedAt, group, reason, 0)
		return dead.write(ctx, q)
	})
	if err != nil {
		return false, pgerr.Translate(fmt.Errorf("move message to dead-letter queue: %w", err))
	}
	if conflict {
		return false, ErrConflict
	}
	if moved {
		b.rec.Acked(msg.QueueName, 0, 0, 0, 1)
	}
	return moved, nil
}

// PurgeDeadLetters deletes the dead-letter rows of a queue, or of one group
// in it. The messages stay: every cursor concerned is already past them.
func (b *Broker) PurgeDeadLetters(ctx context.Context, tenant, queue, group string) (int64, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return 0, err
	}
	n, err := b.q.DeadLetterDeleteByQueue(ctx, db.DeadLetterDeleteByQueueParams{TenantID: tid, QueueName: queue, ConsumerGroup: group})
	if err != nil {
		return 0, pgerr.Translate(fmt.Errorf("purge dead letters of %q: %w", queue, err))
	}
	return n, nil
}
