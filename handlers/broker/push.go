package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
)

// Push stores items: in PostgreSQL, committed together with concurrent
// pushes (group commit), or on the disk spool when PostgreSQL cannot take
// them (spool.go). One result per item, in order. An empty push stores
// nothing and counts nothing.
func (b *Broker) Push(ctx context.Context, tenant string, items []PushItem) ([]PushResult, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []PushResult{}, nil
	}
	for i := range items {
		items[i].tenant = tenant
	}
	start := time.Now()
	defer func() { b.timed.Push(time.Since(start)) }()
	return b.pushOrSpool(ctx, tenant, items)
}

// push stores items through the group commit and counts the request.
func (b *Broker) push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	out, err := b.pusher.submit(ctx, items)
	if err == nil {
		b.rec.Request(metrics.OpPush)
		b.recordPushed(items, out)
	}
	return out, err
}

// pushDirect stores items in their own transaction (the group commit's
// commit function), and announces their queues ready. The insert is one
// statement, so it runs on the pool without BEGIN and COMMIT: one round
// trip per flush.
func (b *Broker) pushDirect(ctx context.Context, items []PushItem) ([]PushResult, error) {
	keys := distinctQueues(items)
	var out []PushResult
	err := b.withQueues(ctx, keys, func(queues map[QueueKey]db.QueenQueue) error {
		var err error
		out, err = b.insertMessages(ctx, b.pool, queues, items, true)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	b.announcePushed(keys, items, out)
	return out, nil
}

// distinctQueues is the queues items go to, in first-seen order.
func distinctQueues(items []PushItem) []QueueKey {
	seen := make(map[QueueKey]bool, 4)
	var keys []QueueKey
	for _, it := range items {
		k := key(it.tenant, it.Queue)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}
