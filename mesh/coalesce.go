package mesh

import (
	"context"
	"sync"
	"time"
)

// coalescer gathers ready queue names per tenant and hands them to flush in
// batches. The first announcement after a quiet spell goes out at once (no
// added latency for a lone push); while announcements keep coming, they go
// out at most once per window, many queues per frame.
type coalescer struct {
	window time.Duration
	flush  func(tenant string, queues []string)
	kick   chan struct{}

	mu      sync.Mutex
	pending map[string]map[string]struct{} // tenant → queue names
}

func newCoalescer(window time.Duration, flush func(string, []string)) *coalescer {
	return &coalescer{
		window:  window,
		flush:   flush,
		kick:    make(chan struct{}, 1),
		pending: make(map[string]map[string]struct{}),
	}
}

// add records queues; it takes a short lock and never waits for I/O.
func (c *coalescer) add(tenant string, queues []string) {
	c.mu.Lock()
	set := c.pending[tenant]
	for _, q := range queues {
		if q == "" {
			continue
		}
		if set == nil {
			set = make(map[string]struct{}, len(queues))
			c.pending[tenant] = set
		}
		set[q] = struct{}{}
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// take empties the pending sets.
func (c *coalescer) take() map[string]map[string]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	p := c.pending
	c.pending = make(map[string]map[string]struct{})
	return p
}

func (c *coalescer) run(ctx context.Context) {
	t := time.NewTimer(c.window)
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		for tenant, set := range c.take() {
			c.flush(tenant, sortedKeys(set))
		}
		// Whatever arrives now waits for the window to close, and then
		// leaves in one go.
		t.Reset(c.window)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
