package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// An advance the row already refuses (not 5 s above it) takes no row lock:
// it answers at once while another transaction holds the row, where it
// used to queue behind that transaction's commit. An advance the row takes
// still goes through the upsert and its lock.
func TestWatermarkAdvanceRefusedTakesNoLock(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	const g = "g"
	tb.push(item("wm", "", "m1", ""))
	q, ok, err := tb.b.lookupQueue(ctx, key(DefaultTenant, "wm"))
	require.NoError(t, err)
	require.True(t, ok)
	now := time.Now()
	ts := func(at time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: at, Valid: true} }
	advance := func(conn db.DBTX, to time.Time) error {
		return db.New(conn).ConsumerWatermarkAdvance(ctx, db.ConsumerWatermarkAdvanceParams{
			QueueID: q.ID, ConsumerGroup: g, ScanFrom: ts(to), ScannedAt: ts(now),
		})
	}
	require.NoError(t, advance(tb.pool, now.Add(-time.Minute)))

	holder, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, holder.Rollback(ctx)) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM queen.consumer_watermarks WHERE queue_id = $1 FOR UPDATE`, q.ID)
	require.NoError(t, err)

	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET lock_timeout = '3s'`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `RESET lock_timeout`) }()
	require.NoError(t, advance(conn, now.Add(-time.Minute+time.Second)), "refused: no lock wait")
	err = advance(conn, now.Add(-time.Minute+10*time.Second))
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "taken: waits on the row lock (%v)", err)
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available")
}
