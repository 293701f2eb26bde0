package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// DeleteMessage deletes a tenant's stored message; its dead-letter and trace
// rows go with it. It reports whether the message existed (deleting a
// missing one is not an error: the CLI's DLQ drain deletes blindly); another
// tenant's message does not exist here.
func (b *Broker) DeleteMessage(ctx context.Context, tenant string, partitionID uuid.UUID, txID string) (bool, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return false, err
	}
	n, err := b.q.MessageDeleteByTransactionID(ctx, db.MessageDeleteByTransactionIDParams{
		PartitionID: partitionID, TenantID: tid, TransactionID: txID,
	})
	if err != nil {
		return false, pgerr.Translate(fmt.Errorf("delete message: %w", err))
	}
	if n > 0 {
		b.shared.forgetAll() // no autoAck pop serves it from a read kept here
		// As after retention: cursors waiting right before the deleted
		// message move over its number, so it does not count as pending
		// (nor keep the partition a pop candidate when it was the newest).
		if _, err := b.q.PartitionConsumerSkipMissing(ctx, []uuid.UUID{partitionID}); err != nil {
			return false, pgerr.Translate(fmt.Errorf("move cursors over deleted message: %w", err))
		}
	}
	return n > 0, nil
}

// Trace is a processing event recorded on a message.
type Trace struct {
	PartitionID   uuid.UUID
	TransactionID string
	Group         string // "": queue mode
	EventType     string // "": info
	Data          json.RawMessage
	Names         []string
}

// RecordTrace stores a processing event on a message and returns its id.
// ErrNotFound: no such message in the tenant.
func (b *Broker) RecordTrace(ctx context.Context, tenant string, t Trace) (uuid.UUID, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return uuid.UUID{}, err
	}
	if t.Group == "" {
		t.Group = QueueModeGroup
	}
	if t.EventType == "" {
		t.EventType = "info"
	}
	msg, err := b.q.MessageGetByTransactionID(ctx, db.MessageGetByTransactionIDParams{
		PartitionID: t.PartitionID, TransactionID: t.TransactionID, TenantID: tid,
	})
	if err != nil {
		return uuid.UUID{}, pgerr.Translate(fmt.Errorf("read traced message: %w", err))
	}
	var traceID uuid.UUID
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		qtx := b.q.WithTx(tx)
		var err error
		traceID, err = qtx.TraceInsert(ctx, db.TraceInsertParams{
			MessageID: msg.ID, PartitionID: t.PartitionID, TransactionID: t.TransactionID,
			ConsumerGroup: t.Group, EventType: t.EventType, Data: t.Data,
		})
		if err != nil || len(t.Names) == 0 {
			return err
		}
		return qtx.TraceNameInsertMany(ctx, db.TraceNameInsertManyParams{TraceID: traceID, Names: t.Names})
	})
	if err != nil {
		return uuid.UUID{}, pgerr.Translate(fmt.Errorf("record trace: %w", err))
	}
	return traceID, nil
}
