package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// claimed is what one partition gave a pop.
type claimed struct {
	queue         db.QueenQueue
	partitionID   uuid.UUID
	partitionName string
	retryCount    int
	messages      []db.PartitionConsumerClaimAndReadRow
	// autoAcked is what an autoAck read (PartitionConsumerAutoAckRead)
	// delivered, kept as read, instead of messages: a copy into messages'
	// type was a sixteenth of the bytes a fan-out run allocated
	// (docs/benchmarks.md, "Round 6: memory of the fan-out run").
	autoAcked []db.PartitionConsumerAutoAckReadRow
	lease     string // the lease the messages were claimed under ("" for autoAck)
}

// count is how many messages c delivers.
func (c *claimed) count() int { return len(c.messages) + len(c.autoAcked) }

// lastSeq is the sequence of c's last message, 0 without any.
func (c *claimed) lastSeq() int64 {
	switch {
	case len(c.autoAcked) > 0:
		return c.autoAcked[len(c.autoAcked)-1].Seq
	case len(c.messages) > 0:
		return c.messages[len(c.messages)-1].Seq
	}
	return 0
}

// defaultLeaseSeconds applies when a queue's leaseTime is 0.
const defaultLeaseSeconds = 60

// popOnce looks for messages once, without waiting.
func (b *Broker) popOnce(ctx context.Context, pr popPlan) (res *PopResult, err error) {
	start := time.Now()
	pr.lookAt = start
	defer func() { b.timed.Pop(time.Since(start), res != nil) }()
	var queues []db.QueenQueue
	if pr.Namespace != "" || pr.Task != "" {
		rows, err := b.q.QueueListByNamespaceTask(ctx, db.QueueListByNamespaceTaskParams{
			TenantID: tenantUUID(pr.Tenant), Namespace: pr.Namespace, Task: pr.Task,
		})
		if err != nil {
			return nil, fmt.Errorf("list queues for namespace %q task %q: %w", pr.Namespace, pr.Task, err)
		}
		queues = rows
	} else {
		q, ok, err := b.lookupQueue(ctx, key(pr.Tenant, pr.Queue))
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
	if pr.Partition != "" {
		q := queues[0]
		part, err := b.q.PartitionGetByQueueAndName(ctx, db.PartitionGetByQueueAndNameParams{
			QueueID: q.ID, Name: pr.Partition, WindowSeconds: q.WindowBuffer,
		})
		if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrNotFound) || (err == nil && part.WindowActive) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read partition %q of %q: %w", pr.Partition, q.Name, err)
		}
		claim := b.claim
		if pr.AutoAck {
			claim = b.claimOneAutoAck
		}
		c, err := claim(ctx, pr, q, part.ID, part.Name, leaseID.String(), pr.Batch, true)
		if err != nil {
			return nil, err
		}
		if c != nil && c.count() > 0 {
			got = append(got, *c)
		}
	} else {
		if pr.hint != nil {
			got, err = b.claimPushed(ctx, pr, queues[0], leaseID.String())
			if err != nil {
				return nil, err
			}
		}
		if len(got) == 0 {
			got, err = b.claimAny(ctx, pr, queues, leaseID.String())
			if err != nil {
				return nil, err
			}
		}
	}
	if len(got) == 0 {
		return nil, nil
	}
	if !pr.AutoAck {
		b.delivered.remember(tenantUUID(pr.Tenant), got, time.Now())
	}
	return b.popResult(pr, leaseID.String(), got), nil
}

// claimAny claims up to maxPartitions eligible partitions of the queues,
// higher priority queues first, until the batch budget is spent. A partition
// whose claim yields nothing is released and does not count.
func (b *Broker) claimAny(ctx context.Context, pr popPlan, queues []db.QueenQueue, leaseID string) ([]claimed, error) {
	var got []claimed
	budget := pr.Batch
	for _, q := range queues { // already ordered by priority
		if len(got) >= pr.MaxPartitions || budget <= 0 {
			break
		}
		qk := key(pr.Tenant, q.Name)
		keeps := !pr.AutoAck && pr.MaxPartitions == 1 && q.WindowBuffer == 0
		if keeps {
			// What a recent scan listed, before scanning (recent_scan.go).
			c, err := b.claimRecent(ctx, pr, q, leaseID, budget)
			if err != nil {
				return got, err
			}
			if c != nil {
				got = append(got, *c)
				break
			}
		}
		// The scan starts at this broker's hint (watermark.go), every
		// fullScanEvery at the stored watermark. The push floor must be
		// read before the scan's snapshot (push_floor.go).
		due := b.watermarkDue(qk, pr.Group)
		hint := b.startHint(qk, q, pr.Group, b.fullScanDue(qk, pr.Group))
		floor := b.pushFloor(ctx)
		scanned := time.Now()
		b.hinted.scans.Add(1)
		cands, err := b.q.PartitionListPopCandidates(ctx, db.PartitionListPopCandidatesParams{
			ConsumerGroup: pr.Group, QueueID: q.ID, WindowSeconds: q.WindowBuffer,
			MaxCandidates: int32(popCandidates(pr.MaxPartitions)),
			HintFrom:      hint.from, HintAt: hint.at,
		})
		if err != nil {
			return got, fmt.Errorf("list pop candidates of %q: %w", q.Name, err)
		}
		if len(cands) > 0 {
			b.setStartHint(qk, q, pr.Group, hintFrom(cands[0].OldestPending, cands[0].ScannedAt, floor))
		}
		// After an empty scan, and every few seconds under load (a
		// backlog means scans are never empty, and the watermark must still
		// climb over the idle partitions below the busy ones).
		if len(cands) == 0 || due {
			h, err := b.advanceWatermark(ctx, q, pr.Group, hint, floor)
			if err != nil {
				return got, err
			}
			b.setStartHint(qk, q, pr.Group, h)
		}
		if len(cands) == 0 {
			continue
		}
		// Concurrent consumers get the same candidates; trying them in
		// different orders spreads them over the partitions instead of
		// all racing for the first one.
		rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		if pr.AutoAck {
			listed := b.race.ticket()
			parts := make([]partRef, len(cands))
			for i, c := range cands {
				parts[i] = partRef{id: c.ID, name: c.Name, last: c.LastSeq, listed: listed}
			}
			cs, err := b.claimAutoAck(ctx, pr, q, parts, leaseID, budget, pr.MaxPartitions-len(got), false)
			got = append(got, cs...)
			if err != nil {
				return got, err
			}
			for _, c := range cs {
				budget -= c.count()
			}
			continue
		}
		b.recent.claimedLast(cands, scanned)
		tried := 0
		for _, cand := range cands {
			if len(got) >= pr.MaxPartitions || budget <= 0 {
				break
			}
			tried++
			c, err := b.claimTracked(ctx, pr, q, partRef{id: cand.ID, name: cand.Name}, leaseID, budget)
			if err != nil {
				return got, err
			}
			if c == nil || c.count() == 0 {
				continue
			}
			got = append(got, *c)
			budget -= c.count()
		}
		if keeps {
			b.recent.keep(watermarkKey{qk, pr.Group}, q.ID, cands[tried:], pr.Batch, scanned, time.Now())
		}
	}
	return got, nil
}

// claim takes the group's lease on one partition and reads up to limit
// messages. nil means another consumer of the group holds the lease. The
// lease is released at once when nothing is deliverable, and the batch size
// recorded for the lease is what was actually delivered.
func (b *Broker) claim(ctx context.Context, pr popPlan, q db.QueenQueue, partID uuid.UUID, partName, leaseID string, limit int, targeted bool) (*claimed, error) {
	var startAfter pgtype.Timestamptz
	if pr.Group != QueueModeGroup {
		t, err := b.subscriptionStart(ctx, pr, q.Name, partName, targeted)
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
	rows, err := b.q.PartitionConsumerClaimAndRead(ctx, db.PartitionConsumerClaimAndReadParams{
		PartitionID:    partID,
		ConsumerGroup:  pr.Group,
		StartAfterTime: startAfter,
		LeaseID:        &leaseID,
		LeaseSeconds:   leaseSeconds,
		BatchSize:      int32(limit),
		DelaySeconds:   q.DelayedProcessing,
	})
	if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrForeignKey) {
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
	c := &claimed{queue: q, partitionID: partID, partitionName: partName, retryCount: int(rows[0].BatchRetryCount), lease: leaseID}
	c.messages = deliverable(rows)
	key := db.PartitionConsumerReleaseParams{PartitionID: partID, ConsumerGroup: pr.Group, LeaseID: &leaseID}
	switch n := len(c.messages); {
	case n == 0:
		err = b.q.PartitionConsumerRelease(ctx, key)
	case pr.AutoAck:
		last := c.messages[n-1]
		err = b.q.PartitionConsumerAutoAck(ctx, db.PartitionConsumerAutoAckParams{
			LastSeq: last.Seq, LastConsumedID: &last.ID, Consumed: int64(n),
			PartitionID: partID, ConsumerGroup: pr.Group, LeaseID: &leaseID,
		})
	case n < limit:
		err = b.q.PartitionConsumerSetBatchSize(ctx, db.PartitionConsumerSetBatchSizeParams{
			BatchSize: int32(n), PartitionID: partID, ConsumerGroup: pr.Group, LeaseID: &leaseID,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("finish claim of partition %s: %w", partID, err)
	}
	return c, nil
}

// deliverable keeps the rows of a claim that are messages (a claim that
// found nothing returns one row without), in order, in rows' own array: a
// copy per pop was a tenth of what a consumed message allocated.
func deliverable(rows []db.PartitionConsumerClaimAndReadRow) []db.PartitionConsumerClaimAndReadRow {
	out := rows[:0]
	for _, r := range rows {
		if r.Seq > 0 {
			out = append(out, r)
		}
	}
	return out
}

// subscriptionStart decides where a named group's new cursor on a partition
// starts. A stored start point (partition-specific first, then queue-wide)
// wins; otherwise the pop's own subscriptionFrom/new is stored, and the first
// decision sticks. nil means the beginning of the partition.
func (b *Broker) subscriptionStart(ctx context.Context, pr popPlan, queue, partition string, targeted bool) (*time.Time, error) {
	tid := tenantUUID(pr.Tenant)
	get := db.SubscriptionGetParams{TenantID: tid, ConsumerGroup: pr.Group, QueueName: queue, PartitionName: partition}
	row, err := b.q.SubscriptionGet(ctx, get)
	if err == nil {
		return &row.SubscriptionTimestamp.Time, nil
	}
	if !errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return nil, fmt.Errorf("read subscription of %q on %q: %w", pr.Group, queue, err)
	}
	ins := db.SubscriptionInsertParams{TenantID: tid, ConsumerGroup: pr.Group, QueueName: queue}
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
	if err := b.q.SubscriptionInsert(ctx, ins); err != nil {
		return nil, fmt.Errorf("store subscription of %q on %q: %w", pr.Group, queue, err)
	}
	row, err = b.q.SubscriptionGet(ctx, get)
	if err != nil {
		return nil, fmt.Errorf("read subscription of %q on %q: %w", pr.Group, queue, err)
	}
	return &row.SubscriptionTimestamp.Time, nil
}

// popResult renders what the claims gave, payloads opened.
func (b *Broker) popResult(pr popPlan, leaseID string, got []claimed) *PopResult {
	if pr.AutoAck {
		leaseID = ""
	}
	first := got[0]
	res := &PopResult{
		Queue: first.queue.Name, Partition: first.partitionName, PartitionID: first.partitionID,
		LeaseID: leaseID, Group: pr.Group, Partitions: len(got),
	}
	n := 0
	for _, c := range got {
		n += c.count()
	}
	res.Messages = make([]Message, 0, n)
	for _, c := range got {
		m := Message{Queue: c.queue.Name, Partition: c.partitionName, PartitionID: c.partitionID, RetryCount: c.retryCount}
		for _, r := range c.messages {
			m.ID, m.TransactionID, m.TraceID, m.ProducerSub = r.ID, r.TransactionID, r.TraceID, r.ProducerSub
			m.Payload, m.CreatedAt = b.seal.open(r.Payload, r.IsEncrypted), r.CreatedAt.Time
			res.Messages = append(res.Messages, m)
		}
		for _, r := range c.autoAcked {
			m.ID, m.TransactionID, m.TraceID, m.ProducerSub = r.ID, r.TransactionID, r.TraceID, r.ProducerSub
			m.Payload, m.CreatedAt = b.seal.open(r.Payload, r.IsEncrypted), r.CreatedAt.Time
			res.Messages = append(res.Messages, m)
		}
	}
	return res
}
