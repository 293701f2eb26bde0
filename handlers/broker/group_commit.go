package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// coalescer commits concurrent requests of one kind together: one
// transaction per flush instead of one per request (group commit). On
// PostgreSQL the commit is the unit of cost, so under load many requests
// share one.
//
// There is no timer. One dispatcher goroutine collects requests and starts
// flushes:
//
//   - with no flush in flight it starts one at once with whatever waits, so
//     an idle broker adds no latency; except right after a flush ended
//     (within linger): then it waits until as many items wait as the last
//     flush took, or until linger has passed since that flush ended. The
//     requests a flush answered come back within their round trip; without
//     the wait the first of them would flush nearly alone and the rest
//     queue behind it, halving the items per commit under steady load;
//   - while flushes are in flight, requests wait and the next flush takes
//     them all, so small requests share commits (many messages per commit);
//   - but once the waiting requests hold parallelMin items or more, they are
//     already a batch worth its own commit, and a further flush starts
//     without waiting, up to maxFlushes in flight. Large pushes then use
//     several connections at once instead of queueing behind one commit.
//
// If a shared flush fails, each request is retried in its own transaction so
// that a bad request fails alone.
type coalescer[I, O any] struct {
	// commit stores items in one transaction, one output per item in order.
	commit      func(ctx context.Context, items []I) ([]O, error)
	in          chan *coalescedJob[I, O]
	maxItems    int // items per flush, at most (a larger request flushes alone)
	maxFlushes  int // flushes in flight, at most
	parallelMin int // waiting items that justify a flush beside a running one
	linger      time.Duration
	timeout     time.Duration
	// flushed, when set, is told each flush's items and duration (the
	// broker's Timings); set before start.
	flushed func(items int, d time.Duration)
	// queued counts the items the dispatcher took in, since start: a
	// test's signal that a request waits for a flush.
	queued atomic.Int64

	startOnce sync.Once
	running   chan struct{} // closed by start
	stopOnce  sync.Once
	stopping  chan struct{} // closed by stop: no new requests
	stopped   chan struct{} // closed when the dispatcher and every flush ended
}

// coalescerLimits are the knobs of a coalescer; see the type's comment.
// Linger 0 never waits.
type coalescerLimits struct {
	MaxItems    int
	MaxFlushes  int
	ParallelMin int
	Linger      time.Duration
}

type coalescedJob[I, O any] struct {
	items []I
	done  chan coalescedResult[O] // buffered: a flusher never blocks on it
}

type coalescedResult[O any] struct {
	out []O
	err error
}

// errStopped answers requests that reach a group commit that is not running.
var errStopped = fmt.Errorf("%w: the broker is not running", ErrUnavailable)

func newCoalescer[I, O any](lim coalescerLimits, commit func(context.Context, []I) ([]O, error)) *coalescer[I, O] {
	return &coalescer[I, O]{
		commit: commit, in: make(chan *coalescedJob[I, O]),
		maxItems: max(lim.MaxItems, 1), maxFlushes: max(lim.MaxFlushes, 1), parallelMin: max(lim.ParallelMin, 1),
		linger: max(lim.Linger, 0), timeout: 30 * time.Second, running: make(chan struct{}), stopping: make(chan struct{}), stopped: make(chan struct{}),
	}
}

// start runs the dispatcher. Idempotent.
func (c *coalescer[I, O]) start() {
	c.startOnce.Do(func() {
		close(c.running)
		go c.dispatch()
	})
}

func newJob[I, O any](items []I) *coalescedJob[I, O] {
	return &coalescedJob[I, O]{items: items, done: make(chan coalescedResult[O], 1)}
}

// submit queues items and waits for their flush. A request whose client
// went away before it was queued is not applied; so is one that arrives
// before start or after stop (errStopped).
func (c *coalescer[I, O]) submit(ctx context.Context, items []I) ([]O, error) {
	select {
	case <-c.running:
	default:
		return nil, errStopped
	}
	job := newJob[I, O](items)
	select {
	case c.in <- job:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stopping:
		return nil, errStopped
	}
	// Once queued the flush happens whatever the client does, so the answer
	// is always awaited: the items may be committed.
	r := <-job.done
	return r.out, r.err
}

// stop flushes what is queued and waits for every flush to end; later
// submits answer errStopped. Idempotent; a coalescer never started stops at
// once.
func (c *coalescer[I, O]) stop() {
	c.stopOnce.Do(func() { close(c.stopping) })
	select {
	case <-c.running:
		<-c.stopped
	default:
	}
}

// dispatch owns the waiting requests and the count of flushes in flight.
func (c *coalescer[I, O]) dispatch() {
	defer close(c.stopped)
	var (
		waiting  []*coalescedJob[I, O]
		items    int // items in waiting
		inFlight int
		in       = c.in // nil once stopping
		stopping = c.stopping
		lastN    int              // items of the last flush started
		idleAt   time.Time        // when the flushes in flight last reached none
		hold     *time.Timer      // set while a flush waits out the linger
		held     <-chan time.Time // hold's channel, nil when none
	)
	finished := make(chan struct{}, c.maxFlushes)
	// mayStart says whether a flush of what waits starts now.
	mayStart := func() bool {
		if inFlight > 0 {
			return items >= c.parallelMin
		}
		return items >= lastN || in == nil || time.Since(idleAt) >= c.linger
	}
	for {
		for len(waiting) > 0 && inFlight < c.maxFlushes && mayStart() {
			if held != nil {
				hold.Stop()
				held = nil
			}
			batch, n := c.take(waiting)
			lastN = n
			waiting, items = waiting[len(batch):], items-n
			if len(waiting) == 0 {
				waiting = nil // let the flushed jobs' array go
			}
			inFlight++
			go func() {
				c.flush(batch, n)
				finished <- struct{}{}
			}()
		}
		if in == nil && len(waiting) == 0 && inFlight == 0 {
			return
		}
		if len(waiting) > 0 && inFlight == 0 && held == nil {
			// Held by the linger: wake up when it ends.
			hold = time.NewTimer(c.linger - time.Since(idleAt))
			held = hold.C
		}
		select {
		case j := <-in:
			waiting = append(waiting, j)
			items += len(j.items)
			c.queued.Add(int64(len(j.items)))
		case <-stopping:
			in, stopping = nil, nil
		case <-finished:
			inFlight--
			if inFlight == 0 {
				idleAt = time.Now()
			}
		case <-held:
			held = nil
		}
	}
}

// take returns the oldest waiting jobs that fit in one flush (always at
// least one) and their item count.
func (c *coalescer[I, O]) take(waiting []*coalescedJob[I, O]) ([]*coalescedJob[I, O], int) {
	n, k := len(waiting[0].items), 1
	for k < len(waiting) && n+len(waiting[k].items) <= c.maxItems {
		n += len(waiting[k].items)
		k++
	}
	return waiting[:k:k], n
}

func (c *coalescer[I, O]) flush(jobs []*coalescedJob[I, O], n int) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	results := make([]coalescedResult[O], len(jobs))
	c.commitAll(ctx, jobs, n, results)
	// The flush is recorded before any job is answered: a client that
	// reads the metrics after its answer finds its flush there.
	if c.flushed != nil {
		c.flushed(n, time.Since(start))
	}
	for i, j := range jobs {
		j.done <- results[i]
	}
}

// commitAll commits the jobs together, or one by one after a failed shared
// commit, and fills in each job's result.
func (c *coalescer[I, O]) commitAll(ctx context.Context, jobs []*coalescedJob[I, O], n int, results []coalescedResult[O]) {
	if len(jobs) > 1 {
		all := make([]I, 0, n)
		for _, j := range jobs {
			all = append(all, j.items...)
		}
		if out, err := c.commit(ctx, all); err == nil {
			for i, j := range jobs {
				results[i] = coalescedResult[O]{out: out[:len(j.items):len(j.items)]}
				out = out[len(j.items):]
			}
			return
		}
	}
	for i, j := range jobs {
		out, err := c.commit(ctx, j.items)
		results[i] = coalescedResult[O]{out, err}
	}
}
