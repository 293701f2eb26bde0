package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewDB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	urlA, urlB := pgtest.NewDB(t), pgtest.NewDB(t)
	require.NotEqual(t, urlA, urlB)

	names := make(map[string]bool)
	for _, u := range []string{urlA, urlB} {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })

		var name string
		var hasMessages bool
		err = conn.QueryRow(ctx,
			"SELECT current_database(), to_regclass('queen.messages') IS NOT NULL").Scan(&name, &hasMessages)
		require.NoError(t, err)
		require.True(t, hasMessages, "queen.messages missing in %s", name)
		names[name] = true
	}
	require.Len(t, names, 2)
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)

	var tz string
	require.NoError(t, pool.QueryRow(t.Context(), "SHOW TimeZone").Scan(&tz))
	require.Equal(t, "UTC", tz)
}

func TestNewEmptyDB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	var hasSchema bool
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'queen')").Scan(&hasSchema))
	require.False(t, hasSchema)
}

// Not parallel: it stops the cluster every test in this process shares.
func TestStopStart(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	require.NoError(t, pool.Ping(ctx))

	pgtest.Stop(t)
	pgtest.Stop(t) // idempotent
	require.Error(t, pool.Ping(ctx))

	pgtest.Start(t)
	pgtest.Start(t) // idempotent
	var one int
	require.NoError(t, pool.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	require.EqualValues(t, pgtest.ServerInfo().Port, pool.Config().ConnConfig.Port)
}
