package handlers

import (
	"context"
	"sync"
	"time"
)

// coalescer commits concurrent requests of one kind together: one
// transaction per flush instead of one per request (group commit). On
// PostgreSQL the commit is the unit of cost, so under load many requests
// share one.
//
// There is no timer: a flusher takes the first waiting request and whatever
// else is already queued, up to maxItems, and commits at once. An idle broker
// adds no latency; a busy one batches more because requests queue up while
// the previous flush commits. Several flushers run so that one collects
// while another commits. If a shared flush fails, each request is retried in
// its own transaction so that a bad request fails alone.
type coalescer[I, O any] struct {
	// commit stores items in one transaction, one output per item in order.
	commit   func(ctx context.Context, items []I) ([]O, error)
	in       chan *coalescedJob[I, O]
	maxItems int
	timeout  time.Duration

	stopOnce sync.Once
	wg       sync.WaitGroup
}

type coalescedJob[I, O any] struct {
	items []I
	done  chan coalescedResult[O] // buffered: a flusher never blocks on it
}

type coalescedResult[O any] struct {
	out []O
	err error
}

func newCoalescer[I, O any](flushers, maxItems int, commit func(context.Context, []I) ([]O, error)) *coalescer[I, O] {
	c := &coalescer[I, O]{commit: commit, in: make(chan *coalescedJob[I, O], 4*flushers), maxItems: maxItems, timeout: 30 * time.Second}
	for range flushers {
		c.wg.Add(1)
		go c.run()
	}
	return c
}

func newJob[I, O any](items []I) *coalescedJob[I, O] {
	return &coalescedJob[I, O]{items: items, done: make(chan coalescedResult[O], 1)}
}

// submit queues items and waits for their flush. A request whose client
// went away before it was queued is not applied.
func (c *coalescer[I, O]) submit(ctx context.Context, items []I) ([]O, error) {
	job := newJob[I, O](items)
	select {
	case c.in <- job:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once queued the flush happens whatever the client does, so the answer
	// is always awaited: the items may be committed.
	r := <-job.done
	return r.out, r.err
}

// stop flushes what is queued and ends the flushers. Callers must not submit
// after stop; the HTTP server is shut down first. Idempotent.
func (c *coalescer[I, O]) stop() {
	c.stopOnce.Do(func() { close(c.in) })
	c.wg.Wait()
}

func (c *coalescer[I, O]) run() {
	defer c.wg.Done()
	for first := range c.in {
		jobs := []*coalescedJob[I, O]{first}
		n := len(first.items)
	collect:
		for n < c.maxItems {
			select {
			case j, ok := <-c.in:
				if !ok {
					break collect
				}
				jobs = append(jobs, j)
				n += len(j.items)
			default:
				break collect
			}
		}
		c.flush(jobs, n)
	}
}

func (c *coalescer[I, O]) flush(jobs []*coalescedJob[I, O], n int) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if len(jobs) > 1 {
		all := make([]I, 0, n)
		for _, j := range jobs {
			all = append(all, j.items...)
		}
		if out, err := c.commit(ctx, all); err == nil {
			for _, j := range jobs {
				j.done <- coalescedResult[O]{out: out[:len(j.items):len(j.items)]}
				out = out[len(j.items):]
			}
			return
		}
	}
	for _, j := range jobs {
		out, err := c.commit(ctx, j.items)
		j.done <- coalescedResult[O]{out, err}
	}
}
