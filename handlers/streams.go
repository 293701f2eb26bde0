package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// defaultTenantID owns every stream query until native tenancy (the
// x-queen-tenant header) is implemented; the queries are already keyed by
// (tenant, name) so that switching it on hides nothing.
var defaultTenantID = uuid.MustParse(defaultTenant)

// RegisterStreamQuery registers a streaming query or resumes it (see
// openapi.yaml for the four outcomes).
func (s *Server) RegisterStreamQuery(ctx context.Context, req api.RegisterStreamQueryRequestObject) (api.RegisterStreamQueryResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, badRequest("Empty request body")
	}
	var sink *string
	if b.SinkQueue != nil && *b.SinkQueue != "" {
		sink = ptr(*b.SinkQueue)
	}
	reset := deref(b.Reset, false)
	var (
		row             db.QueenStreamsQuery
		fresh, didReset bool
		conflict        bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		// Lock the existing row, or insert; a concurrent insert of the same
		// name makes the insert return nothing, and the second read sees it.
		for attempt := 0; attempt < 2; attempt++ {
			row, err = q.StreamQueryLockByName(ctx, db.StreamQueryLockByNameParams{TenantID: defaultTenantID, Name: b.Name})
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
			row, err = q.StreamQueryInsert(ctx, db.StreamQueryInsertParams{
				TenantID: defaultTenantID, Name: b.Name, SourceQueue: b.SourceQueue, SinkQueue: sink, ConfigHash: b.ConfigHash,
			})
			if !errors.Is(err, pgx.ErrNoRows) {
				fresh = err == nil
				break
			}
		}
		if err != nil || fresh {
			return err
		}
		if row.ConfigHash != b.ConfigHash {
			if !reset {
				conflict = true
				return nil
			}
			if _, err := q.StreamStateDeleteByQuery(ctx, row.ID); err != nil {
				return err
			}
			didReset = true
		}
		return q.StreamQueryUpdate(ctx, db.StreamQueryUpdateParams{
			ID: row.ID, SourceQueue: b.SourceQueue, SinkQueue: sink, ConfigHash: b.ConfigHash,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("register stream query %q: %w", b.Name, err)
	}
	if conflict {
		return api.RegisterStreamQuery409JSONResponse{
			Success: false, QueryId: row.ID.String(), Name: b.Name,
			Error: fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. Pass reset:true to wipe existing state, or use a new queryId.", b.Name),
		}, nil
	}
	return api.RegisterStreamQuery200JSONResponse{
		Success: true, QueryId: row.ID.String(), Name: b.Name, ConfigHash: b.ConfigHash, Fresh: fresh, Reset: didReset,
	}, nil
}

// CommitStreamCycle commits one cycle: state ops, sink pushes and the source
// ack in one transaction (streams_store.go).
func (s *Server) CommitStreamCycle(ctx context.Context, req api.CommitStreamCycleRequestObject) (api.CommitStreamCycleResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	c, err := cycleFrom(req.Body, producerSub(ctx))
	if err != nil {
		return nil, err
	}
	resp := api.CommitStreamCycle200JSONResponse{
		QueryId: c.queryID.String(), PartitionId: c.partitionID.String(), PushResults: []api.PushResult{},
	}
	// Checked before the sink queues are created, so that a cycle of an
	// unknown query leaves no trace at all.
	if _, err := s.q.StreamQueryGetByID(ctx, db.StreamQueryGetByIDParams{TenantID: defaultTenantID, ID: c.queryID}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return unknownQuery[api.CommitStreamCycle404JSONResponse](c.queryID), nil
		}
		return nil, fmt.Errorf("read stream query %s: %w", c.queryID, err)
	}
	out, err := s.commitCycle(ctx, c)
	var rb errRollback
	switch {
	case errors.As(err, &rb):
		resp.Error = ptr(rb.reason)
		return resp, nil
	case errors.Is(err, errStreamQueryGone):
		return unknownQuery[api.CommitStreamCycle404JSONResponse](c.queryID), nil
	case err != nil:
		return nil, fmt.Errorf("stream cycle of query %s on partition %s: %w", c.queryID, c.partitionID, err)
	}
	resp.Success = true
	resp.StateOpsApplied = len(c.ops)
	resp.QueueName = out.sourceQueue
	for i, o := range out.pushed {
		resp.PushResults = append(resp.PushResults, pushResult(i, c.items[i], o))
	}
	if c.ack != nil {
		resp.AckResult = &api.StreamCycleAckResult{
			Success: true, Count: c.ack.count, LeaseReleased: out.leaseReleased, Dlq: out.dlq,
		}
	}
	return resp, nil
}

// GetStreamState reads one state shard.
func (s *Server) GetStreamState(ctx context.Context, req api.GetStreamStateRequestObject) (api.GetStreamStateResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, badRequest("Empty request body")
	}
	qid, err := uuid.Parse(b.QueryId)
	if err != nil {
		return nil, badRequest("query_id must be a UUID")
	}
	pid, err := uuid.Parse(b.PartitionId)
	if err != nil {
		return nil, badRequest("partition_id must be a UUID")
	}
	if _, err := s.q.StreamQueryGetByID(ctx, db.StreamQueryGetByIDParams{TenantID: defaultTenantID, ID: qid}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return unknownQuery[api.GetStreamState404JSONResponse](qid), nil
		}
		return nil, fmt.Errorf("read stream query %s: %w", qid, err)
	}
	keys := []string{}
	if b.Keys != nil {
		keys = *b.Keys
	}
	rows, err := s.q.StreamStateList(ctx, db.StreamStateListParams{
		QueryID: qid, PartitionID: pid, Keys: keys, KeyPrefix: deref(b.KeyPrefix, ""),
		RipeAtOrBefore: b.RipeAtOrBefore,
	})
	if err != nil {
		return nil, fmt.Errorf("read stream state of query %s on partition %s: %w", qid, pid, err)
	}
	resp := api.GetStreamState200JSONResponse{Success: true, Rows: make([]api.StreamStateRow, len(rows))}
	for i, r := range rows {
		v := api.AnyJSON(r.Value)
		resp.Rows[i] = api.StreamStateRow{Key: r.Key, Value: &v, UpdatedAt: fmtMicros(r.UpdatedAt.Time)}
	}
	return resp, nil
}

// unknownQuery is the 404 of the stream routes for a query id that was
// never registered (or belongs to another tenant).
func unknownQuery[R ~struct{ api.NotFoundJSONResponse }](id uuid.UUID) R {
	return R{api.NotFoundJSONResponse{Error: "unknown query_id " + id.String() + ": register the query first (POST /streams/v1/queries)"}}
}
