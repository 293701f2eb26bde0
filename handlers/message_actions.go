package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// The dashboard's message actions: Retry replays a dead-lettered message,
// Move to DLQ dead-letters a pending one. ("Move cursor to now" is the
// consumer-group seek.)

func messageActionNotFound(pid, txID, msg string) api.MessageActionNotFound {
	return api.MessageActionNotFound{Success: false, PartitionId: pid, TransactionId: txID, Error: "Message not found", Message: msg}
}

// RetryMessage replays a message's newest dead-letter row as a new push to
// the same queue and partition (replayDeadLetter, dlq.go).
func (s *Server) RetryMessage(ctx context.Context, req api.RetryMessageRequestObject) (api.RetryMessageResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return nil, badRequest("partitionId must be a UUID")
	}
	if s.maint != nil && s.maint.push.Load() {
		// A replay is a push, and pushes go to the spool now: refuse
		// rather than drop the dead-letter row for a spooled copy.
		return api.RetryMessage503JSONResponse(maintenanceRefusal("retry again when push maintenance is off")), nil
	}
	group := ""
	if req.Body != nil {
		group = deref(req.Body.ConsumerGroup, "")
	}
	row, err := s.q.DeadLetterGetForReplay(ctx, db.DeadLetterGetForReplayParams{
		PartitionID: pid, TransactionID: req.TransactionId, ConsumerGroup: group,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.RetryMessage404JSONResponse(messageActionNotFound(pid.String(), req.TransactionId,
			"no dead-letter entry for this message: only dead-lettered messages can be retried")), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter: %w", err)
	}
	dl := deadLetterSnapshot(row)
	r, err := s.replayDeadLetter(ctx, dl, dl.QueueName, dl.PartitionName)
	if err != nil {
		return nil, err
	}
	if !r.removed {
		// Replayed or purged since it was read.
		return api.RetryMessage404JSONResponse(messageActionNotFound(pid.String(), req.TransactionId,
			"no dead-letter entry for this message: only dead-lettered messages can be retried")), nil
	}
	return api.RetryMessage200JSONResponse(r.response(dl)), nil
}

// operatorDeadLetter is the reason stored when none is given.
const operatorDeadLetter = "Moved to dead-letter queue by an operator"

// MoveMessageToDLQ dead-letters a message for one consumer group and moves
// the group's cursor over it. A cursor is a position, so only the group's
// next message can be passed, and not under a live lease.
func (s *Server) MoveMessageToDLQ(ctx context.Context, req api.MoveMessageToDLQRequestObject) (api.MoveMessageToDLQResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return nil, badRequest("partitionId must be a UUID")
	}
	group, reason := queueModeGroup, operatorDeadLetter
	if req.Body != nil {
		if g := deref(req.Body.ConsumerGroup, ""); g != "" {
			group = g
		}
		if r := deref(req.Body.ErrorMessage, ""); r != "" {
			reason = r
		}
	}
	msg, err := s.q.MessageGetByTransactionID(ctx, db.MessageGetByTransactionIDParams{PartitionID: pid, TransactionID: req.TransactionId})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.MoveMessageToDLQ404JSONResponse(messageActionNotFound(pid.String(), req.TransactionId, "Message not found")), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message: %w", err)
	}
	resp := api.MoveMessageToDLQ200JSONResponse{
		Success: true, Result: api.MoveToDLQResponseResultAlreadyDeadLettered, PartitionId: pid.String(), TransactionId: req.TransactionId,
		ConsumerGroup: group, Message: "Message was already in the dead-letter queue for this consumer group",
	}
	var conflict bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		exists, err := q.DeadLetterExistsForGroup(ctx, db.DeadLetterExistsForGroupParams{MessageID: msg.ID, ConsumerGroup: group})
		if err != nil || exists {
			return err
		}
		n, err := q.PartitionConsumerPassHead(ctx, db.PartitionConsumerPassHeadParams{
			PartitionID: pid, ConsumerGroup: group, Seq: msg.Seq, MessageID: &msg.ID,
		})
		if err != nil {
			return err
		}
		if n == 0 {
			conflict = true
			return nil
		}
		resp.Result, resp.Message = api.MoveToDLQResponseResultMoved, "Message moved to the dead-letter queue"
		return q.DeadLetterInsertMany(ctx, db.DeadLetterInsertManyParams{
			MessageIds: []uuid.UUID{msg.ID}, PartitionIds: []uuid.UUID{pid}, ConsumerGroups: []string{group},
			ErrorMessages: []string{reason}, RetryCounts: []int32{0},
			OriginalCreatedAts: []pgtype.Timestamptz{msg.CreatedAt},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("move message to dead-letter queue: %w", err)
	}
	if conflict {
		return api.MoveMessageToDLQ409JSONResponse{Error: "only the next message consumer group " + group +
			" would receive can be moved to the dead-letter queue, and not while it holds a lease on the partition"}, nil
	}
	if resp.Result == api.MoveToDLQResponseResultMoved {
		s.cfg.Metrics.Acked(msg.QueueName, 0, 0, 0, 1)
	}
	return resp, nil
}
