package jobs

import (
	"context"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The tests drive the jobs with injected times (Tick, Flush, Run*) and seed
// the tables with SQL; only the lifecycle tests let the loops run.

// t0 is the injected "now" of the retention, eviction and cleanup tests.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

type testBundle struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *Services
}

// setup gives a fresh database and the services on it (not started).
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = pgtest.NewPool(t)
	}
	svc := New(cfg)
	t.Cleanup(svc.Stop)
	return &testBundle{t: t, pool: cfg.Pool, svc: svc}
}

// poolOn opens another pool on the database at url: a second broker.
func poolOn(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func (b *testBundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(b.t.Context(), sql, args...)
	require.NoError(b.t, err)
}

func (b *testBundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), sql, args...).Scan(&n))
	return n
}

type queueOpts struct {
	enabled                       bool
	retention, completed, maxWait int
}

// queue creates a queue with the given retention settings.
func (b *testBundle) queue(name string, o queueOpts) uuid.UUID {
	b.t.Helper()
	var id uuid.UUID
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), `INSERT INTO queen.queues
		(name, retention_enabled, retention_seconds, completed_retention_seconds, max_wait_time_seconds)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		name, o.enabled, o.retention, o.completed, o.maxWait).Scan(&id))
	return id
}

func (b *testBundle) partition(queue uuid.UUID, name string) uuid.UUID {
	b.t.Helper()
	var id uuid.UUID
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(),
		`INSERT INTO queen.partitions (queue_id, name) VALUES ($1, $2) RETURNING id`, queue, name).Scan(&id))
	return id
}

// messages appends n messages to a partition, stored at createdAt, with
// transaction ids "<partition>-<seq>". Their ids carry createdAt's time, as
// the broker's UUIDv7s do (retention finds messages by it, migration 0013).
func (b *testBundle) messages(partition uuid.UUID, n int, createdAt time.Time) {
	b.t.Helper()
	b.exec(`WITH p AS (
			UPDATE queen.partitions SET last_seq = last_seq + $2::int, last_message_at = $3
			WHERE id = $1 RETURNING last_seq - $2::int AS base, name)
		INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload, created_at)
		SELECT encode(substring(uuid_send(queen.uuid_v7_from_ms(extract(epoch FROM $3::timestamptz) * 1000)) FROM 1 FOR 6)
		              || substring(uuid_send(gen_random_uuid()) FROM 7), 'hex')::uuid,
		       $1, p.base + g, p.name || '-' || (p.base + g), '{}'::jsonb, $3
		FROM p, generate_series(1, $2::int) g`, partition, n, createdAt)
}

// cursor sets a consumer group's cursor on a partition; leased gives it a
// live lease.
func (b *testBundle) cursor(partition uuid.UUID, group string, lastSeq int, leased bool) {
	b.t.Helper()
	b.exec(`INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq, lease_id, lease_expires_at)
		VALUES ($1, $2, $3, CASE WHEN $4 THEN 'lease-1' END, CASE WHEN $4 THEN now() + interval '1 hour' END)
		ON CONFLICT (partition_id, consumer_group) DO UPDATE SET last_seq = EXCLUDED.last_seq,
			lease_id = EXCLUDED.lease_id, lease_expires_at = EXCLUDED.lease_expires_at`,
		partition, group, lastSeq, leased)
}

func (b *testBundle) cursorAt(partition uuid.UUID, group string) int {
	b.t.Helper()
	return b.count(`SELECT last_seq FROM queen.partition_consumers WHERE partition_id = $1 AND consumer_group = $2`, partition, group)
}

// deadLetter records the message seq of a partition as dead-lettered.
func (b *testBundle) deadLetter(partition uuid.UUID, seq int) {
	b.t.Helper()
	b.exec(`INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, original_created_at)
		SELECT id, partition_id, '__QUEUE_MODE__', created_at FROM queen.messages WHERE partition_id = $1 AND seq = $2`,
		partition, seq)
}

// remaining lists the transaction ids still stored in a queue, sorted.
func (b *testBundle) remaining(queue string) []string {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT m.transaction_id FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1`, queue)
	require.NoError(b.t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		require.NoError(b.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(b.t, rows.Err())
	sort.Strings(out)
	return out
}

type historyRow struct {
	Queue, Kind string
	Count       int64
	At          time.Time
}

func (b *testBundle) history() []historyRow {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT queue_name, retention_type, deleted_count, executed_at
		FROM queen.retention_history ORDER BY id`)
	require.NoError(b.t, err)
	defer rows.Close()
	out := []historyRow{}
	for rows.Next() {
		var h historyRow
		require.NoError(b.t, rows.Scan(&h.Queue, &h.Kind, &h.Count, &h.At))
		h.At = h.At.UTC()
		out = append(out, h)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// advisoryLocks counts the advisory locks held on the bundle's database.
func (b *testBundle) advisoryLocks() int {
	b.t.Helper()
	return b.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
}

// eventually polls cond until it holds or the deadline passes. Only for
// what is inherently asynchronous (another goroutine or process).
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

// loopGoroutines counts the goroutines running a Services loop. Only
// meaningful in tests that do not run in parallel with others.
func loopGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "jobs.(*Services).loop.func")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// signalHandler is a slog handler that hands every record to a channel
// (dropped when nobody listens), so tests can wait on what a job logged.
type signalHandler struct{ ch chan slog.Record }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r:
	default:
	}
	return nil
}

func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// waitingDeletes counts message DELETEs of other sessions waiting on a row
// lock.
func (b *testBundle) waitingDeletes() int {
	b.t.Helper()
	return b.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM queen.messages%'`)
}

// runningDeletes counts message DELETEs that other sessions are running.
func (b *testBundle) runningDeletes() int {
	b.t.Helper()
	return b.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%DELETE FROM queen.messages%'`)
}
