package handlers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// popRequest is a validated pop with its defaults applied.
type popRequest struct {
	queueName string // the queue route and the targeted route
	partition string // the targeted route only
	namespace string // the namespace/task route only
	task      string

	group         string
	batch         int
	wait          bool
	timeout       time.Duration
	autoAck       bool
	maxPartitions int
	subscribeNew  bool       // start new cursors of a named group at now
	subscribeFrom *time.Time // start new cursors of a named group here
	waitKeys      []string
}

// claimed is what one partition gave a pop.
type claimed struct {
	queue         db.QueenQueue
	partitionID   uuid.UUID
	partitionName string
	retryCount    int
	messages      []db.PartitionConsumerClaimAndReadRow
}

// defaultLeaseSeconds applies when a queue's leaseTime is 0.
const defaultLeaseSeconds = 60

// popOnce looks for messages once, without waiting.
func (s *Server) popOnce(ctx context.Context, pr popRequest) (*api.PopResponse, error) {
	var queues []db.QueenQueue
	if pr.namespace != "" || pr.task != "" {
		rows, err := s.q.QueueListByNamespaceTask(ctx, db.QueueListByNamespaceTaskParams{Namespace: pr.namespace, Task: pr.task})
		if err != nil {
			return nil, fmt.Errorf("list queues for namespace %q task %q: %w", pr.namespace, pr.task, err)
		}
		queues = rows
	} else {
		q, ok, err := s.lookupQueue(ctx, pr.queueName)
		if err != nil || !ok {
			return nil, err
		}
		queues = []db.QueenQueue{q}
	}
	if len(queues) == 0 {
		return nil, nil
	}
	leaseID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new lease id: %w", err)
	}
	var got []claimed
	if pr.partition != "" {
		q := queues[0]
		part, err := s.q.PartitionGetByQueueAndName(ctx, db.PartitionGetByQueueAndNameParams{
			QueueID: q.ID, Name: pr.partition, WindowSeconds: q.WindowBuffer,
		})
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && part.WindowActive) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read partition %q of %q: %w", pr.partition, q.Name, err)
		}
		c, err := s.claim(ctx, pr, q, part.ID, part.Name, leaseID.String(), pr.batch, true)
		if err != nil {
			return nil, err
		}
		if c != nil && len(c.messages) > 0 {
			got = append(got, *c)
		}
	} else {
		got, err = s.claimAny(ctx, pr, queues, leaseID.String())
		if err != nil {
			return nil, err
		}
	}
	if len(got) == 0 {
		return nil, nil
	}
	return s.popResponse(pr, leaseID.String(), got)
}

// claimAny claims up to maxPartitions eligible partitions of the queues,
// higher priority queues first, until the batch budget is spent. A partition
// whose claim yields nothing is released and does not count.
func (s *Server) claimAny(ctx context.Context, pr popRequest, queues []db.QueenQueue, leaseID string) ([]claimed, error) {
	var got []claimed
	budget := pr.batch
	for _, q := range queues { // already ordered by priority
		if len(got) >= pr.maxPartitions || budget <= 0 {
			break
		}
		cands, err := s.q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
			ConsumerGroup: pr.group, QueueID: q.ID, WindowSeconds: q.WindowBuffer,
			MaxCandidates: int32(pr.maxPartitions*2 + 8),
		})
		if err != nil {
			return got, fmt.Errorf("list pop candidates of %q: %w", q.Name, err)
		}
		// After an empty scan, and every few seconds under load (a
		// backlog means scans are never empty, and the watermark must still
		// climb over the idle partitions below the busy ones).
		if len(cands) == 0 || s.watermarkDue(q.ID, pr.group) {
			if err := s.advanceWatermark(ctx, q, pr.group); err != nil {
				return got, err
			}
		}
		if len(cands) == 0 {
			continue
		}
		// Concurrent consumers get the same candidates; trying them in
		// different orders spreads them over the partitions instead of
		// all racing for the first one.
		rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		for _, cand := range cands {
			if len(got) >= pr.maxPartitions || budget <= 0 {
				break
			}
			c, err := s.claim(ctx, pr, q, cand.ID, cand.Name, leaseID, budget, false)
			if err != nil {
				return got, err
			}
			if c == nil || len(c.messages) == 0 {
				continue
			}
			got = append(got, *c)
			budget -= len(c.messages)
		}
	}
	return got, nil
}

// watermarkMargin is how far a group's watermark trails what a scan saw. A
// push stamps last_message_at with its transaction's start time, so a push
// still running when the scan looked could commit a time just below the
// scan's clock; the margin covers transactions shorter than this.
const watermarkMargin = 2 * time.Minute

// watermarkEvery is how often a pop that found candidates also advances the
// group's watermark.
const watermarkEvery = 5 * time.Second

// watermarkDue reports whether this broker last advanced the (queue, group)
// watermark more than watermarkEvery ago, and if so claims the turn.
func (s *Server) watermarkDue(queueID uuid.UUID, group string) bool {
	key := watermarkKey{queueID, group}
	now := time.Now()
	last, ok := s.watermarkAt.Load(key)
	if ok && now.Sub(last.(time.Time)) < watermarkEvery {
		return false
	}
	if ok {
		return s.watermarkAt.CompareAndSwap(key, last, now)
	}
	_, loaded := s.watermarkAt.LoadOrStore(key, now)
	return !loaded
}

type watermarkKey struct {
	queueID uuid.UUID
	group   string
}

// advanceWatermark runs after a scan of q: partitions
// older than the oldest one still pending (or than now, when none is) hold
// nothing for the group, so later scans can start there.
func (s *Server) advanceWatermark(ctx context.Context, q db.QueenQueue, group string) error {
	row, err := s.q.PartitionOldestPending(ctx, db.PartitionOldestPendingParams{ConsumerGroup: group, QueueID: q.ID})
	if err != nil {
		return fmt.Errorf("find oldest pending partition of %q: %w", q.Name, err)
	}
	from := row.ScannedAt.Time
	if row.OldestPending.Valid && row.OldestPending.Time.Before(from) {
		from = row.OldestPending.Time
	}
	err = s.q.ConsumerWatermarkAdvance(ctx, db.ConsumerWatermarkAdvanceParams{
		QueueID: q.ID, ConsumerGroup: group,
		ScanFrom:  pgtype.Timestamptz{Time: from.Add(-watermarkMargin), Valid: true},
		ScannedAt: row.ScannedAt,
	})
	if err != nil {
		return fmt.Errorf("advance watermark of %q on %q: %w", group, q.Name, err)
	}
	return nil
}

// claim takes the group's lease on one partition and reads up to limit
// messages. nil means another consumer of the group holds the lease. The
// lease is released at once when nothing is deliverable, and the batch size
// recorded for the lease is what was actually delivered.
func (s *Server) claim(ctx context.Context, pr popRequest, q db.QueenQueue, partID uuid.UUID, partName, leaseID string, limit int, targeted bool) (*claimed, error) {
	var startAfter pgtype.Timestamptz
	if pr.group != queueModeGroup {
		t, err := s.subscriptionStart(ctx, pr, q.Name, partName, targeted)
		if err != nil {
			return nil, err
		}
		if t != nil {
			startAfter = pgtype.Timestamptz{Time: *t, Valid: true}
		}
	}
	leaseSeconds := q.LeaseTime
	if leaseSeconds <= 0 {
		leaseSeconds = defaultLeaseSeconds
	}
	rows, err := s.q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
		PartitionID:    partID,
		ConsumerGroup:  pr.group,
		StartAfterTime: startAfter,
		LeaseID:        &leaseID,
		LeaseSeconds:   leaseSeconds,
		BatchSize:      int32(limit),
		DelaySeconds:   q.DelayedProcessing,
	})
	if isForeignKeyViolation(err) {
		// The partition was deleted (queue clear or delete) since the
		// scan found it: there is nothing in it to claim any more.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim partition %s: %w", partID, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	c := &claimed{queue: q, partitionID: partID, partitionName: partName, retryCount: int(rows[0].BatchRetryCount)}
	for _, r := range rows {
		if r.Seq > 0 {
			c.messages = append(c.messages, r)
		}
	}
	key := db.PartitionConsumerReleaseParams{PartitionID: partID, ConsumerGroup: pr.group, LeaseID: &leaseID}
	switch n := len(c.messages); {
	case n == 0:
		err = s.q.PartitionConsumerRelease(ctx, key)
	case pr.autoAck:
		last := c.messages[n-1]
		err = s.q.PartitionConsumerAutoAck(ctx, db.PartitionConsumerAutoAckParams{
			LastSeq: last.Seq, LastConsumedID: &last.ID, Consumed: int64(n),
			PartitionID: partID, ConsumerGroup: pr.group, LeaseID: &leaseID,
		})
	case n < limit:
		err = s.q.PartitionConsumerSetBatchSize(ctx, db.PartitionConsumerSetBatchSizeParams{
			BatchSize: int32(n), PartitionID: partID, ConsumerGroup: pr.group, LeaseID: &leaseID,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("finish claim of partition %s: %w", partID, err)
	}
	return c, nil
}

// subscriptionStart decides where a named group's new cursor on a partition
// starts. A stored start point (partition-specific first, then queue-wide)
// wins; otherwise the pop's own subscriptionFrom/new is stored, and the first
// decision sticks. nil means the beginning of the partition.
func (s *Server) subscriptionStart(ctx context.Context, pr popRequest, queue, partition string, targeted bool) (*time.Time, error) {
	get := db.SubscriptionGetParams{ConsumerGroup: pr.group, QueueName: queue, PartitionName: partition}
	row, err := s.q.SubscriptionGet(ctx, get)
	if err == nil {
		return &row.SubscriptionTimestamp.Time, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read subscription of %q on %q: %w", pr.group, queue, err)
	}
	ins := db.SubscriptionInsertParams{ConsumerGroup: pr.group, QueueName: queue}
	switch {
	case pr.subscribeFrom != nil:
		ins.SubscriptionMode, ins.SubscriptionTimestamp = "timestamp", pgtype.Timestamptz{Time: *pr.subscribeFrom, Valid: true}
	case pr.subscribeNew:
		ins.SubscriptionMode, ins.SubscriptionTimestamp = "new", pgtype.Timestamptz{Time: time.Now(), Valid: true}
	default:
		return nil, nil
	}
	if targeted {
		ins.PartitionName = partition
	}
	if err := s.q.SubscriptionInsert(ctx, ins); err != nil {
		return nil, fmt.Errorf("store subscription of %q on %q: %w", pr.group, queue, err)
	}
	row, err = s.q.SubscriptionGet(ctx, get)
	if err != nil {
		return nil, fmt.Errorf("read subscription of %q on %q: %w", pr.group, queue, err)
	}
	return &row.SubscriptionTimestamp.Time, nil
}

func (s *Server) popResponse(pr popRequest, leaseID string, got []claimed) (*api.PopResponse, error) {
	if pr.autoAck {
		leaseID = ""
	}
	first := got[0]
	resp := &api.PopResponse{
		Success:           true,
		Queue:             first.queue.Name,
		Partition:         first.partitionName,
		PartitionId:       first.partitionID.String(),
		LeaseId:           leaseID,
		ConsumerGroup:     pr.group,
		PartitionsClaimed: len(got),
	}
	for _, c := range got {
		for _, m := range c.messages {
			data, err := s.openPayload(m.Payload, m.IsEncrypted)
			if err != nil {
				return nil, err
			}
			var traceID *string
			if m.TraceID != nil {
				traceID = ptr(m.TraceID.String())
			}
			resp.Messages = append(resp.Messages, api.PoppedMessage{
				Id:            m.ID.String(),
				TransactionId: m.TransactionID,
				TraceId:       traceID,
				Data:          &data,
				ProducerSub:   m.ProducerSub,
				CreatedAt:     fmtMicros(m.CreatedAt.Time),
				PartitionId:   c.partitionID.String(),
				Partition:     c.partitionName,
				Queue:         c.queue.Name,
				LeaseId:       leaseID,
				ConsumerGroup: pr.group,
				RetryCount:    c.retryCount,
			})
		}
	}
	return resp, nil
}

// openPayload is the hook where encrypted payloads are decrypted on read
// (payload_crypto.go).
func (s *Server) openPayload(payload []byte, encrypted bool) (api.AnyJSON, error) {
	return s.payloads.open(payload, encrypted)
}
