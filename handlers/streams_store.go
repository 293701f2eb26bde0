package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// Cycle refusals reported in the 200 body (besides errMessageNotFound and
// errInvalidLease, shared with the ack routes).
const (
	errStaleAck = "Already applied: the consumer group's cursor is past this message " +
		"(a replayed or superseded cycle); nothing was committed"
	errNoCursor = "The consumer group holds no cursor on this partition: pop it before acking"
)

// errStreamQueryGone: the query disappeared between the check and the cycle.
var errStreamQueryGone = errors.New("stream query not found")

// streamCycle is a validated POST /streams/v1/cycle body.
type streamCycle struct {
	queryID     uuid.UUID
	partitionID uuid.UUID
	group       string
	ops         []api.StreamStateOp
	items       []pushItem
	ack         *cycleAck
	release     bool
}

type cycleAck struct {
	transactionID string
	leaseID       string // "" skips the lease check
	status        string // completed | failed | dlq
	count         int
	reason        string
}

// cycleOutcome is what a committed cycle did.
type cycleOutcome struct {
	pushed        []pushOutcome
	sourceQueue   *string
	leaseReleased bool
	dlq           bool
}

// cycleFrom applies the defaults of a cycle body. The spec already checked
// shapes, names and enums; sub is the token's subject for the sink pushes.
func cycleFrom(b *api.StreamCycleRequest, sub string) (streamCycle, error) {
	c := streamCycle{release: deref(b.ReleaseLease, true)}
	var err error
	if c.queryID, err = uuid.Parse(b.QueryId); err != nil {
		return c, badRequest("query_id must be a UUID")
	}
	if c.partitionID, err = uuid.Parse(b.PartitionId); err != nil {
		return c, badRequest("partition_id must be a UUID")
	}
	if b.ConsumerGroup != nil {
		c.group = *b.ConsumerGroup
	}
	if c.group == "" {
		c.group = queueModeGroup
	}
	if b.StateOps != nil {
		c.ops = *b.StateOps
	}
	for i, op := range c.ops {
		if t := string(op.Type); t != "upsert" && t != "delete" {
			return c, badRequest(fmt.Sprintf("state_ops/%d: unknown type %q", i, t))
		}
	}
	if b.PushItems != nil {
		c.items = make([]pushItem, len(*b.PushItems))
		for i, it := range *b.PushItems {
			c.items[i] = pushItemFrom(it.Queue, it.Partition, it.TransactionId, it.TraceId, it.Payload)
			c.items[i].ProducerSub = sub
		}
	}
	if a := b.Ack; a != nil {
		ack := &cycleAck{
			transactionID: a.TransactionId,
			leaseID:       deref(a.LeaseId, ""),
			status:        "completed",
			count:         deref(a.Count, 1),
			reason:        deref(a.Error, ""),
		}
		if a.Status != nil {
			ack.status = string(*a.Status)
		}
		switch ack.status {
		case "completed", "success", "":
			ack.status = "completed"
		case "failed", "dlq":
		default:
			return c, badRequest(fmt.Sprintf("ack.status: unknown status %q", ack.status))
		}
		if ack.reason == "" {
			ack.reason = "Streaming cycle reported failure"
		}
		c.ack = ack
	}
	return c, nil
}

// commitCycle runs the cycle in one transaction. Sink queues are created
// before it, like a push's. A sink queue deleted meanwhile by another broker
// (still in the cache) is retried once with fresh rows.
func (s *Server) commitCycle(ctx context.Context, c streamCycle) (cycleOutcome, error) {
	sinks := distinctQueues(c.items)
	for attempt := 0; ; attempt++ {
		queues, err := s.ensureQueues(ctx, sinks)
		if err != nil {
			return cycleOutcome{}, err
		}
		var out cycleOutcome
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, err = s.applyCycle(ctx, tx, c, queues)
			return err
		})
		if err != nil && attempt == 0 && isForeignKeyViolation(err) {
			s.queues.invalidateAll()
			continue
		}
		if err != nil {
			return cycleOutcome{}, err
		}
		s.notifyQueues(ctx, sinks)
		if out.leaseReleased && out.sourceQueue != nil {
			s.notifyQueues(ctx, []string{*out.sourceQueue})
		}
		return out, nil
	}
}

// applyCycle does the work of one cycle inside tx. Lock order: the query row
// (key share), the shard's advisory lock, the source cursor row, then the
// sink partitions (storeMessages); acks and transactions take cursors before
// partitions too. Every refusal is decided before anything is written.
func (s *Server) applyCycle(ctx context.Context, tx pgx.Tx, c streamCycle, queues map[string]db.QueenQueue) (cycleOutcome, error) {
	q := s.q.WithTx(tx)
	var out cycleOutcome
	if _, err := q.StreamQueryShareByID(ctx, db.StreamQueryShareByIDParams{TenantID: defaultTenantID, ID: c.queryID}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return out, errStreamQueryGone
		}
		return out, fmt.Errorf("lock stream query: %w", err)
	}
	if err := q.StreamStateLockShard(ctx, db.StreamStateLockShardParams{QueryID: c.queryID, PartitionID: c.partitionID}); err != nil {
		return out, fmt.Errorf("lock state shard: %w", err)
	}

	// The source position first: a refused ack must not cost the work below.
	var msg db.MessageListByTransactionIDsRow
	var cursor db.PartitionConsumerLockManyRow
	if c.ack != nil {
		msgs, err := q.MessageListByTransactionIDs(ctx, db.MessageListByTransactionIDsParams{
			PartitionIds: []uuid.UUID{c.partitionID}, TransactionIds: []string{c.ack.transactionID},
		})
		if err != nil {
			return out, fmt.Errorf("read acked message: %w", err)
		}
		if len(msgs) == 0 {
			return out, errRollback{errMessageNotFound}
		}
		msg = msgs[0]
		out.sourceQueue = ptr(msg.QueueName)
		rows, err := q.PartitionConsumerLockMany(ctx, db.PartitionConsumerLockManyParams{
			PartitionIds: []uuid.UUID{c.partitionID}, ConsumerGroups: []string{c.group},
		})
		if err != nil {
			return out, fmt.Errorf("lock cursor: %w", err)
		}
		switch {
		case len(rows) == 0 && c.ack.leaseID != "":
			return out, errRollback{errInvalidLease}
		case len(rows) == 0:
			return out, errRollback{errNoCursor}
		}
		cursor = rows[0]
		if c.ack.leaseID != "" && (cursor.LeaseID == nil || *cursor.LeaseID != c.ack.leaseID || !cursor.LeaseActive) {
			return out, errRollback{errInvalidLease}
		}
		// The idempotency guard: a cursor never moves backwards, so an ack at
		// or behind it belongs to a cycle that was applied already (or whose
		// messages were consumed otherwise). Without this, a replay that
		// sends no leaseId, or arrives while a gate's lease is still held,
		// would apply its state and sink pushes a second time.
		if msg.Seq <= cursor.LastSeq {
			return out, errRollback{errStaleAck}
		}
	}

	if err := applyStateOps(ctx, q, c); err != nil {
		return out, err
	}
	if len(c.items) > 0 {
		var err error
		if out.pushed, err = s.storeMessages(ctx, tx, queues, c.items); err != nil {
			return out, err
		}
	}
	if c.ack == nil {
		return out, nil
	}

	// Move the cursor to the acked message, passing everything before it:
	// the cycle's unit is the popped batch (or, for a gate, its allowed
	// head), not one message.
	release := c.release || c.ack.status != "completed"
	apply := db.PartitionConsumerApplyManyParams{
		PartitionIds:   []uuid.UUID{c.partitionID},
		ConsumerGroups: []string{c.group},
		LastSeqs:       []int64{msg.Seq},
		LastIds:        []uuid.UUID{msg.ID},
		Consumed:       []int64{int64(c.ack.count)},
		Batches:        []int64{0},
		AckedCounts:    []int32{cursor.AckedCount + int32(c.ack.count)},
		RetryCounts:    []int32{cursor.BatchRetryCount},
		Releases:       []bool{release},
	}
	if release {
		apply.Batches[0], apply.AckedCounts[0], apply.RetryCounts[0] = 1, 0, 0
	}
	if err := q.PartitionConsumerApplyMany(ctx, apply); err != nil {
		return out, fmt.Errorf("move cursor: %w", err)
	}
	if c.ack.status != "completed" {
		err := q.DeadLetterInsertMany(ctx, db.DeadLetterInsertManyParams{
			MessageIds: []uuid.UUID{msg.ID}, PartitionIds: []uuid.UUID{c.partitionID},
			ConsumerGroups: []string{c.group}, ErrorMessages: []string{c.ack.reason},
			RetryCounts: []int32{0}, OriginalCreatedAts: []pgtype.Timestamptz{msg.CreatedAt},
		})
		if err != nil {
			return out, fmt.Errorf("insert dead letter: %w", err)
		}
		out.dlq = true
	}
	out.leaseReleased = release
	return out, nil
}

// applyStateOps writes the state ops of the cycle's shard. Applying them in
// order leaves each key with the effect of its last op, so one upsert of the
// final values and one delete do the same in two statements.
func applyStateOps(ctx context.Context, q *db.Queries, c streamCycle) error {
	if len(c.ops) == 0 {
		return nil
	}
	last := make(map[string]int, len(c.ops))
	for i, op := range c.ops {
		last[op.Key] = i
	}
	up := db.StreamStateUpsertManyParams{QueryID: c.queryID, PartitionID: c.partitionID}
	del := db.StreamStateDeleteManyParams{QueryID: c.queryID, PartitionID: c.partitionID}
	for i, op := range c.ops {
		if last[op.Key] != i {
			continue
		}
		if string(op.Type) == "delete" {
			del.Keys = append(del.Keys, op.Key)
			continue
		}
		value := json.RawMessage(`{}`)
		if op.Value != nil && len(*op.Value) > 0 && string(*op.Value) != "null" {
			value = json.RawMessage(*op.Value)
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
