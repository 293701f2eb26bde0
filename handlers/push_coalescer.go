package handlers

import (
	"context"
	"sync"
	"time"
)

// pushCoalescer commits concurrent push requests together: one transaction
// per flush instead of one per request (group commit). On PostgreSQL the
// commit is the unit of cost, so under load many requests share one.
//
// There is no timer: a flusher takes the first waiting request and whatever
// else is already queued, up to maxItems, and commits at once. An idle broker
// adds no latency; a busy one batches more because requests queue up while
// the previous flush commits. Several flushers run so that one collects
// while another commits.
type pushCoalescer struct {
	s        *Server
	in       chan *pushJob
	maxItems int
	timeout  time.Duration

	stopOnce sync.Once
	wg       sync.WaitGroup
}

type pushJob struct {
	items []pushItem
	done  chan pushJobResult // buffered: a flusher never blocks on it
}

type pushJobResult struct {
	out []pushOutcome
	err error
}

func newPushCoalescer(s *Server, flushers, maxItems int) *pushCoalescer {
	c := &pushCoalescer{s: s, in: make(chan *pushJob, 4*flushers), maxItems: maxItems, timeout: 30 * time.Second}
	for range flushers {
		c.wg.Add(1)
		go c.run()
	}
	return c
}

// submit queues items and waits for their flush. A request whose client
// went away before it was queued is not stored.
func (c *pushCoalescer) submit(ctx context.Context, items []pushItem) ([]pushOutcome, error) {
	job := &pushJob{items: items, done: make(chan pushJobResult, 1)}
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
func (c *pushCoalescer) stop() {
	c.stopOnce.Do(func() { close(c.in) })
	c.wg.Wait()
}

func (c *pushCoalescer) run() {
	defer c.wg.Done()
	for first := range c.in {
		jobs := []*pushJob{first}
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

// flush commits jobs in one transaction. If that fails, each job is retried
// in its own transaction so that one bad request fails only itself.
func (c *pushCoalescer) flush(jobs []*pushJob, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if len(jobs) == 1 {
		out, err := c.s.pushDirect(ctx, jobs[0].items)
		jobs[0].done <- pushJobResult{out, err}
		return
	}
	all := make([]pushItem, 0, n)
	for _, j := range jobs {
		all = append(all, j.items...)
	}
	out, err := c.s.pushOnce(ctx, all)
	if err != nil {
		for _, j := range jobs {
			out, err := c.s.pushDirect(ctx, j.items)
			j.done <- pushJobResult{out, err}
		}
		return
	}
	for _, j := range jobs {
		j.done <- pushJobResult{out: out[:len(j.items):len(j.items)]}
		out = out[len(j.items):]
	}
}
