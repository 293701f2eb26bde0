package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

// syncBuffer is a log sink the pool's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

const resetLine = "closing every pooled connection"

func guardedPool(t *testing.T, env map[string]string) (*pgxpool.Pool, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	pool, err := newPool(t.Context(), loadEnv(t, env), slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, logs
}

// acquire takes a connection that is released when the test ends at the
// latest: pool.Close waits for every acquired connection, so a failed
// assertion must not leave one out.
func acquire(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	c, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(c.Release)
	return c
}

func backendPID(t *testing.T, c *pgxpool.Conn) uint32 {
	t.Helper()
	return c.Conn().PgConn().PID()
}

// readOnly makes the server refuse writes on this one session, as a
// demoted primary refuses them on all of its sessions.
func readOnly(t *testing.T, c *pgxpool.Conn) {
	t.Helper()
	_, err := c.Exec(t.Context(), "SET SESSION default_transaction_read_only = on")
	require.NoError(t, err)
}

func requireReadOnlyError(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "25006", pgErr.Code)
}

// A connection that meets a read-only server is closed at that first error,
// not handed out again, and the whole pool is reset once: the idle
// connections to the same server go too. An error on a connection from
// before the reset does not reset again, and neither does a cancelled
// statement, which closes its connection but says nothing of the server.
func TestPoolDropsReadOnlyServer(t *testing.T) {
	t.Parallel()
	pool, logs := guardedPool(t, map[string]string{"PG_URL": pgtest.NewDB(t), "DB_POOL_SIZE": "6"})
	ctx := t.Context()

	// Four connections of the first generation: a is about to fail, b is
	// busy during the reset, the two others idle.
	conns := make([]*pgxpool.Conn, 4)
	before := map[uint32]bool{}
	for i := range conns {
		c := acquire(t, pool)
		conns[i] = c
		before[backendPID(t, c)] = true
	}
	a, b := conns[0], conns[1]
	conns[2].Release()
	conns[3].Release()
	require.EqualValues(t, 2, pool.Stat().IdleConns())

	readOnly(t, a)
	_, err := a.Exec(ctx, "CREATE TABLE refused (x int)")
	requireReadOnlyError(t, err)
	require.True(t, a.Conn().IsClosed(), "closed at the first read-only error")
	a.Release()
	require.Equal(t, 1, logs.count(resetLine))
	require.Eventually(t, func() bool { return pool.Stat().IdleConns() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the idle connections of the old generation are closed")

	// A new connection of the new generation works.
	c := acquire(t, pool)
	fresh := backendPID(t, c)
	require.False(t, before[fresh])
	_, err = c.Exec(ctx, "CREATE TABLE accepted (x int)")
	require.NoError(t, err)
	c.Release()

	// b is of the old generation: its failure is old news.
	readOnly(t, b)
	_, err = b.Exec(ctx, "CREATE TABLE refused (x int)")
	requireReadOnlyError(t, err)
	require.True(t, b.Conn().IsClosed())
	b.Release()
	require.Equal(t, 1, logs.count(resetLine), "no second reset for an old connection")

	// A cancelled statement closes its connection without a reset.
	c = acquire(t, pool)
	require.Equal(t, fresh, backendPID(t, c), "the fresh connection survived")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Exec(short, "SELECT pg_sleep(30)")
	cancel()
	require.Error(t, err)
	c.Release()
	require.Equal(t, 1, logs.count(resetLine), "a cancelled statement is not a server failure")

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM accepted").Scan(&n))
}

// A pool on a server that died: the first failing statement resets it, so
// the other idle connections are not handed out to fail one by one.
func TestPoolResetOnTerminatedConnection(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	pool, logs := guardedPool(t, map[string]string{"PG_URL": dbURL, "DB_POOL_SIZE": "4"})
	ctx := t.Context()
	a := acquire(t, pool)
	acquire(t, pool).Release()

	admin, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", backendPID(t, a))
	require.NoError(t, err)
	_, err = a.Exec(ctx, "SELECT 1")
	require.Error(t, err) // 57P01 or a broken socket, depending on who reads first
	require.True(t, a.Conn().IsClosed())
	a.Release()
	require.Equal(t, 1, logs.count(resetLine))
	require.Eventually(t, func() bool { return pool.Stat().TotalConns() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, pool.Ping(ctx))
}

// A host list is tried in order: an unreachable first host is skipped. A
// lone host that refuses writes fails the connection itself
// (target_session_attrs=read-write), not each write.
func TestPoolHostList(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	dead := freePort(t)
	pool, _ := guardedPool(t, map[string]string{
		"PG_HOST": "127.0.0.1:" + strconv.Itoa(dead) + "," + u.Host, "PG_USER": u.User.Username(),
		"PG_DB": strings.TrimPrefix(u.Path, "/"), "QUEEN_PG_CONNECT_TIMEOUT_MS": "2000",
	})
	var port int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT inet_server_port()").Scan(&port))
	require.Equal(t, u.Port(), strconv.Itoa(port))

	admin, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer admin.Close(t.Context())
	db := strings.TrimPrefix(u.Path, "/")
	_, err = admin.Exec(t.Context(), "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET default_transaction_read_only = on")
	require.NoError(t, err)
	ro, _ := guardedPool(t, map[string]string{"PG_URL": dbURL})
	err = ro.Ping(t.Context())
	require.ErrorIs(t, err, pgconn.ErrReadOnlyConnection, "%v", err)
}
