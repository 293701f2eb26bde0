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
//
// With mem, what this broker remembers of its pops' deliveries is taken
// first, without reading (delivered.go): vacant[i] is then the partition's
// count of deleted messages when the pop read it, which the caller must
// check against the locked cursor's (recheckRemembered); -1 where items[i]
// was read.
func findAcked(ctx context.Context, q *db.Queries, items []AckItem, mem *deliveries) (msgs []ackedMsg, found []bool, vacant []int64, err error) {
	type windowKey struct {
		tenant, pid uuid.UUID
		group       string
	}
	msgs, found, vacant = make([]ackedMsg, len(items)), make([]bool, len(items)), make([]int64, len(items))
	counts := make(map[windowKey]int32, 4)
	tenants := make([]uuid.UUID, len(items))
	left := 0
	for i, it := range items {
		tenants[i] = tenantUUID(it.tenant)
		vacant[i] = -1
		if mem != nil {
			if m, ok := mem.lookup(deliveredKey{tenants[i], it.PartitionID, it.TransactionID}); ok {
				msgs[i], found[i], vacant[i] = m.msg, true, m.vacant
				continue
			}
		}
		left++
		counts[windowKey{tenants[i], it.PartitionID, it.Group}]++
	}
	if left == 0 {
		return msgs, found, vacant, nil
	}
	byKey := make(map[ackedKey]ackedMsg, left)
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
			return nil, nil, nil, fmt.Errorf("read acked messages: %w", err)
		}
		for _, r := range rows {
			byKey[ackedKey{r.TenantID, r.PartitionID, r.TransactionID}] = ackedMsg(r)
		}
	}
	var look db.MessageListByTransactionIDsParams
	for i, it := range items {
		if found[i] {
			continue
		}
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
			return nil, nil, nil, fmt.Errorf("read acked messages: %w", err)
		}
		for _, r := range rows {
			byKey[ackedKey{r.TenantID, r.PartitionID, r.TransactionID}] = r
		}
	}
	for i, it := range items {
		if vacant[i] < 0 {
			msgs[i], found[i] = byKey[ackedKey{tenants[i], it.PartitionID, it.TransactionID}]
		}
	}
	return msgs, found, vacant, nil
}

// recheckRemembered reads again the remembered messages (vacant[i] >= 0)
// that the locked cursors cannot vouch for: where the partition's count of
// deleted messages moved since the pop (a message may be gone), or where
// the group's cursor row is absent (the partition, or the group's cursors,
// were deleted). Their cursor rows are already locked (or absent), so
// nothing more is locked.
func recheckRemembered(ctx context.Context, q *db.Queries, items []AckItem, msgs []ackedMsg, found []bool, vacant []int64, cursors map[cursorKey]*cursor) error {
	var again []int
	for i, v := range vacant {
		if v < 0 {
			continue
		}
		if c := cursors[cursorKey{items[i].PartitionID, items[i].Group}]; c == nil || c.row.VacantSeqs != v {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return nil
	}
	sub := make([]AckItem, len(again))
	for j, i := range again {
		sub[j] = items[i]
	}
	m, f, _, err := findAcked(ctx, q, sub, nil)
	if err != nil {
		return err
	}
	for j, i := range again {
		msgs[i], found[i], vacant[i] = m[j], f[j], -1
	}
	return nil
}
