package handlers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/queenforgo/queen/gen/db"
)

// queueCache keeps recently used queue rows so that a push or pop does not
// read the queue row every time. Entries expire after ttl so that option
// changes made through another broker are picked up; this broker's own
// configure and delete invalidate at once.
type queueCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[string]cachedQueue
}

type cachedQueue struct {
	row    db.QueenQueue
	loaded time.Time
}

func newQueueCache(ttl time.Duration) *queueCache {
	return &queueCache{ttl: ttl, m: make(map[string]cachedQueue)}
}

func (c *queueCache) get(name string) (db.QueenQueue, bool) {
	c.mu.RLock()
	e, ok := c.m[name]
	c.mu.RUnlock()
	if !ok || time.Since(e.loaded) > c.ttl {
		return db.QueenQueue{}, false
	}
	return e.row, true
}

// peek returns an entry even if it is stale (for wake-up routing only).
func (c *queueCache) peek(name string) (db.QueenQueue, bool) {
	c.mu.RLock()
	e, ok := c.m[name]
	c.mu.RUnlock()
	return e.row, ok
}

func (c *queueCache) put(q db.QueenQueue) {
	c.mu.Lock()
	c.m[q.Name] = cachedQueue{row: q, loaded: time.Now()}
	c.mu.Unlock()
}

func (c *queueCache) invalidate(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.mu.Unlock()
}

func (c *queueCache) invalidateAll() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// lookupQueue returns the queue row, or ok=false when the queue does not exist.
func (s *Server) lookupQueue(ctx context.Context, name string) (db.QueenQueue, bool, error) {
	if q, ok := s.queues.get(name); ok {
		return q, true, nil
	}
	rows, err := s.q.QueueListByNames(ctx, []string{name})
	if err != nil {
		return db.QueenQueue{}, false, fmt.Errorf("read queue %q: %w", name, err)
	}
	if len(rows) == 0 {
		return db.QueenQueue{}, false, nil
	}
	s.queues.put(rows[0])
	return rows[0], true, nil
}

// ensureQueues returns the rows of the named queues, creating missing ones
// with default options. It runs outside any caller transaction so the cache
// only ever holds committed queues.
func (s *Server) ensureQueues(ctx context.Context, names []string) (map[string]db.QueenQueue, error) {
	out := make(map[string]db.QueenQueue, len(names))
	var missing []string
	for _, n := range names {
		if q, ok := s.queues.get(n); ok {
			out[n] = q
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	load := func() error {
		rows, err := s.q.QueueListByNames(ctx, missing)
		if err != nil {
			return err
		}
		for _, r := range rows {
			s.queues.put(r)
			out[r.Name] = r
		}
		return nil
	}
	if err := load(); err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	var create, namespaces, tasks []string
	for _, n := range missing {
		if _, ok := out[n]; !ok {
			ns, task := tagsFromName(n)
			create = append(create, n)
			namespaces = append(namespaces, ns)
			tasks = append(tasks, task)
		}
	}
	if len(create) == 0 {
		return out, nil
	}
	if err := s.q.QueueInsertMany(ctx, db.QueueInsertManyParams{Names: create, Namespaces: namespaces, Tasks: tasks}); err != nil {
		return nil, fmt.Errorf("create queues: %w", err)
	}
	missing = create
	if err := load(); err != nil {
		return nil, fmt.Errorf("read created queues: %w", err)
	}
	for _, n := range create {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("queue %q vanished while being created", n)
		}
	}
	return out, nil
}

// tagsFromName derives the namespace and task of an auto-created queue as the
// reference does: the text before the first dot, and the second dotted part.
func tagsFromName(name string) (namespace, task string) {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) == 1 {
		return name, ""
	}
	return parts[0], parts[1]
}
