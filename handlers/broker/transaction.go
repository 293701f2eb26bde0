package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
)

// TransactionMaxItems is the most pushes and acks one transaction holds.
const TransactionMaxItems = 1000

// TxResult is a transaction's outcome. When an ack is refused everything is
// rolled back: Refused is that ack's result and nothing else is set.
type TxResult struct {
	Refused *AckResult
	Pushes  []PushResult // one per push, in order
	Acks    []AckResult  // one per ack, in order
}

// errRollback carries the ack that rolled a transaction back on purpose.
type errRollback struct{ ack AckResult }

func (e errRollback) Error() string { return "ack refused: " + e.ack.Refused.Error() }

// Transact applies acks, then pushes, in one PostgreSQL transaction: all or
// nothing. Failed and dlq acks dead-letter at once; pushes dedup like Push.
func (b *Broker) Transact(ctx context.Context, tenant string, pushes []PushItem, acks []AckItem) (TxResult, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return TxResult{}, err
	}
	if len(pushes)+len(acks) > TransactionMaxItems {
		return TxResult{}, invalid(fmt.Sprintf("a transaction holds at most %d items", TransactionMaxItems))
	}
	for i := range pushes {
		pushes[i].tenant = tenant
	}
	for i := range acks {
		acks[i].tenant = tenant
		normalizeAck(&acks[i])
	}
	keys := distinctQueues(pushes)
	var res TxResult
	err = b.withQueues(ctx, keys, func(queues map[QueueKey]db.QueenQueue) error {
		res = TxResult{}
		return b.transact(ctx, queues, pushes, acks, &res)
	})
	var rb errRollback
	if errors.As(err, &rb) {
		return TxResult{Refused: &rb.ack}, nil
	}
	if err != nil {
		return TxResult{}, fmt.Errorf("transaction: %w", err)
	}
	if len(keys) > 0 {
		b.notify.QueuesReady(keys)
	}
	b.announceReleased(acks, res.Acks)
	b.recordTransaction(pushes, res.Pushes, acks, res.Acks)
	return res, nil
}

// transact is the transaction of Transact: acks first (cursors before
// partitions, the broker's lock order), a refused ack rolls it back.
func (b *Broker) transact(ctx context.Context, queues map[QueueKey]db.QueenQueue, pushes []PushItem, acks []AckItem, res *TxResult) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		if len(acks) > 0 {
			if res.Acks, err = applyAcks(ctx, b.q.WithTx(tx), acks, ackTransactional, b.delivered); err != nil {
				return err
			}
			for _, r := range res.Acks {
				if !r.Applied() {
					return errRollback{r}
				}
			}
		}
		if len(pushes) > 0 {
			res.Pushes, err = b.insertMessages(ctx, tx, queues, pushes, false)
		}
		return err
	})
}
