package handlers

import (
	"context"
	"errors"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The resources tag: the queue writes go through the broker here; the
// listings and GetQueue are read routes (resources_reads.go).

// DeleteQueue removes a queue and everything in it (broker.DeleteQueue).
// Deleting a queue that does not exist is not an error: SDK clean-ups call
// it blindly.
func (s *Server) DeleteQueue(ctx context.Context, req api.DeleteQueueRequestObject) (api.DeleteQueueResponseObject, error) {
	existed, err := s.b.DeleteQueue(ctx, tenant(ctx), req.Queue)
	if err != nil {
		return nil, err
	}
	resp := api.DeleteQueue200JSONResponse{Deleted: existed, Existed: existed, Queue: req.Queue}
	if !existed {
		resp.Message = ptr("Queue not found, nothing was deleted")
	}
	return resp, nil
}

// ClearQueue deletes a queue's partitions (or one of them) and keeps the
// queue (broker.ClearQueue).
func (s *Server) ClearQueue(ctx context.Context, req api.ClearQueueRequestObject) (api.ClearQueueResponseObject, error) {
	partition := req.Params.Partition
	res, err := s.b.ClearQueue(ctx, tenant(ctx), req.Queue, partition)
	switch msg, invalid := invalidMessage(err); {
	case invalid:
		return badRequest[api.ClearQueue400JSONResponse](msg), nil
	case errors.Is(err, broker.ErrPartitionNotFound):
		return notFound[api.ClearQueue404JSONResponse]("Partition not found"), nil
	case errors.Is(err, broker.ErrNotFound):
		return notFound[api.ClearQueue404JSONResponse]("Queue not found"), nil
	case err != nil:
		return nil, err
	}
	return api.ClearQueue200JSONResponse{
		Success: true, Queue: req.Queue, Partition: partition,
		PartitionsDeleted: int(res.Partitions), MessagesDeleted: int(res.Messages),
	}, nil
}
