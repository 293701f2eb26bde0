package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// RecordTrace stores a processing event on a message.
func (s *Server) RecordTrace(ctx context.Context, req api.RecordTraceRequestObject) (api.RecordTraceResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, badRequest("Empty request body")
	}
	if b.Data == nil {
		return nil, badRequest("data is required")
	}
	names, err := traceNames(b.TraceNames)
	if err != nil {
		return nil, err
	}
	pid, err := uuid.Parse(b.PartitionId)
	if err != nil {
		return nil, badRequest("partitionId must be a UUID")
	}
	msg, err := s.q.MessageGetByTransactionID(ctx, db.MessageGetByTransactionIDParams{PartitionID: pid, TransactionID: b.TransactionId})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.RecordTrace404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Message not found"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read traced message: %w", err)
	}
	group := deref(b.ConsumerGroup, "")
	if group == "" {
		group = queueModeGroup
	}
	eventType := deref(b.EventType, "")
	if eventType == "" {
		eventType = "info"
	}
	var traceID uuid.UUID
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qtx := s.q.WithTx(tx)
		var err error
		traceID, err = qtx.TraceInsert(ctx, db.TraceInsertParams{
			MessageID: msg.ID, PartitionID: pid, TransactionID: b.TransactionId,
			ConsumerGroup: group, EventType: eventType, Data: *b.Data,
		})
		if err != nil || len(names) == 0 {
			return err
		}
		return qtx.TraceNameInsertMany(ctx, db.TraceNameInsertManyParams{TraceID: traceID, Names: names})
	})
	if err != nil {
		return nil, fmt.Errorf("record trace: %w", err)
	}
	return api.RecordTrace201JSONResponse{Success: true, TraceId: traceID.String()}, nil
}

// traceNames accepts a name or a list of names; null or absent means none.
func traceNames(raw *json.RawMessage) ([]string, error) {
	if raw == nil || len(*raw) == 0 || string(*raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(*raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(*raw, &many); err != nil {
		return nil, badRequest("traceNames must be a string or an array of strings")
	}
	out := many[:0]
	for _, n := range many {
		if n != "" {
			out = append(out, n)
		}
	}
	return out, nil
}
