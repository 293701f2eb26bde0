// Package migration copies the broker's schema to another PostgreSQL with
// pg_dump | pg_restore, in the background, one migration at a time per
// broker (the dashboard's Migration view).
package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The states a migration goes through, as the dashboard polls them.
const (
	StatusIdle      = "idle"
	StatusDumping   = "dumping"
	StatusRestoring = "restoring"
	StatusComplete  = "complete"
	StatusError     = "error"
)

// Errors of Start and Reset.
var (
	ErrRunning      = errors.New("migration already in progress")
	ErrToolsMissing = errors.New("pg_dump and pg_restore are needed for migrations but are not installed on this broker (install the PostgreSQL client tools)")
	ErrSameDatabase = errors.New("the target is this broker's own database")
)

// ExcludableTables are the tables whose rows a migration may skip (their
// definitions are always copied, so foreign keys stay valid).
var ExcludableTables = []string{
	"messages", "dead_letter_queue", "message_traces", "message_trace_names", "messages_consumed",
	"stats", "stats_history", "system_metrics", "worker_metrics", "worker_metrics_summary",
	"queue_lag_metrics", "retention_history",
}

// outputLimit bounds the captured output of each tool.
const outputLimit = 64 << 10

// Endpoint is a PostgreSQL server and database to connect to.
type Endpoint struct {
	Host string
	Port int
	// Fallbacks are more servers of the same database (an HA pair's
	// standby), tried in order after Host:Port as libpq tries a host list.
	Fallbacks []Server
	Database  string
	User      string
	Password  string
	// SSLMode is libpq's sslmode: disable, require, verify-ca, verify-full.
	SSLMode string
	// SSLRootCertPEM is a CA bundle for verify modes; empty uses libpq's
	// default (~/.postgresql/root.crt) for the tools and the system roots
	// for the broker's own connections.
	SSLRootCertPEM string
}

// Server is one PostgreSQL server: a host name or address and its port.
type Server struct {
	Host string
	Port int
}

// servers is Host:Port followed by the fallbacks.
func (e Endpoint) servers() []Server {
	return append([]Server{{Host: e.Host, Port: e.Port}}, e.Fallbacks...)
}

// hostList and portList are the servers as libpq's comma-separated host
// and port lists, which pair up by position.
func (e Endpoint) hostList() string {
	var b strings.Builder
	for i, s := range e.servers() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s.Host)
	}
	return b.String()
}

func (e Endpoint) portList() string {
	var b strings.Builder
	for i, s := range e.servers() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s.Port))
	}
	return b.String()
}

func (e Endpoint) sslMode() string {
	if e.SSLMode == "" {
		return "disable"
	}
	return e.SSLMode
}

// connString is e as a libpq keyword/value string.
func (e Endpoint) connString() string {
	q := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	return fmt.Sprintf("host=%s port=%s dbname=%s user=%s password=%s sslmode=%s connect_timeout=10",
		q(e.hostList()), e.portList(), q(e.Database), q(e.User), q(e.Password), e.sslMode())
}

// env is the libpq environment for the command-line tools: the password
// goes there rather than on a command line other users can read.
func (e Endpoint) env(rootCertFile string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	env = append(env, "PGHOST="+e.hostList(), "PGPORT="+e.portList(), "PGDATABASE="+e.Database,
		"PGUSER="+e.User, "PGPASSWORD="+e.Password, "PGSSLMODE="+e.sslMode(), "PGCONNECT_TIMEOUT=10",
		"PGAPPNAME=queen-migration")
	if rootCertFile != "" {
		env = append(env, "PGSSLROOTCERT="+rootCertFile)
	}
	return env
}

// Connect opens one connection to e.
func (e Endpoint) Connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(e.connString())
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["TimeZone"] = "UTC"
	return pgx.ConnectConfig(ctx, cfg)
}

// same reports whether a and b name the same database on a server they
// share, loopback spellings taken as one host.
func same(a, b Endpoint) bool {
	norm := func(h string) string {
		h = strings.ToLower(strings.Trim(h, "[]"))
		switch h {
		case "localhost", "127.0.0.1", "::1", "":
			return "loopback"
		}
		return h
	}
	if a.Database != b.Database {
		return false
	}
	for _, x := range a.servers() {
		for _, y := range b.servers() {
			if norm(x.Host) == norm(y.Host) && x.Port == y.Port {
				return true
			}
		}
	}
	return false
}

// Options of one migration.
type Options struct {
	Schema           string   // default "queen"
	ExcludeTableData []string // only ExcludableTables are honoured
}

// Status is a migration's progress.
type Status struct {
	Status        string
	CurrentStep   string
	Elapsed       time.Duration
	Error         string
	DumpOutput    string
	RestoreOutput string
}

// Config is what New needs.
type Config struct {
	// Source is this broker's own database.
	Source Endpoint
	Logger *slog.Logger
	// PGDump and PGRestore are the tools' paths; empty looks them up on
	// PATH.
	PGDump, PGRestore string
}

// Runner runs migrations. The zero value is not usable; call New.
type Runner struct {
	source            Endpoint
	log               *slog.Logger
	pgDump, pgRestore string
	mu                sync.Mutex
	st                Status
	started, finished time.Time
	running           bool
	done              chan struct{}
	cancel            context.CancelFunc
	closed            bool
}

// New returns an idle runner.
func New(cfg Config) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	look := func(p, name string) string {
		if p != "" {
			if _, err := os.Stat(p); err != nil {
				return ""
			}
			return p
		}
		if found, err := exec.LookPath(name); err == nil {
			return found
		}
		return ""
	}
	r := &Runner{
		source: cfg.Source, log: cfg.Logger,
		pgDump: look(cfg.PGDump, "pg_dump"), pgRestore: look(cfg.PGRestore, "pg_restore"),
		st: Status{Status: StatusIdle, CurrentStep: ""},
	}
	return r
}

// Available is nil when the tools are installed, else ErrToolsMissing.
func (r *Runner) Available() error {
	if r.pgDump == "" || r.pgRestore == "" {
		return ErrToolsMissing
	}
	return nil
}

// Status returns the current or last migration's progress.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	switch {
	case r.running:
		st.Elapsed = time.Since(r.started)
	case !r.finished.IsZero():
		st.Elapsed = r.finished.Sub(r.started)
	}
	return st
}

// Reset forgets the last outcome; ErrRunning while a migration runs.
func (r *Runner) Reset() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return ErrRunning
	}
	r.st = Status{Status: StatusIdle}
	r.started, r.finished = time.Time{}, time.Time{}
	return nil
}

// Start begins a migration to target in the background.
func (r *Runner) Start(target Endpoint, opts Options) error {
	if err := r.Available(); err != nil {
		return err
	}
	if same(target, r.source) {
		return ErrSameDatabase
	}
	if opts.Schema == "" {
		opts.Schema = "queen"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return ErrRunning
	}
	if r.closed {
		return errors.New("broker is shutting down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.running, r.cancel, r.done = true, cancel, make(chan struct{})
	r.started, r.finished = time.Now(), time.Time{}
	r.st = Status{Status: StatusDumping, CurrentStep: "Preparing target schema..."}
	go r.run(ctx, target, opts, r.done)
	return nil
}

// Wait blocks until the running migration (if any) ends or ctx is done.
func (r *Runner) Wait(ctx context.Context) error {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop cancels a running migration (killing the tools) and waits for it.
// Idempotent; no migration starts afterwards.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.closed = true
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

func (r *Runner) setStep(status, step string) {
	r.mu.Lock()
	r.st.Status, r.st.CurrentStep = status, step
	r.mu.Unlock()
}

func (r *Runner) run(ctx context.Context, target Endpoint, opts Options, done chan struct{}) {
	defer close(done)
	dumpOut, restoreOut, err := r.migrate(ctx, target, opts)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running, r.finished = false, time.Now()
	r.st.DumpOutput, r.st.RestoreOutput = dumpOut, restoreOut
	if err != nil {
		r.st.Status, r.st.Error = StatusError, err.Error()
		r.log.Warn("migration failed", "target_host", target.Host, "target_db", target.Database, "err", err)
		return
	}
	r.st.Status, r.st.CurrentStep = StatusComplete, "Migration complete"
	r.log.Info("migration complete", "target_host", target.Host, "target_db", target.Database,
		"elapsed_ms", r.finished.Sub(r.started).Milliseconds())
}

func (r *Runner) migrate(ctx context.Context, target Endpoint, opts Options) (dumpOut, restoreOut string, err error) {
	conn, err := target.Connect(ctx)
	if err != nil {
		return "", "", fmt.Errorf("connect to target: %w", err)
	}
	r.setStep(StatusDumping, "Preparing target database (creating schema)...")
	// The schema name is an identifier, which no query parameter can carry;
	// it was validated and is quoted here.
	schema := pgx.Identifier{opts.Schema}.Sanitize()
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return "", "", fmt.Errorf("prepare target schema: %w", err)
	}

	tmp, err := os.MkdirTemp("", "queen-migration-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	srcCA, err := writeCA(tmp, "source-ca.pem", r.source.SSLRootCertPEM)
	if err != nil {
		return "", "", err
	}
	dstCA, err := writeCA(tmp, "target-ca.pem", target.SSLRootCertPEM)
	if err != nil {
		return "", "", err
	}

	dumpArgs := []string{"--format=custom", "-Z", "0", "--schema=" + opts.Schema, "--no-owner", "--no-privileges"}
	skipped := false
	for _, t := range opts.ExcludeTableData {
		if slices.Contains(ExcludableTables, t) {
			dumpArgs = append(dumpArgs, "--exclude-table-data="+opts.Schema+"."+t)
			skipped = true
		}
	}
	dump := exec.CommandContext(ctx, r.pgDump, dumpArgs...)
	dump.Env = r.source.env(srcCA)
	restore := exec.CommandContext(ctx, r.pgRestore, "--no-owner", "--no-privileges", "--exit-on-error",
		"--schema="+opts.Schema, "--dbname="+target.Database)
	restore.Env = target.env(dstCA)
	var dumpErr, restoreErr limitedBuffer
	dump.Stderr, restore.Stderr, restore.Stdout = &dumpErr, &restoreErr, &restoreErr
	// A plain pipe whose ends this process closes once the tools hold them:
	// if pg_restore exits early, pg_dump must see a broken pipe rather than
	// block on a pipe this process still holds open (cmd.StdoutPipe keeps
	// its reading end until dump.Wait returns).
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", "", err
	}
	defer pr.Close()
	defer pw.Close()
	dump.Stdout, restore.Stdin = pw, pr
	step := "Streaming: pg_dump | pg_restore..."
	if skipped {
		step += " (partial — some table data skipped)"
	}
	r.setStep(StatusDumping, step)
	if err := restore.Start(); err != nil {
		return "", "", fmt.Errorf("start pg_restore: %w", err)
	}
	pr.Close()
	if err := dump.Start(); err != nil {
		_ = restore.Process.Kill()
		_ = restore.Wait()
		return "", "", fmt.Errorf("start pg_dump: %w", err)
	}
	pw.Close()
	dumpWait := dump.Wait()
	if dumpWait == nil {
		r.setStep(StatusRestoring, step)
	} else if !brokenPipe(dumpWait) {
		_ = restore.Process.Kill()
	}
	restoreWait := restore.Wait()
	dumpOut, restoreOut = dumpErr.String(), restoreErr.String()
	switch {
	case dumpWait != nil && (!brokenPipe(dumpWait) || restoreWait == nil):
		return dumpOut, restoreOut, fmt.Errorf("pg_dump failed: %w", dumpWait)
	case restoreWait != nil:
		// pg_dump's broken pipe, if any, only follows from it.
		return dumpOut, restoreOut, fmt.Errorf("pg_restore failed: %w", restoreWait)
	}
	return dumpOut, restoreOut, nil
}

// brokenPipe reports whether a tool died of SIGPIPE: it wrote to a pipe
// whose reader had gone.
func brokenPipe(err error) bool {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return false
	}
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE
}

func writeCA(dir, name, pem string) (string, error) {
	if pem == "" {
		return "", nil
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(pem), 0o600); err != nil {
		return "", fmt.Errorf("write CA bundle: %w", err)
	}
	return p, nil
}
