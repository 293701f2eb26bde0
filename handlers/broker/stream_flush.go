package broker

import (
	"context"
	"fmt"

	"github.com/queenforgo/queen/gen/db"
)

// Closing cycles: the streaming SDKs close a quiet window with a cycle that
// has no ack and deletes the window's state key while pushing its total (the
// idle flush). The flush runs beside the runner's regular cycles and reads
// the state on its own, so both can close the same window from the same
// read, and the second to commit would emit it again; or the flush can
// commit between a regular cycle's read and its commit, and the window comes
// back. The broker cannot tell what a cycle read, so a closing cycle is
// applied only when nothing can have changed what it closes, and otherwise
// skipped whole: nothing written, no sink message, answered success with the
// reason. The windows it meant to close stay stored, and the next flush or
// regular cycle, reading afresh, closes them. docs/streams.md has the
// reasoning.

// Why a closing cycle was skipped (CycleResult.Skipped).
const (
	// SkipShardBusy: another cycle of the same state shard was being
	// applied; it may be changing the keys the flush read.
	SkipShardBusy = "shard_busy"
	// SkipLeaseHeld: the consumer group holds a live lease on the source
	// partition: a regular cycle is on its way and may have read the state
	// before this flush would commit (a gate keeps its lease on purpose).
	SkipLeaseHeld = "lease_held"
	// SkipAlreadyClosed: a key the cycle deletes is no longer stored:
	// another cycle closed that window already.
	SkipAlreadyClosed = "already_closed"
)

// finalOps is the effect of ops applied in order: the keys whose last op
// deletes them and the last upsert of every other key.
func finalOps(ops []StateOp) (deletes []string, upserts []StateOp) {
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		last[op.Key] = i
	}
	for i, op := range ops {
		switch {
		case last[op.Key] != i:
		case op.Delete:
			deletes = append(deletes, op.Key)
		default:
			upserts = append(upserts, op)
		}
	}
	return deletes, upserts
}

// lockShard takes the shard lock for c. A closing cycle (no ack, deletes)
// only tries it and then checks the source lease and the keys it deletes;
// a non-empty answer says why it must be skipped, with nothing written.
func lockShard(ctx context.Context, q *db.Queries, c StreamCycle) (string, error) {
	deletes, _ := finalOps(c.Ops)
	if c.Ack != nil || len(deletes) == 0 {
		if err := q.StreamStateLockShard(ctx, db.StreamStateLockShardParams{QueryID: c.QueryID, PartitionID: c.PartitionID}); err != nil {
			return "", fmt.Errorf("lock state shard: %w", err)
		}
		return "", nil
	}
	locked, err := q.StreamStateTryLockShard(ctx, db.StreamStateTryLockShardParams{QueryID: c.QueryID, PartitionID: c.PartitionID})
	if err != nil {
		return "", fmt.Errorf("lock state shard: %w", err)
	}
	if !locked {
		return SkipShardBusy, nil
	}
	// The cursor row stays locked until the flush commits, so a pop cannot
	// take the lease and read the state in between.
	k := cursorKey{c.PartitionID, c.Group}
	cursors, err := lockCursors(ctx, q, []cursorKey{k})
	if err != nil {
		return "", err
	}
	if cur := cursors[k]; cur != nil && cur.leaseHeld {
		return SkipLeaseHeld, nil
	}
	stored, err := q.StreamStateCountKeys(ctx, db.StreamStateCountKeysParams{
		QueryID: c.QueryID, PartitionID: c.PartitionID, Keys: deletes,
	})
	if err != nil {
		return "", fmt.Errorf("read state keys: %w", err)
	}
	if stored < int64(len(deletes)) {
		return SkipAlreadyClosed, nil
	}
	return "", nil
}
