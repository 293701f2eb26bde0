package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// The dashboard's overview page asks for the overview, the status, the
// queue listing and the consumer groups at once, and each of them sums the
// same per-queue counts: one pass over every partition each. Those passes
// are shared: while one is running, a request that needs every queue's
// counts waits for it instead of starting its own, and so does a request
// for one queue's (the queue page's detail and partition listing arrive
// with its consumer groups, and the answer cache's recomputations of the
// page before run behind them); one queue's counts, when no pass over
// every queue is running, are shared the same way by the requests for that
// queue. Nothing is kept after a pass ends: the answer cache is what keeps
// answers.

// countFlights are the count passes under way.
type countFlights struct {
	mu  sync.Mutex
	all *countFlight               // the pass over every queue, nil when none runs
	one map[uuid.UUID]*countFlight // the passes over one queue
}

// countFlight is one count pass; rows and err are set when done is closed.
type countFlight struct {
	done chan struct{}
	rows []db.PartitionCountsByQueueRow
	err  error
}

// join returns the pass that counts queue (uuid.Nil: every queue), running
// it with count in this goroutine when none is under way. A queue's counts
// come from the pass over every queue when one is under way: its rows
// include every other queue's, which the caller leaves out.
func (f *countFlights) join(queue uuid.UUID, count func() ([]db.PartitionCountsByQueueRow, error)) *countFlight {
	f.mu.Lock()
	if c := f.all; c != nil {
		f.mu.Unlock()
		return c
	}
	if c := f.one[queue]; queue != uuid.Nil && c != nil {
		f.mu.Unlock()
		return c
	}
	c := &countFlight{done: make(chan struct{}), err: errors.New("the count pass failed")}
	if queue == uuid.Nil {
		f.all = c
	} else {
		if f.one == nil {
			f.one = map[uuid.UUID]*countFlight{}
		}
		f.one[queue] = c
	}
	f.mu.Unlock()
	defer func() { // also when count panics: the waiters get the error above
		f.mu.Lock()
		if queue == uuid.Nil {
			f.all = nil
		} else {
			delete(f.one, queue)
		}
		f.mu.Unlock()
		close(c.done)
	}()
	c.rows, c.err = count()
	return c
}

// wait is the pass's result, or the context's error when it ends first
// (the pass goes on for the others).
func (c *countFlight) wait(ctx context.Context) ([]db.PartitionCountsByQueueRow, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, fmt.Errorf("count messages: %w", c.err)
	}
	return c.rows, nil
}

// allQueueCounts are every queue's partition counts (PartitionCountsByQueue
// over every queue, dead letters not included), computed once for the
// requests that ask while it runs. The computation does not stop when the
// request that started it goes away: the others wait on it.
func (s *Server) allQueueCounts(ctx context.Context) ([]db.PartitionCountsByQueueRow, error) {
	return s.counting.join(uuid.Nil, func() ([]db.PartitionCountsByQueueRow, error) {
		return s.aq().PartitionCountsByQueue(context.WithoutCancel(ctx), nil)
	}).wait(ctx)
}

// oneQueueCounts are one queue's partition counts (a range of its
// partitions), or the counts of every queue when a pass over them is under
// way (the caller picks the queue's row).
func (s *Server) oneQueueCounts(ctx context.Context, queueID uuid.UUID) ([]db.PartitionCountsByQueueRow, error) {
	return s.counting.join(queueID, func() ([]db.PartitionCountsByQueueRow, error) {
		return s.aq().PartitionCountsByQueue(context.WithoutCancel(ctx), []uuid.UUID{queueID})
	}).wait(ctx)
}

// queueCounts sums the partitions of the given queues, per queue; nil reads
// every queue of every tenant. Queues without partitions are absent. One
// queue is counted on its own (oneQueueCounts); more share the pass over
// every partition (allQueueCounts).
func (s *Server) queueCounts(ctx context.Context, queueIDs []uuid.UUID) (map[uuid.UUID]msgCounts, error) {
	if queueIDs != nil && len(queueIDs) == 0 {
		return map[uuid.UUID]msgCounts{}, nil
	}
	var rows []db.PartitionCountsByQueueRow
	var err error
	if len(queueIDs) == 1 {
		rows, err = s.oneQueueCounts(ctx, queueIDs[0])
	} else {
		rows, err = s.allQueueCounts(ctx)
	}
	if err != nil {
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
