package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// queueCache keeps recently used queue rows so that a push or pop does not
// read the queue row every time. Entries expire after ttl so that option
// changes made through a broker that announces nothing are picked up; this
// broker's own configure and delete, and QueueChanged announcements,
// invalidate at once.
type queueCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[QueueKey]cachedQueue
}

type cachedQueue struct {
	row    db.QueenQueue
	loaded time.Time
}

func newQueueCache(ttl time.Duration) *queueCache {
	return &queueCache{ttl: ttl, m: make(map[QueueKey]cachedQueue)}
}

func (c *queueCache) get(k QueueKey) (db.QueenQueue, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || time.Since(e.loaded) > c.ttl {
		return db.QueenQueue{}, false
	}
	return e.row, true
}

// peek returns an entry even if it is stale (for wake-up routing and
// metrics only).
func (c *queueCache) peek(k QueueKey) (db.QueenQueue, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	return e.row, ok
}

// peekName returns the entries of a queue name in every tenant, stale ones
// included (for announcements that name no tenant). It visits the whole
// cache, which only such rare announcements do.
func (c *queueCache) peekName(name string) map[string]db.QueenQueue {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out map[string]db.QueenQueue
	for k, e := range c.m {
		if k.Queue == name {
			if out == nil {
				out = make(map[string]db.QueenQueue, 1)
			}
			out[k.Tenant] = e.row
		}
	}
	return out
}

func (c *queueCache) put(tenant string, q db.QueenQueue) {
	c.mu.Lock()
	c.m[key(tenant, q.Name)] = cachedQueue{row: q, loaded: time.Now()}
	c.mu.Unlock()
}

func (c *queueCache) invalidate(k QueueKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// invalidateName drops a queue name's entries in every tenant.
func (c *queueCache) invalidateName(name string) {
	c.mu.Lock()
	for k := range c.m {
		if k.Queue == name {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

// lookupQueue returns the queue row, or ok=false when the queue does not exist.
func (b *Broker) lookupQueue(ctx context.Context, k QueueKey) (db.QueenQueue, bool, error) {
	if q, ok := b.queues.get(k); ok {
		return q, true, nil
	}
	rows, err := b.q.QueueListByNames(ctx, db.QueueListByNamesParams{TenantID: tenantUUID(k.Tenant), Names: []string{k.Queue}})
	if err != nil {
		return db.QueenQueue{}, false, fmt.Errorf("read queue %q: %w", k.Queue, err)
	}
	if len(rows) == 0 {
		return db.QueenQueue{}, false, nil
	}
	b.queues.put(k.Tenant, rows[0])
	return rows[0], true, nil
}

// ensureQueues returns the rows of the named queues, creating missing ones
// with default options. It runs outside any caller transaction so the cache
// only ever holds committed queues.
func (b *Broker) ensureQueues(ctx context.Context, keys []QueueKey) (map[QueueKey]db.QueenQueue, error) {
	out := make(map[QueueKey]db.QueenQueue, len(keys))
	var missing []QueueKey
	for _, k := range keys {
		if q, ok := b.queues.get(k); ok {
			out[k] = q
		} else {
			missing = append(missing, k)
		}
	}
	for len(missing) > 0 {
		// One tenant at a time: the statements read and create the queues
		// of one tenant.
		tenant := missing[0].Tenant
		var names []string
		rest := missing[:0:0]
		for _, k := range missing {
			if k.Tenant == tenant {
				names = append(names, k.Queue)
			} else {
				rest = append(rest, k)
			}
		}
		if err := b.ensureTenantQueues(ctx, tenant, names, out); err != nil {
			return nil, err
		}
		missing = rest
	}
	return out, nil
}

func (b *Broker) ensureTenantQueues(ctx context.Context, tenant string, missing []string, out map[QueueKey]db.QueenQueue) error {
	tid := tenantUUID(tenant)
	load := func() error {
		rows, err := b.q.QueueListByNames(ctx, db.QueueListByNamesParams{TenantID: tid, Names: missing})
		if err != nil {
			return err
		}
		for _, r := range rows {
			b.queues.put(tenant, r)
			out[key(tenant, r.Name)] = r
		}
		return nil
	}
	if err := load(); err != nil {
		return fmt.Errorf("read queues: %w", err)
	}
	var create, namespaces, tasks []string
	for _, n := range missing {
		if _, ok := out[key(tenant, n)]; !ok {
			ns, task := tagsFromName(n)
			create = append(create, n)
			namespaces = append(namespaces, ns)
			tasks = append(tasks, task)
		}
	}
	if len(create) == 0 {
		return nil
	}
	if err := b.q.QueueInsertMany(ctx, db.QueueInsertManyParams{TenantID: tid, Names: create, Namespaces: namespaces, Tasks: tasks}); err != nil {
		return fmt.Errorf("create queues: %w", err)
	}
	missing = create
	if err := load(); err != nil {
		return fmt.Errorf("read created queues: %w", err)
	}
	for _, n := range create {
		if _, ok := out[key(tenant, n)]; !ok {
			return fmt.Errorf("queue %q vanished while being created", n)
		}
	}
	return nil
}

// withQueues runs fn, a transaction that writes into the queues of keys,
// with their rows (created when missing). When fn fails on a foreign-key
// race, a cached queue was deleted by another broker meanwhile and fn's
// transaction rolled back: the rows are read again and fn runs once more.
// Every writer of messages goes through it.
func (b *Broker) withQueues(ctx context.Context, keys []QueueKey, fn func(queues map[QueueKey]db.QueenQueue) error) error {
	for attempt := 0; ; attempt++ {
		queues, err := b.ensureQueues(ctx, keys)
		if err != nil {
			return pgerr.Translate(err)
		}
		err = pgerr.Translate(fn(queues))
		if err != nil && attempt == 0 && errors.Is(err, pgerr.ErrForeignKey) {
			for _, k := range keys {
				b.queues.invalidate(k)
			}
			continue
		}
		return err
	}
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

// KnownQueue reports a queue this broker has seen exist. Per-queue counters
// are kept only for those, so pops on made-up names cannot grow the
// metrics registry.
func (b *Broker) KnownQueue(k QueueKey) bool {
	if k.Queue == "" {
		return false
	}
	_, ok := b.queues.peek(k)
	return ok
}
