package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// StreamRegistration registers a streaming query, or resumes it.
type StreamRegistration struct {
	Name        string
	SourceQueue string
	SinkQueue   string // "" none
	ConfigHash  string
	Reset       bool // wipe the state when the config hash changed
}

// StreamRegistered is the outcome of RegisterStream. Conflict: the query
// exists with another config hash and Reset was not asked; nothing changed.
type StreamRegistered struct {
	QueryID  uuid.UUID
	Fresh    bool // created now
	Reset    bool // the state was wiped for a new config hash
	Conflict bool
}

// RegisterStream registers a streaming query or resumes it.
func (b *Broker) RegisterStream(ctx context.Context, tenant string, r StreamRegistration) (StreamRegistered, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return StreamRegistered{}, err
	}
	var sink *string
	if r.SinkQueue != "" {
		sink = ptr(r.SinkQueue)
	}
	var (
		out StreamRegistered
		row db.QueenStreamsQuery
	)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q := b.q.WithTx(tx)
		var err error
		// Lock the existing row, or insert; a concurrent insert of the same
		// name makes the insert return nothing, and the second read sees it.
		for attempt := 0; attempt < 2; attempt++ {
			row, err = q.StreamQueryLockByName(ctx, db.StreamQueryLockByNameParams{TenantID: tid, Name: r.Name})
			if !errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
				break
			}
			row, err = q.StreamQueryInsert(ctx, db.StreamQueryInsertParams{
				TenantID: tid, Name: r.Name, SourceQueue: r.SourceQueue, SinkQueue: sink, ConfigHash: r.ConfigHash,
			})
			if !errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
				out.Fresh = err == nil
				break
			}
		}
		if err != nil || out.Fresh {
			return err
		}
		if row.ConfigHash != r.ConfigHash {
			if !r.Reset {
				out.Conflict = true
				return nil
			}
			if _, err := q.StreamStateDeleteByQuery(ctx, row.ID); err != nil {
				return err
			}
			out.Reset = true
		}
		return q.StreamQueryUpdate(ctx, db.StreamQueryUpdateParams{
			ID: row.ID, SourceQueue: r.SourceQueue, SinkQueue: sink, ConfigHash: r.ConfigHash,
		})
	})
	if err != nil {
		return StreamRegistered{}, pgerr.Translate(fmt.Errorf("register stream query %q: %w", r.Name, err))
	}
	out.QueryID = row.ID
	return out, nil
}

// StateOp is one state change of a stream cycle.
type StateOp struct {
	Key    string
	Delete bool
	Value  json.RawMessage // nil or JSON null stores {}
}

// StreamCycle is one cycle of a streaming query: state ops, sink pushes and
// the source ack, committed at most once.
type StreamCycle struct {
	QueryID     uuid.UUID
	PartitionID uuid.UUID // the source partition: the state shard
	Group       string    // "": queue mode
	Ops         []StateOp
	Items       []PushItem
	Ack         *CycleAck
	Release     bool // release the lease after a completed ack
}

// CycleAck is the source acknowledgement of a cycle.
type CycleAck struct {
	TransactionID string
	LeaseID       string    // "": no lease check
	Status        AckStatus // completed, failed or dlq
	Count         int       // messages the cycle consumed
	Reason        string    // stored with the dead letter
}

// CycleResult is a cycle's outcome. Refused (ErrNotFound for the acked
// message, ErrPartitionNotFound for a source partition of another tenant,
// ErrLeaseLost, ErrNoCursor, ErrStale) means nothing was committed. Skipped
// (SkipShardBusy, SkipLeaseHeld, SkipAlreadyClosed) is an idle flush that
// was not applied, nothing committed either (stream_flush.go).
type CycleResult struct {
	Refused       error
	Skipped       string
	Pushed        []PushResult
	SourceQueue   string // "" without an ack
	LeaseReleased bool
	DeadLettered  bool
}

// errCycleRefused carries a refusal out of the cycle's transaction.
type errCycleRefused struct{ err error }

func (e errCycleRefused) Error() string { return e.err.Error() }

// CommitStreamCycle commits one cycle in one transaction. ErrNotFound (as
// the returned error) means the query is unknown; then nothing, not even a
// sink queue, was created. Sink queues deleted meanwhile by another broker
// (still in the cache) are retried once with fresh rows (withQueues).
func (b *Broker) CommitStreamCycle(ctx context.Context, tenant string, c StreamCycle) (CycleResult, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return CycleResult{}, err
	}
	if c.Group == "" {
		c.Group = QueueModeGroup
	}
	for i := range c.Items {
		c.Items[i].tenant = tid.String()
	}
	if _, err := b.q.StreamQueryGetByID(ctx, db.StreamQueryGetByIDParams{TenantID: tid, ID: c.QueryID}); err != nil {
		return CycleResult{}, pgerr.Translate(fmt.Errorf("read stream query %s: %w", c.QueryID, err))
	}
	sinks := distinctQueues(c.Items)
	var out CycleResult
	err = b.withQueues(ctx, sinks, func(queues map[QueueKey]db.QueenQueue) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			out, err = b.applyCycle(ctx, tx, tid, c, queues)
			return err
		})
	})
	var refused errCycleRefused
	if errors.As(err, &refused) {
		return CycleResult{Refused: refused.err}, nil
	}
	if err != nil {
		return CycleResult{}, fmt.Errorf("stream cycle of query %s on partition %s: %w", c.QueryID, c.PartitionID, err)
	}
	if out.Skipped != "" {
		b.log.Debug("stream flush skipped", "query_id", c.QueryID, "partition_id", c.PartitionID, "reason", out.Skipped)
		return out, nil
	}
	if len(sinks) > 0 {
		b.notify.QueuesReady(sinks)
	}
	if out.LeaseReleased && out.SourceQueue != "" {
		b.notify.QueuesReady([]QueueKey{key(tid.String(), out.SourceQueue)})
	}
	return out, nil
}

// applyCycle does the work of one cycle inside tx. Lock order: the query row
// (key share), the shard's advisory lock, the source cursor row, then the
// sink partitions (insertMessages); acks and transactions take cursors
// before partitions too. Every refusal and skip is decided before anything
// is written.
func (b *Broker) applyCycle(ctx context.Context, tx pgx.Tx, tid uuid.UUID, c StreamCycle, queues map[QueueKey]db.QueenQueue) (CycleResult, error) {
	q := b.q.WithTx(tx)
	var out CycleResult
	foreign, err := q.StreamQueryShareByID(ctx, db.StreamQueryShareByIDParams{PartitionID: c.PartitionID, TenantID: tid, ID: c.QueryID})
	if err != nil {
		return out, fmt.Errorf("lock stream query: %w", err)
	}
	if foreign {
		// The shard key names another tenant's partition: its state, acks
		// and cursors are not this tenant's to touch.
		return out, errCycleRefused{ErrPartitionNotFound}
	}
	skip, err := lockShard(ctx, q, c)
	if err != nil || skip != "" {
		out.Skipped = skip
		return out, err
	}

	// The source position first: a refused ack must not cost the work below.
	var msg db.MessageListByTransactionIDsRow
	var cur *cursor
	if c.Ack != nil {
		msgs, err := q.MessageListByTransactionIDs(ctx, db.MessageListByTransactionIDsParams{
			TenantIds: []uuid.UUID{tid}, PartitionIds: []uuid.UUID{c.PartitionID}, TransactionIds: []string{c.Ack.TransactionID},
		})
		if err != nil {
			return out, fmt.Errorf("read acked message: %w", err)
		}
		if len(msgs) == 0 {
			return out, errCycleRefused{ErrNotFound}
		}
		msg = msgs[0]
		out.SourceQueue = msg.QueueName
		k := cursorKey{c.PartitionID, c.Group}
		cursors, err := lockCursors(ctx, q, []cursorKey{k})
		if err != nil {
			return out, err
		}
		cur = cursors[k]
		switch {
		case cur == nil && c.Ack.LeaseID != "":
			return out, errCycleRefused{ErrLeaseLost}
		case cur == nil:
			return out, errCycleRefused{ErrNoCursor}
		}
		if err := cur.checkLease(c.Ack.LeaseID); err != nil {
			return out, errCycleRefused{err}
		}
		// The idempotency guard: a cursor never moves backwards, so an ack at
		// or behind it belongs to a cycle that was applied already (or whose
		// messages were consumed otherwise). Without this, a replay that
		// sends no leaseId, or arrives while a gate's lease is still held,
		// would apply its state and sink pushes a second time.
		if cur.passed(msg.Seq) {
			return out, errCycleRefused{ErrStale}
		}
	}

	if err := applyStateOps(ctx, q, c); err != nil {
		return out, err
	}
	if len(c.Items) > 0 {
		var err error
		if out.Pushed, err = b.insertMessages(ctx, tx, queues, c.Items, false); err != nil {
			return out, err
		}
	}
	if c.Ack == nil {
		return out, nil
	}

	// Move the cursor to the acked message, passing everything before it.
	release := c.Release || c.Ack.Status != AckCompleted
	cur.passTo(msg.Seq, msg.ID, c.Ack.Count, release)
	if err := writeCursors(ctx, q, map[cursorKey]*cursor{{c.PartitionID, c.Group}: cur}); err != nil {
		return out, err
	}
	if c.Ack.Status != AckCompleted {
		var dead deadLetters
		dead.add(msg.ID, c.PartitionID, msg.CreatedAt, c.Group, c.Ack.Reason, 0)
		if err := dead.write(ctx, q); err != nil {
			return out, err
		}
		out.DeadLettered = true
	}
	out.LeaseReleased = release
	return out, nil
}

// applyStateOps writes the state ops of the cycle's shard. Applying them in
// order leaves each key with the effect of its last op, so one upsert of the
// final values and one delete do the same in two statements.
func applyStateOps(ctx context.Context, q *db.Queries, c StreamCycle) error {
	deletes, upserts := finalOps(c.Ops)
	up := db.StreamStateUpsertManyParams{QueryID: c.QueryID, PartitionID: c.PartitionID}
	del := db.StreamStateDeleteManyParams{QueryID: c.QueryID, PartitionID: c.PartitionID, Keys: deletes}
	for _, op := range upserts {
		value := json.RawMessage(`{}`)
		if len(op.Value) > 0 && string(op.Value) != "null" {
			value = op.Value
		}
		up.Keys = append(up.Keys, op.Key)
		up.Vals = append(up.Vals, value)
	}
	if len(del.Keys) > 0 {
		if err := q.StreamStateDeleteMany(ctx, del); err != nil {
			return fmt.Errorf("delete state: %w", err)
		}
	}
	if len(up.Keys) > 0 {
		if err := q.StreamStateUpsertMany(ctx, up); err != nil {
			return fmt.Errorf("upsert state: %w", err)
		}
	}
	return nil
}

// StateRow is one stored state key of a stream shard.
type StateRow struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
}

// StateQuery selects state rows of one shard: the keys named, or those
// with the prefix, or all; RipeAtOrBefore filters on the value's ripe time.
type StateQuery struct {
	QueryID        uuid.UUID
	PartitionID    uuid.UUID
	Keys           []string
	KeyPrefix      string
	RipeAtOrBefore *float64
}

// StreamState reads state rows of one shard. ErrNotFound: unknown query.
func (b *Broker) StreamState(ctx context.Context, tenant string, sq StateQuery) ([]StateRow, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return nil, err
	}
	if _, err := b.q.StreamQueryGetByID(ctx, db.StreamQueryGetByIDParams{TenantID: tid, ID: sq.QueryID}); err != nil {
		return nil, pgerr.Translate(fmt.Errorf("read stream query %s: %w", sq.QueryID, err))
	}
	keys := sq.Keys
	if keys == nil {
		keys = []string{}
	}
	rows, err := b.q.StreamStateList(ctx, db.StreamStateListParams{
		QueryID: sq.QueryID, PartitionID: sq.PartitionID, Keys: keys, KeyPrefix: sq.KeyPrefix,
		RipeAtOrBefore: sq.RipeAtOrBefore,
	})
	if err != nil {
		return nil, pgerr.Translate(fmt.Errorf("read stream state of query %s on partition %s: %w", sq.QueryID, sq.PartitionID, err))
	}
	out := make([]StateRow, len(rows))
	for i, r := range rows {
		out[i] = StateRow{Key: r.Key, Value: r.Value, UpdatedAt: r.UpdatedAt.Time}
	}
	return out, nil
}
