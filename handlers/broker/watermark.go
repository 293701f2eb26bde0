package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
)

// The pop watermark of a (queue, group) is the last_message_at below which
// no partition holds anything for the group, so that wildcard pops scan
// only the partitions above it (PartitionListPopCandidates).

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
func (b *Broker) watermarkDue(queue QueueKey, group string) bool {
	key := watermarkKey{queue, group}
	now := time.Now()
	last, ok := b.watermarkAt.Load(key)
	if ok && now.Sub(last.(time.Time)) < watermarkEvery {
		return false
	}
	if ok {
		return b.watermarkAt.CompareAndSwap(key, last, now)
	}
	_, loaded := b.watermarkAt.LoadOrStore(key, now)
	return !loaded
}

type watermarkKey struct {
	queue QueueKey
	group string
}

// advanceWatermark runs after a scan of q: partitions
// older than the oldest one still pending (or than now, when none is) hold
// nothing for the group, so later scans can start there.
func (b *Broker) advanceWatermark(ctx context.Context, q db.QueenQueue, group string) error {
	row, err := b.q.PartitionOldestPending(ctx, db.PartitionOldestPendingParams{ConsumerGroup: group, QueueID: q.ID})
	if err != nil {
		return fmt.Errorf("find oldest pending partition of %q: %w", q.Name, err)
	}
	from := row.ScannedAt.Time
	if row.OldestPending.Valid && row.OldestPending.Time.Before(from) {
		from = row.OldestPending.Time
	}
	err = b.q.ConsumerWatermarkAdvance(ctx, db.ConsumerWatermarkAdvanceParams{
		QueueID: q.ID, ConsumerGroup: group,
		ScanFrom:  pgtype.Timestamptz{Time: from.Add(-watermarkMargin), Valid: true},
		ScannedAt: row.ScannedAt,
	})
	if err != nil {
		return fmt.Errorf("advance watermark of %q on %q: %w", group, q.Name, err)
	}
	return nil
}
