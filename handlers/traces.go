package handlers

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// RecordTrace stores a processing event on a message (broker.RecordTrace);
// the trace listings are read routes (traces_reads.go).
func (s *Server) RecordTrace(ctx context.Context, req api.RecordTraceRequestObject) (api.RecordTraceResponseObject, error) {
	b := req.Body
	if b == nil {
		return badRequest[api.RecordTrace400JSONResponse]("Empty request body"), nil
	}
	if b.Data == nil {
		return badRequest[api.RecordTrace400JSONResponse]("data is required"), nil
	}
	names, err := traceNames(b.TraceNames)
	if err != nil {
		return badRequest[api.RecordTrace400JSONResponse](err.Error()), nil
	}
	pid, err := uuid.Parse(b.PartitionId)
	if err != nil {
		return badRequest[api.RecordTrace400JSONResponse]("partitionId must be a UUID"), nil
	}
	traceID, err := s.b.RecordTrace(ctx, tenant(ctx), broker.Trace{
		PartitionID: pid, TransactionID: b.TransactionId, Group: deref(b.ConsumerGroup, ""),
		EventType: deref(b.EventType, ""), Data: *b.Data, Names: names,
	})
	if errors.Is(err, broker.ErrNotFound) {
		return notFound[api.RecordTrace404JSONResponse]("Message not found"), nil
	}
	if err != nil {
		return nil, err
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
		return nil, invalidf("traceNames must be a string or an array of strings")
	}
	out := many[:0]
	for _, n := range many {
		if n != "" {
			out = append(out, n)
		}
	}
	return out, nil
}
