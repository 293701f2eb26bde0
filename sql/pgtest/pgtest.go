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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
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

// cluster is the throwaway PostgreSQL the harness starts.
type cluster struct {
	root     string // temp dir holding everything below
	dataDir  string
	sockDir  string
	logPath  string
	postgres string
	cred     *syscall.Credential // run as the postgres OS user when we are root
	port     int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

func newCluster() (c *cluster, err error) {
	initdb, err := findBin("initdb")
	if err != nil {
		return nil, err
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(postgres); err != nil {
		if postgres, err = findBin("postgres"); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base := baseDir(cred != nil)
	sweepStale(base)
	root, err := os.MkdirTemp(base, tmpPrefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	c = &cluster{
		root:     root,
		dataDir:  filepath.Join(root, "data"),
		sockDir:  filepath.Join(root, "run"),
		logPath:  filepath.Join(root, "postgres.log"),
		postgres: postgres,
		cred:     cred,
	}
	defer func() {
		if err != nil {
			_ = c.destroy()
		}
	}()
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("write owner file: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if cred != nil {
		for _, dir := range []string{root, c.sockDir} {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("chown %s to the postgres user: %w", dir, err)
			}
		}
	}

	cmd := exec.Command(initdb, "-D", c.dataDir, "-A", "trust", "-U", superuser,
		"--no-sync", "-E", "UTF8", "--locale=C")
	cmd.Dir = root
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s failed: %w\n%s", initdb, err, out)
	}

	// A free port can be taken between probing and binding: retry a few times.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		err = c.start()
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "could not bind") {
			return c, err
		}
	}
}

func (c *cluster) url(db string) *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
}

// start runs postgres and waits until it accepts connections. It does
// nothing if the server is already running.
func (c *cluster) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(c.postgres,
		"-D", c.dataDir,
		"-p", strconv.Itoa(c.port),
		"-h", "127.0.0.1",
		"-k", c.sockDir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
	)
	cmd.Dir = c.root
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.cred,
		// Its own process group keeps a terminal's ^C away from it, and the
		// kernel kills it if the test process dies without calling Main's
		// cleanup (a panic or a timeout).
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.postgres, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited

	if err := c.waitReady(exited); err != nil {
		c.killLocked()
		return fmt.Errorf("%w\nserver log (%s):\n%s", err, c.logPath, tail(c.logPath, 20))
	}
	return nil
}

func (c *cluster) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	adminURL := c.url("postgres").String()
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, adminURL)
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		lastErr = err
		select {
		case <-exited:
			return fmt.Errorf("postgres exited during startup (last connect error: %v)", lastErr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections on port %d after %s: %w", c.port, readyTimeout, lastErr)
		}
	}
}

// stop signals postgres (SIGINT: fast shutdown, SIGQUIT: immediate) and
// waits for it to exit, killing its process group if it takes too long.
func (c *cluster) stop(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres: %w", err)
	}
	select {
	case <-c.exited:
		c.cmd = nil
		return nil
	case <-time.After(stopTimeout):
	}
	c.killLocked()
	return fmt.Errorf("postgres did not stop within %s; killed", stopTimeout)
}

func (c *cluster) killLocked() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
	c.cmd = nil
}

// destroy stops the server the quick way and removes every file.
func (c *cluster) destroy() error {
	stopErr := c.stop(syscall.SIGQUIT)
	if err := os.RemoveAll(c.root); err != nil {
		return errors.Join(stopErr, fmt.Errorf("remove cluster dir: %w", err))
	}
	return stopErr
}

// findBin looks name up on PATH, then in the newest /usr/lib/postgresql/*/bin.
func findBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name))
	best, bestVersion := "", -1.0
	for _, m := range matches {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(m))), 64)
		if err == nil && v > bestVersion {
			best, bestVersion = m, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin; install PostgreSQL or set %s", name, EnvDatabaseURL)
	}
	return best, nil
}

// credential returns the postgres OS user to run the server as when we are
// root (initdb and postgres refuse to run as root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres OS user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// baseDir is os.TempDir, unless the server runs as another user that cannot
// reach it (TMPDIR under /root, say); then /tmp.
func baseDir(otherUser bool) string {
	dir := os.TempDir()
	if !otherUser {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// sweepStale removes cluster dirs left behind by test processes that died
// without running Main's cleanup (the kernel already killed their servers).
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tmpPrefix+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || alive(owner) {
			continue
		}
		if pm, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pm), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && alive(pid) {
				continue
			}
		}
		_ = os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// childEnv is our environment without the libpq variables that could point
// initdb or postgres somewhere else.
func childEnv() []string {
	out := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, lines int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	all := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func randomTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
