package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
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

// clearAttempts bounds how often a clear starts over because a cursor row
// appeared under it (see PartitionConsumerLockForClearNowait).
const clearAttempts = 5

// ClearQueue deletes a queue's partitions (or one of them) and keeps the
// queue. Locks are taken in the order the rest of the broker takes them:
// cursor rows first (as an ack-and-push transaction does), then partitions
// in the order pushes lock them; the generated queries say why each step.
//
// The watermarks of the queue are reset once the clear has committed. A
// push that waited for the clear stamps its new partition with its
// transaction's start time, which can be older than a watermark advanced by
// a scan during a long clear; the reset discards such advances (their scan
// predates the reset). Deleting partitions by itself never makes an old
// partition pending, so nothing else about the watermarks changes.
func (s *Server) ClearQueue(ctx context.Context, req api.ClearQueueRequestObject) (api.ClearQueueResponseObject, error) {
	partition := req.Params.Partition
	var (
		q         db.QueenQueue
		res       db.PartitionDeleteManyRow
		queueSeen bool
		partSeen  bool
		err       error
	)
	for attempt := 1; ; attempt++ {
		queueSeen, partSeen, res = false, false, db.PartitionDeleteManyRow{}
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			qtx := s.q.WithTx(tx)
			var err error
			q, err = qtx.QueueGetByName(ctx, req.Queue)
			if errors.Is(err, pgx.ErrNoRows) {
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
		if attempt < clearAttempts && isLockNotAvailable(err) {
			continue
		}
		break
	}
	if err != nil {
		return nil, fmt.Errorf("clear queue %q: %w", req.Queue, err)
	}
	if !queueSeen {
		return api.ClearQueue404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	}
	if partition != nil && !partSeen {
		return api.ClearQueue404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Partition not found"}}, nil
	}
	if err := s.q.ConsumerWatermarkResetByQueue(ctx, q.ID); err != nil {
		return nil, fmt.Errorf("reset watermarks of %q: %w", req.Queue, err)
	}
	return api.ClearQueue200JSONResponse{
		Success: true, Queue: req.Queue, Partition: partition,
		PartitionsDeleted: int(res.PartitionsDeleted), MessagesDeleted: int(res.MessagesDeleted),
	}, nil
}
