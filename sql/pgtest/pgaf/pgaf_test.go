package pgaf_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest/pgaf"
)

// The formation starts healthy (a primary and a synchronous secondary);
// its multi-host URL always reaches the primary; a commit survives
// `perform failover`; a killed postmaster comes back.
func TestFormation(t *testing.T) {
	f := pgaf.Start(t, pgaf.Options{SSL: true})
	ctx := t.Context()
	first, err := f.Primary(ctx)
	require.NoError(t, err)
	require.NotNil(t, first)

	write := func(v int) int {
		t.Helper()
		conn, err := pgx.Connect(ctx, f.URL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS t (v int)")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "INSERT INTO t VALUES ($1)", v)
		require.NoError(t, err)
		var port int
		var ssl bool
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT inet_server_port(), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&port, &ssl))
		require.True(t, ssl)
		return port
	}
	require.Equal(t, first.Port, write(1))

	second := f.Failover(t)
	require.NotEqual(t, first, second)
	require.Equal(t, second.Port, write(2))
	f.WaitHealthy(t)

	killed := f.KillPrimaryPostmaster(t)
	require.Equal(t, second, killed)
	f.WaitHealthy(t)
	var n int
	require.Eventually(t, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, f.URL())
		if err != nil {
			return false
		}
		defer conn.Close(cctx)
		return conn.QueryRow(cctx, "SELECT count(*) FROM t").Scan(&n) == nil
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, 2, n)
}
