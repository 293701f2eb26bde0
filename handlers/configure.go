package handlers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// ConfigureQueue creates a queue or replaces all of its options.
func (s *Server) ConfigureQueue(ctx context.Context, req api.ConfigureQueueRequestObject) (api.ConfigureQueueResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	b := req.Body
	o := api.QueueOptions{}
	if b.Options != nil {
		o = *b.Options
	}
	params := db.QueueUpsertConfigParams{
		Name:                      b.Queue,
		Namespace:                 deref(b.Namespace, ""),
		Task:                      deref(b.Task, ""),
		Priority:                  int32(deref(o.Priority, 0)),
		LeaseTime:                 int32(deref(o.LeaseTime, 300)),
		RetryLimit:                int32(deref(o.RetryLimit, 3)),
		RetryDelay:                int32(deref(o.RetryDelay, 1000)),
		Ttl:                       int32(deref(o.Ttl, 3600)),
		MaxQueueSize:              int32(deref(o.MaxSize, 0)),
		DeadLetterQueue:           deref(o.DeadLetterQueue, false),
		DlqAfterMaxRetries:        deref(o.DlqAfterMaxRetries, false),
		DelayedProcessing:         int32(deref(o.DelayedProcessing, 0)),
		WindowBuffer:              int32(deref(o.WindowBuffer, 0)),
		RetentionSeconds:          int32(deref(o.RetentionSeconds, 0)),
		CompletedRetentionSeconds: int32(deref(o.CompletedRetentionSeconds, 0)),
		RetentionEnabled:          deref(o.RetentionEnabled, false),
		EncryptionEnabled:         deref(o.EncryptionEnabled, false),
		MaxWaitTimeSeconds:        int32(deref(o.MaxWaitTimeSeconds, 0)),
	}
	var q db.QueenQueue
	var partID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qtx := s.q.WithTx(tx)
		var err error
		if q, err = qtx.QueueUpsertConfig(ctx, params); err != nil {
			return err
		}
		id, err := qtx.PartitionEnsure(ctx, db.PartitionEnsureParams{QueueID: q.ID, Name: "Default"})
		partID = id.String()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("configure queue %q: %w", b.Queue, err)
	}
	s.queues.put(q)
	s.notifyQueues(ctx, []string{q.Name})
	return api.ConfigureQueue200JSONResponse{
		Configured: true, QueueId: q.ID.String(), PartitionId: partID,
		Queue: q.Name, Namespace: q.Namespace, Task: q.Task, Options: resolvedOptions(q),
	}, nil
}

func resolvedOptions(q db.QueenQueue) api.QueueOptionsResolved {
	return api.QueueOptionsResolved{
		Priority:                  int(q.Priority),
		LeaseTime:                 int(q.LeaseTime),
		RetryLimit:                int(q.RetryLimit),
		RetryDelay:                int(q.RetryDelay),
		MaxSize:                   int(q.MaxQueueSize),
		Ttl:                       int(q.Ttl),
		DeadLetterQueue:           q.DeadLetterQueue,
		DlqAfterMaxRetries:        q.DlqAfterMaxRetries,
		DelayedProcessing:         int(q.DelayedProcessing),
		WindowBuffer:              int(q.WindowBuffer),
		RetentionSeconds:          int(q.RetentionSeconds),
		CompletedRetentionSeconds: int(q.CompletedRetentionSeconds),
		RetentionEnabled:          q.RetentionEnabled,
		EncryptionEnabled:         q.EncryptionEnabled,
		MaxWaitTimeSeconds:        int(q.MaxWaitTimeSeconds),
	}
}
