package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/planmode"
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
//
// The overview also needs its tenant's lag histogram, another pass over
// every partition; the pass over every queue can give both
// (PartitionCountsWithLagHistogram), so that the page costs one pass. The
// page's requests arrive in any order, so a pass over every queue picks
// its statement only when it has its connection, right before sending it:
// if an overview joined it by then, it gives that tenant's histogram too.
// An overview that finds a pass already sent without the histogram (or
// with another tenant's) runs its own, which the requests after it join.

// countFlights are the count passes under way.
type countFlights struct {
	mu  sync.Mutex
	all *countFlight               // the latest pass over every queue, nil when none runs
	one map[uuid.UUID]*countFlight // the passes over one queue
}

// countFlight is one count pass; rows, lag and err are set when done is
// closed.
type countFlight struct {
	done chan struct{}
	rows []db.PartitionCountsByQueueRow
	lag  lagHistogram // when withLag
	err  error

	// Under countFlights.mu: whether the pass gives tenant's lag
	// histogram too, and whether its statement was chosen (sent).
	withLag bool
	tenant  uuid.UUID
	sent    bool
}

// lagHistogram is the distribution of the lag over the (group, partition)
// pairs of a tenant's queues, in messages left and in whole seconds since
// the oldest of them.
type lagHistogram struct{ offset, time []lagCount }

// allCount runs a pass over every queue: send, called right before the
// statement goes out, says whether it is to give a tenant's lag histogram
// too (and from then on no request can ask it to).
type allCount func(send func() (withLag bool, tenant uuid.UUID)) ([]db.PartitionCountsByQueueRow, lagHistogram, error)

// join returns the pass that counts queue (uuid.Nil: every queue), running
// it with count in this goroutine when none is under way. A queue's counts
// come from the pass over every queue when one is under way: its rows
// include every other queue's, which the caller leaves out.
func (f *countFlights) join(queue uuid.UUID, count func() ([]db.PartitionCountsByQueueRow, error)) *countFlight {
	return f.joinAll(queue, false, uuid.Nil, func(send func() (bool, uuid.UUID)) ([]db.PartitionCountsByQueueRow, lagHistogram, error) {
		send()
		rows, err := count()
		return rows, lagHistogram{}, err
	})
}

// joinAll is join with a count that picks its statement when it sends it.
// withLag (queue uuid.Nil only) asks for tenant's lag histogram too: such
// a request joins the pass over every queue under way when that pass gives
// the histogram, or has not been sent yet (it then will), else runs its
// own, which the requests after it join.
func (f *countFlights) joinAll(queue uuid.UUID, withLag bool, tenant uuid.UUID, count allCount) *countFlight {
	c, run := f.enter(queue, withLag, tenant, count)
	if run != nil {
		run()
	}
	return c
}

// enter is joinAll without running the pass: it joins or registers the
// pass at once and returns, with the pass, the function that runs it when
// it is this request's to run (nil when it joined one). The overview
// enters before anything else it does, so that the page's requests that
// arrive after it find its pass.
func (f *countFlights) enter(queue uuid.UUID, withLag bool, tenant uuid.UUID, count allCount) (*countFlight, func()) {
	f.mu.Lock()
	if c := f.all; c != nil {
		switch {
		case !withLag, c.withLag && c.tenant == tenant:
			f.mu.Unlock()
			return c, nil
		case !c.withLag && !c.sent:
			c.withLag, c.tenant = true, tenant
			f.mu.Unlock()
			return c, nil
		}
	} else if c := f.one[queue]; queue != uuid.Nil && c != nil {
		f.mu.Unlock()
		return c, nil
	}
	c := f.start(queue, withLag, tenant)
	return c, func() {
		defer f.end(queue, c)
		c.rows, c.lag, c.err = count(func() (bool, uuid.UUID) {
			f.mu.Lock()
			defer f.mu.Unlock()
			c.sent = true
			return c.withLag, c.tenant
		})
	}
}

// start registers a new pass over queue (uuid.Nil: every queue); f.mu is
// held and is released.
func (f *countFlights) start(queue uuid.UUID, withLag bool, tenant uuid.UUID) *countFlight {
	c := &countFlight{done: make(chan struct{}), err: errors.New("the count pass failed"), withLag: withLag, tenant: tenant}
	if queue == uuid.Nil {
		f.all = c
	} else {
		if f.one == nil {
			f.one = map[uuid.UUID]*countFlight{}
		}
		f.one[queue] = c
	}
	f.mu.Unlock()
	return c
}

// end unregisters pass c and wakes its waiters; deferred, so that a panic
// of the count gives them the error start set.
func (f *countFlights) end(queue uuid.UUID, c *countFlight) {
	f.mu.Lock()
	if queue == uuid.Nil {
		if f.all == c { // a later pass may have taken the place
			f.all = nil
		}
	} else {
		delete(f.one, queue)
	}
	f.mu.Unlock()
	close(c.done)
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
	return s.counting.joinAll(uuid.Nil, false, uuid.Nil, s.countAll(ctx)).wait(ctx)
}

// allQueueCountsWithLag enters the pass that gives allQueueCounts and the
// lag histogram of tenant's queues (PartitionCountsWithLagHistogram),
// shared with the requests for every queue's counts that ask while it
// runs, and returns the function that waits for its result (running the
// pass first when it is this request's to run): the caller enters at once
// and waits where it reads.
func (s *Server) allQueueCountsWithLag(ctx context.Context, tenant uuid.UUID) func() ([]db.PartitionCountsByQueueRow, lagHistogram, error) {
	c, run := s.counting.enter(uuid.Nil, true, tenant, s.countAll(ctx))
	return func() ([]db.PartitionCountsByQueueRow, lagHistogram, error) {
		if run != nil {
			run()
		}
		rows, err := c.wait(ctx)
		if err != nil {
			return nil, lagHistogram{}, err
		}
		return rows, c.lag, nil
	}
}

// countAll is the pass over every queue: it takes a connection, then sends
// PartitionCountsWithLagHistogram when an overview asked for the histogram
// by then, else PartitionCountsByQueue.
func (s *Server) countAll(ctx context.Context) allCount {
	ctx = context.WithoutCancel(ctx)
	return func(send func() (bool, uuid.UUID)) ([]db.PartitionCountsByQueueRow, lagHistogram, error) {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, lagHistogram{}, err
		}
		defer conn.Release()
		q := db.New(planmode.Custom(conn))
		withLag, tenant := send()
		if !withLag {
			rows, err := q.PartitionCountsByQueue(ctx, nil)
			return rows, lagHistogram{}, err
		}
		rows, err := q.PartitionCountsWithLagHistogram(ctx, tenant)
		if err != nil {
			return nil, lagHistogram{}, err
		}
		var counts []db.PartitionCountsByQueueRow
		var lag lagHistogram
		for _, r := range rows {
			switch r.Kind {
			case "count":
				counts = append(counts, db.PartitionCountsByQueueRow{
					QueueID: r.QueueID, Partitions: r.Partitions, Total: r.Total, StoredIn: r.StoredIn,
					Pushed: r.Pushed, Pending: r.Pending, Processing: r.Processing,
				})
			case "offset":
				lag.offset = append(lag.offset, lagCount{lag: r.Lag, pairs: r.Pairs})
			case "time":
				lag.time = append(lag.time, lagCount{lag: r.Lag, pairs: r.Pairs})
			}
		}
		return counts, lag, nil
	}
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
	return countsOf(rows, dead, queueIDs), nil
}

// countsOf picks the given queues' rows of a count pass (nil: every
// queue's) and adds their dead letters.
func countsOf(rows []db.PartitionCountsByQueueRow, dead []db.PartitionDeadLetterCountsRow, queueIDs []uuid.UUID) map[uuid.UUID]msgCounts {
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
	return out
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
