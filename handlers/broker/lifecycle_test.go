package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/sql/pgtest"
)

// New does no I/O (it needs no database); Start and Stop are idempotent;
// a request before Start or after Stop is refused as unavailable, never
// hangs; Stop closes the spool the broker owns, started or not.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	idle := New(Config{})
	_, err := idle.Push(t.Context(), "", []PushItem{item("q", "", "x", "")})
	require.ErrorIs(t, err, ErrUnavailable, "not started")
	sp := spool.Open(spool.Config{Dir: t.TempDir()})
	never := New(Config{Spool: sp})
	require.NoError(t, never.Stop(t.Context()))
	require.ErrorIs(t, sp.Append(t.Context(), []spool.Record{{Queue: "q", Partition: "p", TransactionID: "t"}}), spool.ErrClosed,
		"Stop closed the spool")

	b := New(Config{Pool: pgtest.NewPool(t)})
	ctx := context.Background()
	require.NoError(t, b.Start(ctx))
	require.NoError(t, b.Start(ctx))
	out, err := b.Push(ctx, "", []PushItem{item("q", "", "x", "1")})
	require.NoError(t, err)
	require.Equal(t, Queued, out[0].Status)
	require.NoError(t, b.Stop(ctx))
	require.NoError(t, b.Stop(ctx))
	require.True(t, b.Draining())
	_, err = b.Push(ctx, "", []PushItem{item("q", "", "y", "1")})
	require.ErrorIs(t, err, ErrUnavailable, "stopped")
	require.NoError(t, b.Start(ctx), "a stopped broker does not start again")
	_, err = b.Ack(ctx, "", []AckItem{{TransactionID: "x"}})
	require.ErrorIs(t, err, ErrUnavailable)

	_, err = b.Push(ctx, "another-tenant", []PushItem{item("q", "", "z", "1")})
	require.ErrorIs(t, err, ErrInvalid, "native tenancy is not enabled")
}
