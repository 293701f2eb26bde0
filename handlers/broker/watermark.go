package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
)

// The pop watermark of a (queue, group) is the last_message_at below which
// no partition holds anything for the group, so that wildcard pops scan
// only the partitions above it (PartitionListPopCandidates).

// watermarkMargin is how far below a scan's clock its watermark stays at
// most. A push stamps last_message_at with its transaction's start time, so
// a push still running when the scan looked could commit a time just below
// the scan's clock (never below the start of that push); the margin covers
// transactions shorter than this. It bounds the start from the clock, not
// from the oldest pending partition: partitions below that one with a time
// inside the margin hold nothing, and a push into one moves its time up.
const watermarkMargin = 2 * time.Minute

// watermarkEvery is how often a pop that found candidates also advances the
// group's watermark.
const watermarkEvery = 5 * time.Second

// fullScanEvery is how often a pop scans from the stored watermark instead
// of this broker's start hint (below): a second net under the hint's
// reasoning, rare because from a watermark that trails a fast drain by its
// 5 s steps such a scan walks every partition consumed in between.
const fullScanEvery = 30 * time.Second

// watermarkDue reports whether this broker last advanced the (queue, group)
// watermark more than watermarkEvery ago, and if so claims the turn.
func (b *Broker) watermarkDue(queue QueueKey, group string) bool {
	return turnDue(&b.watermarkAt, watermarkKey{queue, group}, watermarkEvery)
}

// fullScanDue is the same for the scans from the stored watermark.
func (b *Broker) fullScanDue(queue QueueKey, group string) bool {
	return turnDue(&b.fullScanAt, watermarkKey{queue, group}, fullScanEvery)
}

// turnDue reports whether the time stored in m for key is more than every
// ago (or absent), and if so stores now, for one caller only.
func turnDue(m *sync.Map, key watermarkKey, every time.Duration) bool {
	now := time.Now()
	last, ok := m.Load(key)
	if ok && now.Sub(last.(time.Time)) < every {
		return false
	}
	if ok {
		return m.CompareAndSwap(key, last, now)
	}
	_, loaded := m.LoadOrStore(key, now)
	return !loaded
}

type watermarkKey struct {
	queue QueueKey
	group string
}

// The start hint of a (queue, group) is this broker's own, tighter version
// of the watermark, kept in memory and renewed by every scan: the oldest
// partition the scan saw still pending for the group (leased ones included,
// since a release or an expiry makes them candidates again with their old
// time), or the push floor read before the scan (push_floor.go) when that is
// older, for the pushes still in flight; the scan's clock less
// watermarkMargin when no floor is known. The stored watermark only moves in
// steps of 5 s every 5 s, keeps the margin, and a backlog pushed within a
// few seconds spans fewer than that: every partition consumed since then
// stayed in each scan. A seek, a subscription change or a group deletion
// stamps the watermark's reset_at, and PartitionListPopCandidates ignores a
// hint computed before it.
type popHint struct {
	from    pgtype.Timestamptz
	at      pgtype.Timestamptz
	queueID uuid.UUID // a queue deleted and created again starts afresh
}

// hintFrom is where a scan done at scannedAt that saw oldest as the oldest
// pending partition (none: invalid) lets the next one start: no higher than
// floor, the push floor loaded before the scan was sent, or than scannedAt
// less watermarkMargin when there is none (the bound the stored watermark
// keeps).
func hintFrom(oldest, scannedAt, floor pgtype.Timestamptz) popHint {
	from := scannedAt.Time.Add(-watermarkMargin)
	if floor.Valid && floor.Time.After(from) {
		from = floor.Time
	}
	if oldest.Valid && oldest.Time.Before(from) {
		from = oldest.Time
	}
	return popHint{from: pgtype.Timestamptz{Time: from, Valid: true}, at: scannedAt}
}

// startHint is the hint for the next scan of (queue, group) of q; the zero
// hint (no start above the watermark) when there is none or full is set.
func (b *Broker) startHint(queue QueueKey, q db.QueenQueue, group string, full bool) popHint {
	if full {
		return popHint{}
	}
	h, ok := b.popHints.Load(watermarkKey{queue, group})
	if !ok || h.(popHint).queueID != q.ID {
		return popHint{}
	}
	return h.(popHint)
}

func (b *Broker) setStartHint(queue QueueKey, q db.QueenQueue, group string, h popHint) {
	if h.at.Valid {
		h.queueID = q.ID
		b.popHints.Store(watermarkKey{queue, group}, h)
	}
}

// advanceWatermark runs after a scan of q: partitions older than the oldest
// one still pending (or than the clock less the margin, when that is older)
// hold nothing for the group, so later scans can start there. The search
// starts at the hint the scan used. The stored watermark keeps the margin,
// for the scans of other brokers and this one's full scans; the hint
// returned for the next scan uses floor instead (see hintFrom).
func (b *Broker) advanceWatermark(ctx context.Context, q db.QueenQueue, group string, hint popHint, floor pgtype.Timestamptz) (popHint, error) {
	row, err := b.q.PartitionOldestPending(ctx, db.PartitionOldestPendingParams{
		ConsumerGroup: group, QueueID: q.ID, HintFrom: hint.from, HintAt: hint.at,
	})
	if err != nil {
		return popHint{}, fmt.Errorf("find oldest pending partition of %q: %w", q.Name, err)
	}
	stored := hintFrom(row.OldestPending, row.ScannedAt, pgtype.Timestamptz{})
	err = b.q.ConsumerWatermarkAdvance(ctx, db.ConsumerWatermarkAdvanceParams{
		QueueID: q.ID, ConsumerGroup: group, ScanFrom: stored.from, ScannedAt: row.ScannedAt,
	})
	if err != nil {
		return popHint{}, fmt.Errorf("advance watermark of %q on %q: %w", group, q.Name, err)
	}
	return hintFrom(row.OldestPending, row.ScannedAt, floor), nil
}
