package handlers

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// The dashboard's overview page asks for the overview, the status, the
// queue listing and the consumer groups at once, and the first three sum
// the same per-queue counts: one pass over every partition each. Those
// passes are shared: while one is running, a request that needs every
// queue's counts waits for it instead of starting its own (nothing is
// kept after it ends; the answer cache is what keeps answers).

// allQueueCounts are every queue's partition counts (PartitionCountsByQueue
// over every queue, dead letters not included), computed once for the
// requests that ask while it runs. The computation does not stop when the
// request that started it goes away: the others wait on it.
func (s *Server) allQueueCounts(ctx context.Context) ([]db.PartitionCountsByQueueRow, error) {
	v, err, _ := s.counting.Do("all", func() (any, error) {
		return s.aq().PartitionCountsByQueue(context.WithoutCancel(ctx), nil)
	})
	if err != nil {
		return nil, fmt.Errorf("count messages: %w", err)
	}
	return v.([]db.PartitionCountsByQueueRow), nil
}

// queueCounts sums the partitions of the given queues, per queue; nil reads
// every queue of every tenant. Queues without partitions are absent. One
// queue is counted on its own (a range of its partitions); more share the
// pass over every partition (allQueueCounts).
func (s *Server) queueCounts(ctx context.Context, queueIDs []uuid.UUID) (map[uuid.UUID]msgCounts, error) {
	if queueIDs != nil && len(queueIDs) == 0 {
		return map[uuid.UUID]msgCounts{}, nil
	}
	var rows []db.PartitionCountsByQueueRow
	var err error
	if len(queueIDs) == 1 {
		if rows, err = s.aq().PartitionCountsByQueue(ctx, queueIDs); err != nil {
			return nil, fmt.Errorf("count messages: %w", err)
		}
	} else if rows, err = s.allQueueCounts(ctx); err != nil {
		return nil, err
	}
	dead, err := s.aq().PartitionDeadLetterCounts(ctx, queueIDs)
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	wanted := map[uuid.UUID]bool{}
	for _, id := range queueIDs {
		wanted[id] = true
	}
	out := make(map[uuid.UUID]msgCounts, len(rows))
	for _, r := range rows {
		if queueIDs != nil && !wanted[r.QueueID] {
			continue
		}
		out[r.QueueID] = msgCounts{
			partitions: int(r.Partitions), total: r.Total, pending: r.Pending, processing: r.Processing,
		}
	}
	for _, d := range dead {
		if c, ok := out[d.QueueID]; ok {
			c.deadLetter = d.DeadLetter
			out[d.QueueID] = c
		}
	}
	return out, nil
}

// allQueueCountsByID is allQueueCounts by queue id, with the pending total
// over every queue (pendingTotal).
func (s *Server) allQueueCountsByID(ctx context.Context) (map[uuid.UUID]db.PartitionCountsByQueueRow, int64, error) {
	counts, err := s.allQueueCounts(ctx)
	if err != nil {
		return nil, 0, err
	}
	byQueue := make(map[uuid.UUID]db.PartitionCountsByQueueRow, len(counts))
	var pending int64
	for _, c := range counts {
		byQueue[c.QueueID] = c
		pending += c.Pending
	}
	return byQueue, pending, nil
}

// pendingTotal is what the queue-mode group has not consumed, over every
// partition of every queue (a queue it never read pends whole).
func (s *Server) pendingTotal(ctx context.Context) (int64, error) {
	_, pending, err := s.allQueueCountsByID(ctx)
	return pending, err
}
