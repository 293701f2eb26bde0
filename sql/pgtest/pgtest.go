// Package pgtest is the test harness for everything that talks to
// PostgreSQL. Only _test.go files import it.
//
// With QUEEN_TEST_DATABASE_URL set (a postgres:// URL of a role that may
// CREATE DATABASE) the tests use that server. Otherwise the first test that
// needs a database starts a throwaway cluster from the installed binaries
// (initdb and postgres on PATH, else /usr/lib/postgresql/*/bin) on a free
// loopback port; it lives until the test process ends. Packages that use the
// harness must hand their TestMain to Main, which stops the cluster and
// removes its files:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Each test gets its own database cloned from a template that the migrations
// were applied to once per process (per migration content on a shared
// server), so every run also exercises the migrations.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/migrations"
	"github.com/queenforgo/queen/sql/pgarray"
	"github.com/queenforgo/queen/sql/pgjsonb"
	"github.com/queenforgo/queen/sql/pguuid"
)

// EnvDatabaseURL names the variable that points the harness at an existing
// server instead of a throwaway cluster.
const EnvDatabaseURL = "QUEEN_TEST_DATABASE_URL"

const (
	superuser       = "postgres"
	templateName    = "queen_template"
	createLockKey   = int64(0x7175656e74706c) // serializes CREATE DATABASE across processes
	readyTimeout    = 30 * time.Second
	stopTimeout     = 30 * time.Second
	opTimeout       = 2 * time.Minute
	tmpPrefix       = "queen-pgtest-"
	ownerFile       = "owner.pid"
	harnessRevision = "1" // bump to force new templates on shared servers
)

// Server describes the server the harness uses.
type Server struct {
	Host string
	Port int
	User string
	// SocketDir, DataDir and LogFile are set only for the harness-started
	// cluster (Managed).
	SocketDir string
	DataDir   string
	LogFile   string
	// Managed is true when the harness started the cluster, which is what
	// Stop and Start need.
	Managed bool
}

var (
	mainCalled atomic.Bool
	setupOnce  sync.Once
	setupErr   error
	env        *harness

	createMu sync.Mutex // CREATE DATABASE from one template is not concurrent-safe
	dbSeq    atomic.Int64
	runTag   = randomTag()
)

type harness struct {
	adminURL *url.URL // maintenance database; its path is replaced per database
	template string
	info     Server
	cluster  *cluster // nil for QUEEN_TEST_DATABASE_URL
}

// Main runs the tests, stops the throwaway cluster if one was started,
// removes its files and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	if env != nil && env.cluster != nil {
		if err := env.cluster.destroy(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// NewDB creates a database cloned from the migrated template, drops it when
// the test ends and returns its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	return newDB(t, true)
}

// NewEmptyDB creates a database without the migrations (cloned from
// template1), drops it when the test ends and returns its URL. It is for
// testing the migrations themselves.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	return newDB(t, false)
}

// NewPool returns a pool on a fresh database from NewDB, with the session
// time zone set to UTC. The pool is closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDB(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", dbURL, err)
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	// The broker's type registrations (cmd/queen openPool), so that tests
	// run the same encode paths.
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		pguuid.Register(conn.TypeMap())
		pgarray.Register(conn.TypeMap())
		pgjsonb.Register(conn.TypeMap())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool on %s: %v", dbURL, err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping %s: %v", dbURL, err)
	}
	return pool
}

// AdminURL returns the URL of the maintenance database (postgres on the
// throwaway cluster, the given URL otherwise), starting the cluster if
// needed. It has no testing.TB to fail, so it panics if the server cannot
// be set up.
func AdminURL() string {
	return mustSetup().adminURL.String()
}

// ServerInfo describes the server, starting the cluster if needed. Like
// AdminURL it panics if the server cannot be set up.
func ServerInfo() Server {
	return mustSetup().info
}

// Stop shuts the harness-started cluster down (fast shutdown: open sessions
// end with SQLSTATE 57P01) and waits until it has exited; Start brings it
// back on the same port with the same data. Both are idempotent. They are
// for fault tests and skip the test when QUEEN_TEST_DATABASE_URL is set.
//
// The cluster is shared by every test in the process, so a test that calls
// Stop must not call t.Parallel and must not share the process with parallel
// tests still using the database. If the test ends with the cluster stopped,
// a cleanup starts it again (before the test's databases are dropped).
func Stop(t testing.TB) {
	t.Helper()
	c := managed(t)
	if err := c.stop(syscall.SIGINT); err != nil {
		t.Fatalf("pgtest: stop cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.start(); err != nil {
			t.Errorf("pgtest: restart cluster after test: %v", err)
		}
	})
}

// Start starts the harness-started cluster again after Stop. See Stop.
func Start(t testing.TB) {
	t.Helper()
	c := managed(t)
	if err := c.start(); err != nil {
		t.Fatalf("pgtest: start cluster: %v", err)
	}
}

func managed(t testing.TB) *cluster {
	t.Helper()
	h := setup(t)
	if h.cluster == nil {
		t.Skipf("pgtest: Stop and Start need the harness-started cluster; %s is set", EnvDatabaseURL)
	}
	return h.cluster
}

func newDB(t testing.TB, migrated bool) string {
	t.Helper()
	h := setup(t)
	name := fmt.Sprintf("queen_t%d_%s_%d", os.Getpid(), runTag, dbSeq.Add(1))
	from := "template1"
	if migrated {
		from = h.template
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := h.withCreateLock(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(from))
		return err
	})
	if err != nil {
		t.Fatalf("pgtest: create database %s from %s: %v", name, from, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := h.exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return h.dbURL(name)
}

func mustSetup() *harness {
	h, err := setupHarness()
	if err != nil {
		panic("pgtest: " + err.Error())
	}
	return h
}

func setup(t testing.TB) *harness {
	t.Helper()
	h, err := setupHarness()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return h
}

func setupHarness() (*harness, error) {
	setupOnce.Do(func() {
		h, err := newHarness()
		if err != nil {
			setupErr = err
			return
		}
		env = h // published before the template so Main can always clean up
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := h.ensureTemplate(ctx); err != nil {
			setupErr = fmt.Errorf("prepare template database %s: %w", h.template, err)
		}
	})
	return env, setupErr
}

func newHarness() (*harness, error) {
	sum, err := migrationsHash()
	if err != nil {
		return nil, err
	}
	if raw := os.Getenv(EnvDatabaseURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return nil, fmt.Errorf("%s must be a postgres:// URL", EnvDatabaseURL)
		}
		cfg, err := pgx.ParseConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", EnvDatabaseURL, err)
		}
		return &harness{
			adminURL: u,
			// Other processes and branches share the server: the name carries
			// the migrations' hash so nobody clones a template of other content.
			template: templateName + "_" + sum[:12],
			info:     Server{Host: cfg.Host, Port: int(cfg.Port), User: cfg.User},
		}, nil
	}
	if !mainCalled.Load() {
		return nil, fmt.Errorf("TestMain must call pgtest.Main(m), which stops the throwaway cluster (or set %s)", EnvDatabaseURL)
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	return &harness{
		adminURL: c.url("postgres"),
		template: templateName,
		info: Server{
			Host: "127.0.0.1", Port: c.port, User: superuser,
			SocketDir: c.sockDir, DataDir: c.dataDir, LogFile: c.logPath, Managed: true,
		},
		cluster: c,
	}, nil
}

func (h *harness) dbURL(name string) string {
	u := *h.adminURL
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

func (h *harness) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, h.adminURL.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// withCreateLock runs fn on a maintenance connection while holding the
// in-process mutex and an advisory lock, so processes sharing a server do
// not clone a template concurrently either. Closing the connection releases
// the advisory lock.
func (h *harness) withCreateLock(ctx context.Context, fn func(*pgx.Conn) error) error {
	createMu.Lock()
	defer createMu.Unlock()
	conn, err := pgx.Connect(ctx, h.adminURL.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", createLockKey); err != nil {
		return fmt.Errorf("take create lock: %w", err)
	}
	return fn(conn)
}

// ensureTemplate builds the template database unless one with the current
// migrations' hash in its comment exists. The comment is written last, so a
// half-built template from a crashed run is rebuilt.
func (h *harness) ensureTemplate(ctx context.Context) error {
	sum, err := migrationsHash()
	if err != nil {
		return err
	}
	want := "queen pgtest template " + sum
	return h.withCreateLock(ctx, func(conn *pgx.Conn) error {
		var comment *string
		err := conn.QueryRow(ctx,
			"SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
			h.template).Scan(&comment)
		switch {
		case err == nil && comment != nil && *comment == want:
			return nil
		case err == nil:
			if _, err := conn.Exec(ctx, "DROP DATABASE "+ident(h.template)+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("drop stale template: %w", err)
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("look up template: %w", err)
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(h.template)); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		tconn, err := pgx.Connect(ctx, h.dbURL(h.template))
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		err = migrate.Apply(ctx, tconn, nil)
		// The template must have no sessions before it can be cloned.
		if cerr := tconn.Close(ctx); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
		if err != nil {
			return err
		}
		// Nobody may connect to it any more: a stray session would block
		// every clone.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(h.template)+" WITH ALLOW_CONNECTIONS false"); err != nil {
			return fmt.Errorf("close template to connections: %w", err)
		}
		if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident(h.template)+" IS "+literal(want)); err != nil {
			return fmt.Errorf("mark template complete: %w", err)
		}
		return nil
	})
}

// migrationsHash identifies the migrations' content, so an edited migration
// gets a fresh template on a shared server.
func migrationsHash() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", fmt.Errorf("list migrations: %w", err)
	}
	slices.Sort(names)
	h := sha256.New()
	fmt.Fprintf(h, "pgtest %s\x00", harnessRevision)
	for _, name := range names {
		body, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return "", fmt.Errorf("read migration %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func randomTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
