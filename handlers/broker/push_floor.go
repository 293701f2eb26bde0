package broker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The push floor bounds what a push still to commit can stamp, so that the
// pop start hint (watermark.go) can climb to the oldest pending partition
// as soon as no older push can still appear below it, instead of staying
// watermarkMargin below the clock.
//
// Why it holds: a push stamps last_message_at with its transaction's start
// (the SQL API with its commit time, later still), and a transaction keeps
// its xact_start in pg_stat_activity until after its commit is visible.
// ConsumerWatermarkPushFloor reads the oldest xact_start of the database's
// sessions (or its own start when none is older) at a moment A. A push that
// commits after A was open at A (its start is counted) or started after A
// (its start is later than the floor). So a scan whose snapshot is taken
// after A sees every push stamped below the floor: the floor is loaded
// before the scan's query is sent, and only a read that has returned is
// ever stored. An older floor stays true, only less tight.
//
// pushFloorSlack covers the one gap in that: PostgreSQL takes a
// transaction's start time from its first statement's arrival a few
// microseconds before it publishes it in pg_stat_activity. Whatever slips
// past anyway (a backend stalled for longer between the two, a transaction
// the broker's role may not see and the query missed) is still found by the
// scan from the stored watermark, which keeps the clock-based margin, at
// most fullScanEvery later.
const pushFloorSlack = 500 * time.Millisecond

// pushFloorEvery is how old the floor may get before a pop reads it again:
// the hint trails the drain by about this much plus the oldest transaction
// open in the database.
const pushFloorEvery = 500 * time.Millisecond

// pushFloorState is the last floor read, and when (this process's clock).
type pushFloorState struct {
	from   pgtype.Timestamptz // invalid: unknown, the margin applies
	readAt time.Time
}

type pushFloor struct {
	cur     atomic.Pointer[pushFloorState]
	reading atomic.Bool
}

// pushFloor returns the floor a scan about to be sent may use, reading it
// again first when it is older than pushFloorEvery (one caller at a time;
// the others use the one they have). A failed read keeps the old floor: it
// is still true. The invalid floor means none known.
func (b *Broker) pushFloor(ctx context.Context) pgtype.Timestamptz {
	cur := b.floor.cur.Load()
	if cur != nil && time.Since(cur.readAt) < pushFloorEvery {
		return cur.from
	}
	if b.floor.reading.CompareAndSwap(false, true) {
		defer b.floor.reading.Store(false)
		row, err := b.q.ConsumerWatermarkPushFloor(ctx)
		if err == nil {
			next := &pushFloorState{readAt: time.Now()}
			if row.Floor.Valid {
				next.from = pgtype.Timestamptz{Time: row.Floor.Time.Add(-pushFloorSlack), Valid: true}
			}
			b.floor.cur.Store(next)
			return next.from
		}
		b.log.Debug("push floor read failed", "err", err)
	}
	if cur == nil {
		return pgtype.Timestamptz{}
	}
	return cur.from
}
