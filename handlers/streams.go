package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// RegisterStreamQuery registers a streaming query or resumes it (see
// openapi.yaml for the four outcomes).
func (s *Server) RegisterStreamQuery(ctx context.Context, req api.RegisterStreamQueryRequestObject) (api.RegisterStreamQueryResponseObject, error) {
	b := req.Body
	if b == nil {
		return badRequest[api.RegisterStreamQuery400JSONResponse]("Empty request body"), nil
	}
	r, err := s.b.RegisterStream(ctx, tenant(ctx), broker.StreamRegistration{
		Name: b.Name, SourceQueue: b.SourceQueue, SinkQueue: deref(b.SinkQueue, ""), ConfigHash: b.ConfigHash,
		Reset: deref(b.Reset, false),
	})
	if err != nil {
		return nil, err
	}
	if r.Conflict {
		return api.RegisterStreamQuery409JSONResponse{
			Success: false, QueryId: r.QueryID.String(), Name: b.Name,
			Error: fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. Pass reset:true to wipe existing state, or use a new queryId.", b.Name),
		}, nil
	}
	return api.RegisterStreamQuery200JSONResponse{
		Success: true, QueryId: r.QueryID.String(), Name: b.Name, ConfigHash: b.ConfigHash, Fresh: r.Fresh, Reset: r.Reset,
	}, nil
}

// CommitStreamCycle commits one cycle: state ops, sink pushes and the source
// ack in one transaction (broker.CommitStreamCycle).
func (s *Server) CommitStreamCycle(ctx context.Context, req api.CommitStreamCycleRequestObject) (api.CommitStreamCycleResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.CommitStreamCycle400JSONResponse]("Empty request body"), nil
	}
	c, err := cycleFrom(req.Body, producerSub(ctx))
	if err != nil {
		return badRequest[api.CommitStreamCycle400JSONResponse](err.Error()), nil
	}
	resp := api.CommitStreamCycle200JSONResponse{
		QueryId: c.QueryID.String(), PartitionId: c.PartitionID.String(), PushResults: []api.PushResult{},
	}
	out, err := s.b.CommitStreamCycle(ctx, tenant(ctx), c)
	switch msg, invalid := invalidMessage(err); {
	case invalid:
		return badRequest[api.CommitStreamCycle400JSONResponse](msg), nil
	case errors.Is(err, broker.ErrNotFound):
		return unknownQuery[api.CommitStreamCycle404JSONResponse](c.QueryID), nil
	case err != nil:
		return nil, err
	case out.Refused != nil:
		resp.Error = ptr(refusalText(out.Refused))
		return resp, nil
	}
	resp.Success = true
	if out.Skipped != "" {
		// Success: the SDKs count a failed flush as an error, and nothing
		// is lost, the windows stay stored for the next flush.
		resp.Skipped = ptr(api.StreamCycleResponseSkipped(out.Skipped))
		return resp, nil
	}
	resp.StateOpsApplied = len(c.Ops)
	if out.SourceQueue != "" {
		resp.QueueName = ptr(out.SourceQueue)
	}
	for i, o := range out.Pushed {
		resp.PushResults = append(resp.PushResults, pushResult(i, c.Items[i], o))
	}
	if c.Ack != nil {
		resp.AckResult = &api.StreamCycleAckResult{
			Success: true, Count: c.Ack.Count, LeaseReleased: out.LeaseReleased, Dlq: out.DeadLettered,
		}
	}
	return resp, nil
}

// cycleFrom decodes a cycle body and applies its defaults. The spec already
// checked shapes, names and enums; sub is the token's subject for the sink
// pushes.
func cycleFrom(b *api.StreamCycleRequest, sub string) (broker.StreamCycle, error) {
	c := broker.StreamCycle{Release: deref(b.ReleaseLease, true), Group: deref(b.ConsumerGroup, "")}
	var err error
	if c.QueryID, err = uuid.Parse(b.QueryId); err != nil {
		return c, invalidf("query_id must be a UUID")
	}
	if c.PartitionID, err = uuid.Parse(b.PartitionId); err != nil {
		return c, invalidf("partition_id must be a UUID")
	}
	if b.StateOps != nil {
		for i, op := range *b.StateOps {
			t := string(op.Type)
			if t != "upsert" && t != "delete" {
				return c, invalidf("state_ops/%d: unknown type %q", i, t)
			}
			so := broker.StateOp{Key: op.Key, Delete: t == "delete"}
			if op.Value != nil {
				so.Value = []byte(*op.Value)
			}
			c.Ops = append(c.Ops, so)
		}
	}
	if b.PushItems != nil {
		c.Items = make([]broker.PushItem, len(*b.PushItems))
		for i, it := range *b.PushItems {
			c.Items[i] = pushItemFrom(it.Queue, it.Partition, it.TransactionId, it.TraceId, it.Payload, sub)
		}
	}
	if a := b.Ack; a != nil {
		ack := &broker.CycleAck{
			TransactionID: a.TransactionId,
			LeaseID:       deref(a.LeaseId, ""),
			Status:        broker.AckCompleted,
			Count:         deref(a.Count, 1),
			Reason:        deref(a.Error, ""),
		}
		if a.Status != nil {
			ack.Status = broker.AckStatus(*a.Status)
		}
		switch ack.Status {
		case "completed", "success", "":
			ack.Status = broker.AckCompleted
		case broker.AckFailed, broker.AckDLQ:
		default:
			return c, invalidf("ack.status: unknown status %q", ack.Status)
		}
		if ack.Reason == "" {
			ack.Reason = "Streaming cycle reported failure"
		}
		c.Ack = ack
	}
	return c, nil
}

// GetStreamState reads one state shard.
func (s *Server) GetStreamState(ctx context.Context, req api.GetStreamStateRequestObject) (api.GetStreamStateResponseObject, error) {
	b := req.Body
	if b == nil {
		return badRequest[api.GetStreamState400JSONResponse]("Empty request body"), nil
	}
	qid, err := uuid.Parse(b.QueryId)
	if err != nil {
		return badRequest[api.GetStreamState400JSONResponse]("query_id must be a UUID"), nil
	}
	pid, err := uuid.Parse(b.PartitionId)
	if err != nil {
		return badRequest[api.GetStreamState400JSONResponse]("partition_id must be a UUID"), nil
	}
	sq := broker.StateQuery{QueryID: qid, PartitionID: pid, KeyPrefix: deref(b.KeyPrefix, ""), RipeAtOrBefore: b.RipeAtOrBefore}
	if b.Keys != nil {
		sq.Keys = *b.Keys
	}
	rows, err := s.b.StreamState(ctx, tenant(ctx), sq)
	if errors.Is(err, broker.ErrNotFound) {
		return unknownQuery[api.GetStreamState404JSONResponse](qid), nil
	}
	if err != nil {
		return nil, err
	}
	resp := api.GetStreamState200JSONResponse{Success: true, Rows: make([]api.StreamStateRow, len(rows))}
	for i, r := range rows {
		v := api.AnyJSON(r.Value)
		resp.Rows[i] = api.StreamStateRow{Key: r.Key, Value: &v, UpdatedAt: fmtMicros(r.UpdatedAt)}
	}
	return resp, nil
}

// unknownQuery is the 404 of the stream routes for a query id that was
// never registered (or belongs to another tenant).
func unknownQuery[R ~struct{ api.NotFoundJSONResponse }](id uuid.UUID) R {
	return notFound[R]("unknown query_id " + id.String() + ": register the query first (POST /streams/v1/queries)")
}
