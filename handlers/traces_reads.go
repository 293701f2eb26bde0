package handlers

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// GetMessageTraces returns the events recorded on one message, oldest first.
// An unknown message has no events; that is not an error.
func (s *Server) GetMessageTraces(ctx context.Context, req api.GetMessageTracesRequestObject) (api.GetMessageTracesResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return badRequest[api.GetMessageTraces400JSONResponse]("partitionId must be a UUID"), nil
	}
	rows, err := s.rq().TraceListByMessage(ctx, db.TraceListByMessageParams{
		PartitionID: pid, TransactionID: req.TransactionId, TenantID: tenantID(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	resp := api.GetMessageTraces200JSONResponse{Traces: make([]api.MessageTrace, 0, len(rows))}
	for _, r := range rows {
		data := api.AnyJSON(r.Data)
		resp.Traces = append(resp.Traces, api.MessageTrace{
			Id: r.ID.String(), EventType: r.EventType, Data: &data, ConsumerGroup: r.ConsumerGroup,
			WorkerId: r.WorkerID, CreatedAt: fmtMillis(r.CreatedAt.Time), TraceNames: nonNil(r.TraceNames),
		})
	}
	return resp, nil
}

// ListTracesByName pages through the events carrying a trace name, oldest
// first.
func (s *Server) ListTracesByName(ctx context.Context, req api.ListTracesByNameRequestObject) (api.ListTracesByNameResponseObject, error) {
	limit, offset := deref(req.Params.Limit, 100), deref(req.Params.Offset, 0)
	tid := tenantID(ctx)
	rows, err := s.rq().TraceListByName(ctx, db.TraceListByNameParams{
		TraceName: req.TraceName, TenantID: tid, RowLimit: int32(limit), RowOffset: int32(offset),
	})
	if err != nil {
		return nil, fmt.Errorf("list traces named %q: %w", req.TraceName, err)
	}
	total, err := s.rq().TraceCountByName(ctx, db.TraceCountByNameParams{TraceName: req.TraceName, TenantID: tid})
	if err != nil {
		return nil, fmt.Errorf("count traces named %q: %w", req.TraceName, err)
	}
	resp := api.ListTracesByName200JSONResponse{
		Traces: make([]api.TraceNameEvent, 0, len(rows)), Total: int(total),
		Pagination: api.Pagination{Limit: limit, Offset: offset},
	}
	for _, r := range rows {
		data := api.AnyJSON(r.Data)
		payload := api.AnyJSON(s.b.OpenPayload(r.MessagePayload, r.IsEncrypted))
		resp.Traces = append(resp.Traces, api.TraceNameEvent{
			Id: r.ID.String(), TransactionId: r.TransactionID, PartitionId: r.PartitionID.String(),
			EventType: r.EventType, Data: &data, ConsumerGroup: r.ConsumerGroup, WorkerId: r.WorkerID,
			CreatedAt: fmtMillis(r.CreatedAt.Time), QueueName: r.QueueName, PartitionName: r.PartitionName,
			MessagePayload: &payload, TraceNames: nonNil(r.TraceNames),
		})
	}
	return resp, nil
}

// ListTraceNames pages through trace names, most recently used first.
func (s *Server) ListTraceNames(ctx context.Context, req api.ListTraceNamesRequestObject) (api.ListTraceNamesResponseObject, error) {
	limit, offset := deref(req.Params.Limit, 50), deref(req.Params.Offset, 0)
	tid := tenantID(ctx)
	rows, err := s.rq().TraceNameList(ctx, db.TraceNameListParams{TenantID: tid, RowLimit: int32(limit), RowOffset: int32(offset)})
	if err != nil {
		return nil, fmt.Errorf("list trace names: %w", err)
	}
	total, err := s.rq().TraceNameCount(ctx, tid)
	if err != nil {
		return nil, fmt.Errorf("count trace names: %w", err)
	}
	resp := api.ListTraceNames200JSONResponse{
		TraceNames: make([]api.TraceNameStat, 0, len(rows)), Total: int(total),
		Pagination: api.Pagination{Limit: limit, Offset: offset},
	}
	for _, r := range rows {
		resp.TraceNames = append(resp.TraceNames, api.TraceNameStat{
			TraceName: r.TraceName, TraceCount: int(r.TraceCount), MessageCount: int(r.MessageCount),
			LastSeen: fmtMillis(r.LastSeen.Time),
		})
	}
	return resp, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
