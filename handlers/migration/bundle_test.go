package migration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// endpointOf turns a harness database URL into an Endpoint.
func endpointOf(t *testing.T, url string) Endpoint {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	return Endpoint{Host: cfg.Host, Port: int(cfg.Port), Database: cfg.Database, User: cfg.User, Password: cfg.Password}
}

func connect(t *testing.T, e Endpoint) *pgx.Conn {
	t.Helper()
	conn, err := e.Connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func run(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func count(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// waitDone waits for the running migration to end.
func waitDone(t *testing.T, r *Runner) Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, r.Wait(ctx))
	return r.Status()
}

// eventually polls cond until it holds or the deadline passes. Only for
// what is inherently asynchronous (the runner's goroutine, a child process).
// Not require.Eventually: that runs cond on another goroutine, and these
// conditions query the database through require, whose FailNow must run on
// the test's own goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// fakeTools writes a pg_dump and a pg_restore that record their arguments
// and environment and then wait for the test: each reads its exit code from
// a FIFO, so opening the FIFO for writing returns exactly when the tool has
// got that far. pg_restore first reads its standard input to the end (that
// is, until pg_dump exited). Only shell builtins run while they wait, so
// killing the shell leaves no process behind.
type fakeTools struct {
	dir               string
	pgDump, pgRestore string
}

func newFakeTools(t *testing.T) fakeTools {
	t.Helper()
	dir := t.TempDir()
	f := fakeTools{dir: dir, pgDump: filepath.Join(dir, "pg_dump"), pgRestore: filepath.Join(dir, "pg_restore")}
	for _, name := range []string{"dump.fifo", "restore.fifo"} {
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o600))
	}
	script := func(tool, extra string) string {
		d := "'" + dir + "'"
		return "#!/bin/sh\n" +
			"printf '%s\\n' \"$@\" > " + d + "/" + tool + ".args\n" +
			"env | grep '^PG' | sort > " + d + "/" + tool + ".env\n" +
			extra +
			"read code < " + d + "/" + tool + ".fifo\n" +
			// flood: write to stdout until the pipe has no reader left.
			"if [ \"$code\" = flood ]; then while :; do echo 0123456789abcdef0123456789abcdef; done; fi\n" +
			"echo '" + tool + " says bye' >&2\n" +
			"exit \"$code\"\n"
	}
	require.NoError(t, os.WriteFile(f.pgDump, []byte(script("dump", "")), 0o700))
	require.NoError(t, os.WriteFile(f.pgRestore, []byte(script("restore", "while IFS= read -r line; do :; done\n")), 0o700))
	return f
}

// reached blocks until the tool opens its FIFO and returns the FIFO's
// writing end.
func (f fakeTools) reached(t *testing.T, tool string) *os.File {
	t.Helper()
	opened := make(chan *os.File, 1)
	failed := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(filepath.Join(f.dir, tool+".fifo"), os.O_WRONLY, 0)
		if err != nil {
			failed <- err
			return
		}
		opened <- w
	}()
	select {
	case w := <-opened:
		return w
	case err := <-failed:
		t.Fatalf("open %s fifo: %v", tool, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("fake %s never started", tool)
	}
	return nil
}

// finish lets a tool that reached its FIFO exit with code.
func finish(t *testing.T, w *os.File, code string) {
	t.Helper()
	_, err := w.WriteString(code + "\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

func (f fakeTools) lines(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.dir, name))
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// closedPort is a loopback port nobody listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}
