package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
)

// GetQueue returns one queue with its options and counts.
func (s *Server) GetQueue(ctx context.Context, req api.GetQueueRequestObject) (api.GetQueueResponseObject, error) {
	q, err := s.q.QueueGetByName(ctx, req.Queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.GetQueue404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", req.Queue, err)
	}
	st, err := s.q.QueueStatsByName(ctx, q.ID)
	if err != nil {
		return nil, fmt.Errorf("count queue %q: %w", req.Queue, err)
	}
	resp := api.GetQueue200JSONResponse{
		Id: q.ID.String(), Name: q.Name, Namespace: q.Namespace, Task: q.Task,
		CreatedAt: fmtMillis(q.CreatedAt.Time), Options: resolvedOptions(q),
	}
	resp.Totals.Partitions = int(st.PartitionCount)
	resp.Totals.Total = int(st.MessageCount)
	resp.Totals.Pending = int(st.PendingCount)
	resp.Totals.DeadLetter = int(st.DeadLetterCount)
	return resp, nil
}

// DeleteQueue removes a queue and everything in it. Deleting a queue that
// does not exist is not an error: SDK clean-ups call it blindly.
func (s *Server) DeleteQueue(ctx context.Context, req api.DeleteQueueRequestObject) (api.DeleteQueueResponseObject, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qtx := s.q.WithTx(tx)
		var err error
		if n, err = qtx.QueueDeleteByName(ctx, req.Queue); err != nil {
			return err
		}
		_, err = qtx.SubscriptionDeleteByQueue(ctx, req.Queue)
		return err
	})
	s.queues.invalidate(req.Queue)
	if err != nil {
		return nil, fmt.Errorf("delete queue %q: %w", req.Queue, err)
	}
	resp := api.DeleteQueue200JSONResponse{Deleted: n > 0, Existed: n > 0, Queue: req.Queue}
	if n == 0 {
		resp.Message = ptr("Queue not found, nothing was deleted")
	}
	return resp, nil
}
