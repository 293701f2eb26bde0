// Package aggcache keeps the answers of expensive read-only aggregates for a
// few seconds. The dashboard polls the same counts every few seconds, and on
// a database of 100,000 partitions one of them costs up to seconds of
// PostgreSQL time (docs/benchmarks.md, "Performance round 2: deep
// backlog"). An answer that was cheap to compute is never kept, so small
// databases always answer live; an expensive one is served from memory and
// recomputed in the background (stale-while-revalidate), so the caller
// never waits for the aggregate once it has been computed once.
package aggcache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Config tunes a Cache; zero fields take ConfigDefault's values.
type Config struct {
	// MinCost: an answer that took less than this to compute is not kept.
	MinCost time.Duration
	// Fresh: a kept answer younger than this, or than twice what it cost,
	// is served as it is. The second bound keeps the recomputations of one
	// answer below half of one database core, however often it is asked.
	Fresh time.Duration
	// MaxAge: a kept answer between Fresh and MaxAge old is served, and one
	// recomputation starts in the background; an older one is dropped and
	// the caller computes the answer itself. An answer that costs more than
	// a quarter of MaxAge is kept for four times its cost instead, so that
	// its recomputation, started at twice its cost, lands before it expires.
	MaxAge time.Duration
	// RefreshTimeout bounds a background recomputation.
	RefreshTimeout time.Duration
	Logger         *slog.Logger
	// NowFunc is the clock (tests inject one).
	NowFunc func() time.Time
}

// ConfigDefault: answers costing 50 ms or more are kept; a poll finds the
// answer of the previous poll while the next one is computed. MaxAge is
// long so that opening a page after a pause (nobody polled for minutes)
// also gets an answer at once, at most 5 minutes old, and the page's next
// refresh the recomputed one; only after a longer pause, or when the broker
// has just started, does the first request wait for the computation.
var ConfigDefault = Config{
	MinCost:        50 * time.Millisecond,
	Fresh:          time.Second,
	MaxAge:         5 * time.Minute,
	RefreshTimeout: time.Minute,
}

// ErrDontKeep, returned by a computation with its answer, hands the answer
// to the caller without keeping it (an answer too large to hold).
var ErrDontKeep = errors.New("answer not to be kept")

// Cache maps a key (a route and its arguments) to its last expensive
// answer. A nil *Cache keeps nothing: every Get computes.
type Cache struct {
	cfg     Config
	mu      sync.Mutex
	entries map[string]*entry
	gen     uint64         // bumped by Clear: answers computed before are not kept
	running sync.WaitGroup // background recomputations
}

type entry struct {
	value      any
	at         time.Time     // when its computation started
	cost       time.Duration // how long it took
	refreshing bool
}

// New returns an empty cache.
func New(cfg Config) *Cache {
	d := ConfigDefault
	if cfg.MinCost <= 0 {
		cfg.MinCost = d.MinCost
	}
	if cfg.Fresh <= 0 {
		cfg.Fresh = d.Fresh
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = d.MaxAge
	}
	if cfg.RefreshTimeout <= 0 {
		cfg.RefreshTimeout = d.RefreshTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Cache{cfg: cfg, entries: map[string]*entry{}}
}

// Get answers key from the cache when it holds an answer younger than
// MaxAge (starting one background recomputation when it is older than
// Fresh), else computes it with fn and keeps it if that took MinCost or
// more. fn must only read: it may run in the background, with ctx's values
// but not its cancellation. Errors are never kept.
func Get[T any](c *Cache, ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	if c == nil {
		return fn(ctx)
	}
	now := c.cfg.NowFunc()
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		if age := now.Sub(e.at); age < max(c.cfg.MaxAge, 4*e.cost) {
			v, isT := e.value.(T)
			if isT {
				if age >= max(c.cfg.Fresh, 2*e.cost) && !e.refreshing {
					e.refreshing = true
					c.running.Add(1)
					go c.refresh(ctx, key, e, c.gen, func(ctx context.Context) (any, error) { return fn(ctx) })
				}
				c.mu.Unlock()
				return v, nil
			}
		}
		delete(c.entries, key)
	}
	gen := c.gen
	c.mu.Unlock()
	start := c.cfg.NowFunc()
	v, err := fn(ctx)
	switch {
	case errors.Is(err, ErrDontKeep):
		return v, nil
	case err == nil:
		c.store(key, v, start, gen)
	}
	return v, err
}

// refresh recomputes key in the background for the entry old.
func (c *Cache) refresh(ctx context.Context, key string, old *entry, gen uint64, fn func(context.Context) (any, error)) {
	defer c.running.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RefreshTimeout)
	defer cancel()
	start := c.cfg.NowFunc()
	v, err := fn(ctx)
	if errors.Is(err, ErrDontKeep) {
		c.mu.Lock()
		if c.entries[key] == old {
			delete(c.entries, key) // the next request computes it live
		}
		c.mu.Unlock()
		return
	}
	if err != nil {
		c.cfg.Logger.Warn("aggregate refresh failed", "key", key, "error", err)
		c.mu.Lock()
		old.refreshing = false // the next stale hit tries again
		c.mu.Unlock()
		return
	}
	c.store(key, v, start, gen)
}

// store keeps v if it cost MinCost or more, and otherwise forgets key, so
// that an aggregate that became cheap is live again; an answer whose
// computation started before a Clear is dropped. It also drops every answer
// past MaxAge, so keys nobody asks for any more do not pile up.
func (c *Cache) store(key string, v any, start time.Time, gen uint64) {
	now := c.cfg.NowFunc()
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	for k, e := range c.entries {
		if now.Sub(e.at) >= max(c.cfg.MaxAge, 4*e.cost) {
			delete(c.entries, k)
		}
	}
	if now.Sub(start) < c.cfg.MinCost {
		delete(c.entries, key)
		return
	}
	c.entries[key] = &entry{value: v, at: start, cost: now.Sub(start)}
}

// Clear forgets every answer, also those being computed now: the next Get
// of every key computes. The admin routes that change what the aggregates
// count (a queue deleted, a cursor moved) call it, so that the dashboard's
// refresh after the change shows it.
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gen++
	clear(c.entries)
	c.mu.Unlock()
}

// Wait blocks until the background recomputations running now have
// finished: main calls it before it closes the database pool.
func (c *Cache) Wait() {
	if c != nil {
		c.running.Wait()
	}
}
