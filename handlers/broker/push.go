package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/sql/pgerr"
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
// commit function). A queue deleted by another broker while cached is
// retried once fresh.
func (b *Broker) pushDirect(ctx context.Context, items []PushItem) ([]PushResult, error) {
	for attempt := 0; ; attempt++ {
		out, err := b.pushOnce(ctx, items)
		if err != nil && attempt == 0 && errors.Is(err, pgerr.ErrForeignKey) {
			b.forgetQueues(distinctQueues(items))
			continue
		}
		return out, err
	}
}

func (b *Broker) pushOnce(ctx context.Context, items []PushItem) ([]PushResult, error) {
	keys := distinctQueues(items)
	queues, err := b.ensureQueues(ctx, keys)
	if err != nil {
		return nil, pgerr.Translate(err)
	}
	var out []PushResult
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		out, err = b.insertMessages(ctx, tx, queues, items)
		return err
	})
	if err != nil {
		return nil, pgerr.Translate(fmt.Errorf("push: %w", err))
	}
	b.notify.QueuesReady(keys)
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

// forgetQueues drops cached queue rows after a foreign-key race showed one
// of them deleted by another broker.
func (b *Broker) forgetQueues(keys []QueueKey) {
	for _, k := range keys {
		b.queues.invalidate(k)
	}
}
