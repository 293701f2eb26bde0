package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/sql/pgerr"
)

// Ack applies acknowledgements, committed together with concurrent acks
// (group commit), and announces the queues where a lease was released. One
// result per item, in input order.
func (b *Broker) Ack(ctx context.Context, tenant string, items []AckItem) ([]AckResult, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []AckResult{}, nil
	}
	for i := range items {
		items[i].tenant = tenant
		normalizeAck(&items[i])
	}
	start := time.Now()
	res, err := b.acker.submit(ctx, items)
	b.timed.Ack(time.Since(start))
	if err != nil {
		return nil, pgerr.Translate(err)
	}
	b.rec.Request(metrics.OpAck)
	b.recordAcked(items, res)
	return res, nil
}

// normalizeAck applies the defaults of an acknowledgement.
func normalizeAck(it *AckItem) {
	if it.Status == "" || it.Status == "success" {
		it.Status = AckCompleted
	}
	if it.Group == "" {
		it.Group = QueueModeGroup
	}
}

// ackDirect applies items in one transaction (the group commit's commit
// function): whole remembered batches in one statement (ack_whole.go),
// anything else through applyAcks.
func (b *Broker) ackDirect(ctx context.Context, items []AckItem) ([]AckResult, error) {
	res, whole, err := b.ackWhole(ctx, items)
	if err == nil && !whole {
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			res, err = applyAcks(ctx, b.q.WithTx(tx), items, ackNormal, b.delivered)
			return err
		})
	}
	if err != nil {
		return nil, pgerr.Translate(fmt.Errorf("ack: %w", err))
	}
	b.delivered.forget(items)
	b.announceReleased(items, res)
	return res, nil
}

// announceReleased announces the queues where an ack released a lease: the
// partition may be claimable again (a retry, or the rest of a batch).
func (b *Broker) announceReleased(items []AckItem, res []AckResult) {
	var keys []QueueKey
	seen := map[QueueKey]bool{}
	for i, r := range res {
		if !r.LeaseReleased || r.Queue == "" {
			continue
		}
		k := key(items[i].tenant, r.Queue)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		b.notify.QueuesReady(keys)
	}
}

// applyAcks applies items inside the caller's transaction and returns one
// result per item in input order. Items are applied per cursor, oldest
// message first (cursor.go), and dead letters are written by one writer
// (dead_letter.go). mem, when not nil, is what this broker remembers of its
// pops' deliveries (delivered.go).
func applyAcks(ctx context.Context, q *db.Queries, items []AckItem, mode ackMode, mem *deliveries) ([]AckResult, error) {
	results := make([]AckResult, len(items))
	for i, it := range items {
		results[i] = AckResult{TransactionID: it.TransactionID}
	}
	// The lookup is the tenant check: a key whose partition is another
	// tenant's finds nothing and is refused as not found (items of several
	// tenants share a group commit); what mem remembers is keyed by the
	// popping tenant too.
	msgs, found, vacant, err := findAcked(ctx, q, items, mem)
	if err != nil {
		return nil, err
	}

	var keys []cursorKey
	seen := map[cursorKey]bool{}
	for i, it := range items {
		if !found[i] {
			continue
		}
		if ck := (cursorKey{it.PartitionID, it.Group}); !seen[ck] {
			seen[ck] = true
			keys = append(keys, ck)
		}
	}
	cursors, err := lockCursors(ctx, q, keys)
	if err != nil {
		return nil, err
	}
	if err := recheckRemembered(ctx, q, items, msgs, found, vacant, cursors); err != nil {
		return nil, err
	}
	var order []int
	for i := range items {
		if !found[i] {
			results[i].Refused = ErrNotFound
			continue
		}
		results[i].Queue, results[i].Partition = msgs[i].QueueName, msgs[i].PartitionName
		order = append(order, i)
	}

	slices.SortStableFunc(order, func(a, b int) int {
		ia, ib := items[a], items[b]
		if c := slices.Compare(ia.PartitionID[:], ib.PartitionID[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(ia.Group, ib.Group); c != 0 {
			return c
		}
		return cmp.Compare(msgs[a].Seq, msgs[b].Seq)
	})

	var dead deadLetters
	for _, i := range order {
		it := items[i]
		m := msgs[i]
		c := cursors[cursorKey{it.PartitionID, it.Group}]
		res := &results[i]
		if c == nil {
			// The group never claimed this partition: nothing to move, as
			// in the reference broker.
			res.LeaseReleased = true
			continue
		}
		if err := c.checkLease(it.LeaseID); err != nil {
			res.Refused = err
			continue
		}
		step := c.ack(m.Seq, m.ID, it.Status, mode)
		if step.refused != nil {
			res.Refused = step.refused
			continue
		}
		res.LeaseReleased = step.released
		if step.deadLetter {
			reason := it.Error
			if reason == "" {
				if it.Status == AckFailed {
					reason = "Retries exhausted"
				} else {
					reason = "Moved to dead-letter queue"
				}
			}
			dead.add(m.ID, m.PartitionID, m.CreatedAt, it.Group, reason, step.deadRetries)
			res.DeadLettered = true
		}
	}
	if err := writeCursors(ctx, q, cursors); err != nil {
		return nil, err
	}
	if err := dead.write(ctx, q); err != nil {
		return nil, err
	}
	return results, nil
}
