package migration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

// A real pg_dump | pg_restore between two databases of the harness copies
// the schema and its rows, skips the data of excluded tables (keeping their
// definitions), replaces whatever the target schema held, and Validate
// compares the counts.
func TestMigrationCopiesTheSchema(t *testing.T) {
	t.Parallel()
	source := endpointOf(t, pgtest.NewDB(t))
	target := endpointOf(t, pgtest.NewEmptyDB(t))
	r := New(Config{Source: source})
	require.NoError(t, r.Available(), "pg_dump and pg_restore come with this machine's PostgreSQL")
	t.Cleanup(r.Stop)

	src := connect(t, source)
	run(t, src, `INSERT INTO queen.queues (name) VALUES ('mig')`)
	run(t, src, `INSERT INTO queen.partitions (queue_id, name, last_seq) SELECT id, 'p', 3 FROM queen.queues`)
	run(t, src, `INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload)
		SELECT gen_random_uuid(), p.id, g, 'm' || g, jsonb_build_object('n', g) FROM queen.partitions p, generate_series(1, 3) g`)
	run(t, src, `INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, original_created_at)
		SELECT id, partition_id, '__QUEUE_MODE__', created_at FROM queen.messages WHERE seq = 2`)
	run(t, src, `INSERT INTO queen.message_traces (message_id, partition_id, transaction_id, consumer_group, event_type, data)
		SELECT id, partition_id, transaction_id, '__QUEUE_MODE__', 'info', '{}' FROM queen.messages WHERE seq = 1`)
	run(t, src, `INSERT INTO queen.message_trace_names (trace_id, trace_name) SELECT id, 'order-1' FROM queen.message_traces`)

	dst := connect(t, target)
	run(t, dst, `CREATE SCHEMA queen; CREATE TABLE queen.stale (x int)`)

	require.Equal(t, StatusIdle, r.Status().Status)
	require.NoError(t, r.Start(target, Options{ExcludeTableData: []string{"message_traces", "message_trace_names", "not_a_table"}}))
	require.Contains(t, []string{StatusDumping, StatusRestoring, StatusComplete}, r.Status().Status)
	st := waitDone(t, r)
	require.Equal(t, StatusComplete, st.Status, "%+v", st)
	require.Equal(t, "Migration complete", st.CurrentStep)
	require.Empty(t, st.Error)
	require.Positive(t, st.Elapsed)
	require.Equal(t, st.Elapsed, r.Status().Elapsed, "a finished migration's elapsed time stands still")

	require.Zero(t, count(t, dst, `SELECT count(*) FROM pg_tables WHERE schemaname = 'queen' AND tablename = 'stale'`),
		"the target schema was dropped and created again")
	require.Equal(t, 3, count(t, dst, `SELECT count(*) FROM queen.messages`))
	require.Equal(t, 1, count(t, dst, `SELECT count(*) FROM queen.dead_letter_queue`))
	require.Equal(t, 6, count(t, dst, `SELECT sum((payload->>'n')::int) FROM queen.messages`))
	require.Zero(t, count(t, dst, `SELECT count(*) FROM queen.message_traces`), "excluded data")

	counts, err := r.Validate(t.Context(), target, "")
	require.NoError(t, err)
	byTable := map[string]TableCount{}
	for _, c := range counts {
		byTable[c.Table] = c
	}
	require.Equal(t, TableCount{Table: "messages", Source: 3, Target: 3}, byTable["messages"])
	require.Equal(t, TableCount{Table: "queues", Source: 1, Target: 1}, byTable["queues"])
	require.Equal(t, TableCount{Table: "message_traces", Source: 1, Target: 0}, byTable["message_traces"])
	require.Equal(t, TableCount{Table: "message_trace_names", Source: 1, Target: 0}, byTable["message_trace_names"])
	for _, c := range counts {
		require.NotEqual(t, int64(-1), c.Target, "table %s is on the target", c.Table)
	}

	version, err := TestConnection(t.Context(), target)
	require.NoError(t, err)
	require.Contains(t, version, "PostgreSQL")

	require.NoError(t, r.Reset())
	require.Equal(t, Status{Status: StatusIdle}, r.Status())
}

// The status goes idle → dumping (preparing the target, then streaming) →
// restoring (pg_dump done) → complete, observed at each step; a second Start
// and Reset are refused while it runs; the tools get the documented
// arguments and the password only through their environment. Fake tools
// hold each step until the test lets it go.
func TestMigrationStatusTransitions(t *testing.T) {
	t.Parallel()
	tools := newFakeTools(t)
	source := endpointOf(t, pgtest.NewDB(t))
	source.Password = "s3cret'pw"
	target := endpointOf(t, pgtest.NewEmptyDB(t))
	r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: tools.pgRestore})
	require.NoError(t, r.Available())
	t.Cleanup(r.Stop)

	// A session reading a table of the target schema holds up the DROP
	// SCHEMA of the preparation step.
	dst := connect(t, target)
	run(t, dst, `CREATE SCHEMA custom; CREATE TABLE custom.stale (x int)`)
	holder, err := dst.Begin(t.Context())
	require.NoError(t, err)
	_, err = holder.Exec(t.Context(), `SELECT * FROM custom.stale`)
	require.NoError(t, err)
	watch := connect(t, target)

	require.Equal(t, Status{Status: StatusIdle}, r.Status())
	opts := Options{Schema: "custom", ExcludeTableData: []string{"messages", "queues"}}
	require.NoError(t, r.Start(target, opts))
	require.ErrorIs(t, r.Start(target, opts), ErrRunning)
	require.ErrorIs(t, r.Reset(), ErrRunning)
	eventually(t, "the DROP SCHEMA to wait for the reader", func() bool {
		return count(t, watch, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'DROP SCHEMA%'`) == 1
	})
	st := r.Status()
	require.Equal(t, StatusDumping, st.Status)
	require.Equal(t, "Preparing target database (creating schema)...", st.CurrentStep)
	require.NoError(t, holder.Rollback(t.Context()))

	dump := tools.reached(t, "dump")
	st = r.Status()
	require.Equal(t, StatusDumping, st.Status)
	require.Equal(t, "Streaming: pg_dump | pg_restore... (partial — some table data skipped)", st.CurrentStep)
	require.Positive(t, st.Elapsed)
	require.Equal(t, []string{"--format=custom", "-Z", "0", "--schema=custom", "--no-owner", "--no-privileges",
		"--exclude-table-data=custom.messages"}, tools.lines(t, "dump.args"), "queues is not an excludable table")
	env := tools.lines(t, "dump.env")
	sort.Strings(env)
	require.Equal(t, []string{
		"PGAPPNAME=queen-migration", "PGCONNECT_TIMEOUT=10", "PGDATABASE=" + source.Database,
		"PGHOST=" + source.Host, "PGPASSWORD=" + source.Password, "PGPORT=" + strconv.Itoa(source.Port),
		"PGSSLMODE=disable", "PGUSER=" + source.User,
	}, env)

	finish(t, dump, "0")
	restore := tools.reached(t, "restore") // pg_dump has exited
	require.Equal(t, []string{"--no-owner", "--no-privileges", "--exit-on-error", "--schema=custom",
		"--dbname=" + target.Database}, tools.lines(t, "restore.args"), "no password on any command line")
	require.Contains(t, tools.lines(t, "restore.env"), "PGDATABASE="+target.Database)
	eventually(t, "the status to say restoring", func() bool { return r.Status().Status == StatusRestoring })
	require.ErrorIs(t, r.Start(target, opts), ErrRunning)
	finish(t, restore, "0")

	st = waitDone(t, r)
	require.Equal(t, StatusComplete, st.Status)
	require.Equal(t, "Migration complete", st.CurrentStep)
	require.Empty(t, st.Error)
	require.Equal(t, "dump says bye\n", st.DumpOutput)
	require.Equal(t, "restore says bye\n", st.RestoreOutput)
	require.Equal(t, 1, count(t, watch, `SELECT count(*) FROM pg_namespace WHERE nspname = 'custom'`))
	require.Zero(t, count(t, watch, `SELECT count(*) FROM pg_tables WHERE schemaname = 'custom'`), "stale table dropped")

	// Without excluded tables the step does not say partial.
	require.NoError(t, r.Start(target, Options{Schema: "custom"}))
	dump = tools.reached(t, "dump")
	require.Equal(t, "Streaming: pg_dump | pg_restore...", r.Status().CurrentStep)
	finish(t, dump, "0")
	finish(t, tools.reached(t, "restore"), "0")
	require.Equal(t, StatusComplete, waitDone(t, r).Status)
}

// Every way a migration fails ends in status error with the reason and the
// tools' output; Reset goes back to idle.
func TestMigrationErrors(t *testing.T) {
	t.Parallel()
	sourceURL := pgtest.NewDB(t)
	source := endpointOf(t, sourceURL)
	target := endpointOf(t, pgtest.NewEmptyDB(t))

	t.Run("unresponsive target", func(t *testing.T) {
		t.Parallel()
		// A server that accepts the connection and never answers: the
		// runner is held in its first step until the connection drops.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		tools := newFakeTools(t)
		r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: tools.pgRestore})
		t.Cleanup(r.Stop)
		silent := Endpoint{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, Database: "d", User: "u"}
		require.NoError(t, r.Start(silent, Options{}))
		var c net.Conn
		select {
		case c = <-accepted:
		case <-time.After(30 * time.Second):
			t.Fatal("the runner never connected to the target")
		}
		st := r.Status()
		require.Equal(t, StatusDumping, st.Status)
		require.Equal(t, "Preparing target schema...", st.CurrentStep)
		require.NoError(t, c.Close())
		st = waitDone(t, r)
		require.Equal(t, StatusError, st.Status)
		require.Contains(t, st.Error, "connect to target")
		require.Positive(t, st.Elapsed)
		require.NoError(t, r.Reset())
		require.Equal(t, Status{Status: StatusIdle}, r.Status())
	})

	t.Run("unreachable target", func(t *testing.T) {
		t.Parallel()
		r := New(Config{Source: source})
		t.Cleanup(r.Stop)
		require.NoError(t, r.Start(Endpoint{Host: "127.0.0.1", Port: closedPort(t), Database: "d", User: "u"}, Options{}))
		st := waitDone(t, r)
		require.Equal(t, StatusError, st.Status)
		require.Contains(t, st.Error, "connect to target")
	})

	t.Run("pg_dump fails", func(t *testing.T) {
		t.Parallel()
		missing := source
		missing.Database = source.Database + "_missing"
		r := New(Config{Source: missing})
		require.NoError(t, r.Available())
		t.Cleanup(r.Stop)
		require.NoError(t, r.Start(target, Options{}))
		st := waitDone(t, r)
		require.Equal(t, StatusError, st.Status, "%+v", st)
		require.Contains(t, st.Error, "pg_dump failed")
		require.Contains(t, st.DumpOutput, missing.Database)
	})

	t.Run("fake tools fail", func(t *testing.T) {
		t.Parallel()
		tools := newFakeTools(t)
		target := endpointOf(t, pgtest.NewEmptyDB(t))
		r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: tools.pgRestore})
		t.Cleanup(r.Stop)

		require.NoError(t, r.Start(target, Options{}))
		finish(t, tools.reached(t, "dump"), "0")
		finish(t, tools.reached(t, "restore"), "3")
		st := waitDone(t, r)
		require.Equal(t, StatusError, st.Status)
		require.Equal(t, "pg_restore failed: exit status 3", st.Error)
		require.Equal(t, "restore says bye\n", st.RestoreOutput)

		require.NoError(t, r.Start(target, Options{}), "a failed migration can be started again")
		finish(t, tools.reached(t, "dump"), "2")
		st = waitDone(t, r)
		require.Equal(t, StatusError, st.Status)
		require.Equal(t, "pg_dump failed: exit status 2", st.Error)
		require.Equal(t, "dump says bye\n", st.DumpOutput)
	})
}

// When pg_restore gives up while pg_dump is still writing, pg_dump loses its
// reader (a broken pipe) and the migration fails promptly, blaming
// pg_restore, whose output says why.
func TestMigrationRestoreFailureWhileDumping(t *testing.T) {
	t.Parallel()
	tools := newFakeTools(t)
	failing := filepath.Join(tools.dir, "pg_restore_fails")
	require.NoError(t, os.WriteFile(failing, []byte("#!/bin/sh\necho 'pg_restore: error: boom' >&2\nexit 1\n"), 0o700))
	source := endpointOf(t, pgtest.NewDB(t))
	target := endpointOf(t, pgtest.NewEmptyDB(t))
	r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: failing})
	t.Cleanup(r.Stop)
	require.NoError(t, r.Start(target, Options{}))
	finish(t, tools.reached(t, "dump"), "flood") // far more than a pipe holds

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.Wait(ctx), "pg_dump must not block forever on a pipe nobody reads")
	st := r.Status()
	require.Equal(t, StatusError, st.Status)
	require.Equal(t, "pg_restore failed: exit status 1", st.Error)
	require.Equal(t, "pg_restore: error: boom\n", st.RestoreOutput)
}

// Stop kills the tools of a running migration and waits for it; no
// migration starts afterwards. Stop is idempotent, also without a run.
func TestStopEndsARunningMigration(t *testing.T) {
	t.Parallel()
	idle := New(Config{})
	idle.Stop()
	idle.Stop()

	tools := newFakeTools(t)
	source := endpointOf(t, pgtest.NewDB(t))
	target := endpointOf(t, pgtest.NewEmptyDB(t))
	r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: tools.pgRestore})
	require.NoError(t, r.Start(target, Options{}))
	dump := tools.reached(t, "dump")
	defer dump.Close()

	stopped := make(chan struct{})
	go func() {
		r.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not end the running migration")
	}
	st := r.Status()
	require.Equal(t, StatusError, st.Status)
	require.Contains(t, st.Error, "pg_dump failed")
	require.Error(t, r.Start(target, Options{}), "no migration after Stop")
	require.Equal(t, StatusError, r.Status().Status)
	r.Stop()
}

// A target that is this broker's own database is refused before anything
// runs, however the loopback host is spelt.
func TestMigrationRefusesItsOwnDatabase(t *testing.T) {
	t.Parallel()
	tools := newFakeTools(t)
	source := Endpoint{Host: "127.0.0.1", Port: 5432, Database: "queen", User: "u"}
	r := New(Config{Source: source, PGDump: tools.pgDump, PGRestore: tools.pgRestore})
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]", "LOCALHOST"} {
		target := source
		target.Host = host
		require.ErrorIs(t, r.Start(target, Options{}), ErrSameDatabase, host)
	}
	require.Equal(t, Status{Status: StatusIdle}, r.Status())
}

// Without pg_dump and pg_restore (not on PATH, or configured paths that do
// not exist) nothing starts and the status stays idle. Not parallel: it
// changes PATH.
func TestMigrationWithoutTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := New(Config{})
	require.ErrorIs(t, r.Available(), ErrToolsMissing)
	require.ErrorIs(t, r.Start(Endpoint{Host: "db.example", Port: 5432, Database: "q", User: "u"}, Options{}), ErrToolsMissing)
	require.Equal(t, Status{Status: StatusIdle}, r.Status())

	tools := newFakeTools(t)
	for _, cfg := range []Config{
		{PGDump: tools.pgDump, PGRestore: "/nonexistent/pg_restore"},
		{PGDump: "/nonexistent/pg_dump", PGRestore: tools.pgRestore},
	} {
		require.ErrorIs(t, New(cfg).Available(), ErrToolsMissing)
	}
	require.NoError(t, New(Config{PGDump: tools.pgDump, PGRestore: tools.pgRestore}).Available())
}

// Validate reports -1 for a table the target does not have, and an error
// naming the side it could not reach.
func TestValidateReportsMissingTables(t *testing.T) {
	t.Parallel()
	source := endpointOf(t, pgtest.NewDB(t))
	target := endpointOf(t, pgtest.NewEmptyDB(t))
	dst := connect(t, target)
	run(t, dst, `CREATE SCHEMA queen; CREATE TABLE queen.only_here (x int); INSERT INTO queen.only_here VALUES (1), (2)`)
	r := New(Config{Source: source})
	counts, err := r.Validate(t.Context(), target, "queen")
	require.NoError(t, err)
	byTable := map[string]TableCount{}
	for _, c := range counts {
		byTable[c.Table] = c
	}
	require.Equal(t, TableCount{Table: "only_here", Source: -1, Target: 2}, byTable["only_here"])
	require.Equal(t, TableCount{Table: "queues", Source: 0, Target: -1}, byTable["queues"])

	_, err = r.Validate(t.Context(), Endpoint{Host: "127.0.0.1", Port: closedPort(t), Database: "d", User: "u"}, "queen")
	require.ErrorContains(t, err, "Failed to connect to target")
	_, err = TestConnection(t.Context(), Endpoint{Host: "127.0.0.1", Port: closedPort(t), Database: "d", User: "u"})
	require.Error(t, err)
}

func TestSame(t *testing.T) {
	t.Parallel()
	base := Endpoint{Host: "db.example", Port: 5432, Database: "queen"}
	for _, tc := range []struct {
		name string
		a, b Endpoint
		want bool
	}{
		{"identical", base, base, true},
		{"host case", base, Endpoint{Host: "DB.example", Port: 5432, Database: "queen"}, true},
		{"other host", base, Endpoint{Host: "db2.example", Port: 5432, Database: "queen"}, false},
		{"other port", base, Endpoint{Host: "db.example", Port: 5433, Database: "queen"}, false},
		{"other database", base, Endpoint{Host: "db.example", Port: 5432, Database: "queen2"}, false},
		{"loopback spellings", Endpoint{Host: "localhost", Port: 1, Database: "d"}, Endpoint{Host: "::1", Port: 1, Database: "d"}, true},
		{"empty host is loopback", Endpoint{Port: 1, Database: "d"}, Endpoint{Host: "127.0.0.1", Port: 1, Database: "d"}, true},
		{"target is the standby", Endpoint{Host: "a", Port: 1, Fallbacks: []Server{{Host: "b", Port: 2}}, Database: "d"},
			Endpoint{Host: "b", Port: 2, Database: "d"}, true},
		{"standby's host on the primary's port", Endpoint{Host: "a", Port: 1, Fallbacks: []Server{{Host: "b", Port: 2}}, Database: "d"},
			Endpoint{Host: "b", Port: 1, Database: "d"}, false},
	} {
		require.Equal(t, tc.want, same(tc.a, tc.b), tc.name)
		require.Equal(t, tc.want, same(tc.b, tc.a), tc.name)
	}
}

// Values with quotes, backslashes and spaces reach libpq intact.
func TestConnStringQuoting(t *testing.T) {
	t.Parallel()
	e := Endpoint{Host: "h", Port: 6543, Database: `my db`, User: `o'brien`, Password: `p\a's s`, SSLMode: "require"}
	cfg, err := pgx.ParseConfig(e.connString())
	require.NoError(t, err)
	require.Equal(t, "h", cfg.Host)
	require.Equal(t, uint16(6543), cfg.Port)
	require.Equal(t, e.Database, cfg.Database)
	require.Equal(t, e.User, cfg.User)
	require.Equal(t, e.Password, cfg.Password)
	require.Equal(t, 10*time.Second, cfg.ConnectTimeout)
}

// An HA host list reaches pgx and the tools with each host's own port.
func TestHostListPorts(t *testing.T) {
	t.Parallel()
	e := Endpoint{Host: "a", Port: 5432, Fallbacks: []Server{{Host: "b", Port: 6543}}, Database: "d", User: "u"}
	cfg, err := pgx.ParseConfig(e.connString())
	require.NoError(t, err)
	require.Equal(t, "a", cfg.Host)
	require.Equal(t, uint16(5432), cfg.Port)
	require.Len(t, cfg.Fallbacks, 1)
	require.Equal(t, "b", cfg.Fallbacks[0].Host)
	require.Equal(t, uint16(6543), cfg.Fallbacks[0].Port)
	env := e.env("")
	require.Contains(t, env, "PGHOST=a,b")
	require.Contains(t, env, "PGPORT=5432,6543")
}

// The captured output keeps the last outputLimit bytes.
func TestLimitedBuffer(t *testing.T) {
	t.Parallel()
	var b limitedBuffer
	chunk := make([]byte, outputLimit/3+1)
	for i := range chunk {
		chunk[i] = 'a'
	}
	for range 3 {
		n, err := b.Write(chunk)
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	_, _ = b.Write([]byte("tail"))
	s := b.String()
	require.Len(t, s, outputLimit)
	require.Equal(t, "tail", s[len(s)-4:])
}
