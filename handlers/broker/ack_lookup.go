package broker

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// ackedMsg is a stored message an acknowledgement names.
type ackedMsg = db.MessageListByTransactionIDsRow

// ackedKey finds an acknowledged message: the tenant is part of it, so an
// item of one tenant never finds another tenant's row in a group commit
// that holds both.
type ackedKey struct {
	tenant uuid.UUID
	pid    uuid.UUID
	txID   string
}

// windowMinItems is the fewest items of one (partition, group) for which
// the ack reads the window after the cursor: a single ack is one probe
// either way, and a window that misses costs a second statement.
const windowMinItems = 2

// findAcked reads the messages items name: msgs[i] is items[i]'s, found[i]
// whether it exists. A popped batch is the run of messages right after its
// group's cursor, so for a (tenant, partition, group) with several items the
// next that many messages are read as one range of the (partition_id, seq)
// index (MessageListAckWindow); whatever that leaves unmatched (and every
// lone item) is probed by transactionId (MessageListByTransactionIDs). Both
// check the tenant: a key whose partition is another tenant's finds nothing.
func findAcked(ctx context.Context, q *db.Queries, items []AckItem) (msgs []ackedMsg, found []bool, err error) {
	type windowKey struct {
		tenant, pid uuid.UUID
		group       string
	}
	counts := make(map[windowKey]int32, 4)
	tenants := make([]uuid.UUID, len(items))
	for i, it := range items {
		tenants[i] = tenantUUID(it.tenant)
		counts[windowKey{tenants[i], it.PartitionID, it.Group}]++
	}
	byKey := make(map[ackedKey]ackedMsg, len(items))
	var win db.MessageListAckWindowParams
	for k, n := range counts {
		if n < windowMinItems {
			continue
		}
		win.TenantIds = append(win.TenantIds, k.tenant)
		win.PartitionIds = append(win.PartitionIds, k.pid)
		win.ConsumerGroups = append(win.ConsumerGroups, k.group)
		win.Counts = append(win.Counts, n)
	}
	if len(win.PartitionIds) > 0 {
		rows, err := q.MessageListAckWindow(ctx, win)
		if err != nil {
			return nil, nil, fmt.Errorf("read acked messages: %w", err)
		}
		for _, r := range rows {
			byKey[ackedKey{r.TenantID, r.PartitionID, r.TransactionID}] = ackedMsg(r)
		}
	}
	var look db.MessageListByTransactionIDsParams
	for i, it := range items {
		if _, ok := byKey[ackedKey{tenants[i], it.PartitionID, it.TransactionID}]; ok {
			continue
		}
		look.TenantIds = append(look.TenantIds, tenants[i])
		look.PartitionIds = append(look.PartitionIds, it.PartitionID)
		look.TransactionIds = append(look.TransactionIds, it.TransactionID)
	}
	if len(look.PartitionIds) > 0 {
		rows, err := q.MessageListByTransactionIDs(ctx, look)
		if err != nil {
			return nil, nil, fmt.Errorf("read acked messages: %w", err)
		}
		for _, r := range rows {
			byKey[ackedKey{r.TenantID, r.PartitionID, r.TransactionID}] = r
		}
	}
	msgs, found = make([]ackedMsg, len(items)), make([]bool, len(items))
	for i, it := range items {
		msgs[i], found[i] = byKey[ackedKey{tenants[i], it.PartitionID, it.TransactionID}]
	}
	return msgs, found, nil
}
