// Package migrate applies numbered schema migrations under a PostgreSQL
// advisory lock, so several processes may boot at once. The broker's
// migrations (sql/migrations, schema queen) are one set; the proxy's
// (sql/proxy/migrations, schema queen_proxy) are another, with their own
// bookkeeping table and lock, so the two may share a database.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/sql/migrations"
)

// LockKey is the pg_advisory_lock key held while migrations run. Advisory
// locks are per database, so brokers on different databases never wait on
// each other.
const LockKey int64 = 0x717565656e6d6967 // "queenmig"

// unlockTimeout bounds the unlock, which runs even when ctx is done.
const unlockTimeout = 10 * time.Second

// DB is what Apply needs. *pgx.Conn, *pgxpool.Conn and *pgxpool.Pool satisfy
// it. A *pgxpool.Pool is pinned to one acquired connection for the whole run;
// anything else must already be a single session, because the advisory lock
// belongs to the session that took it.
type DB interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migration is one NNNN_name.up.sql file.
type Migration struct {
	Version int
	Name    string // the part between the version and .up.sql
	File    string
	SQL     string
}

var fileRe = regexp.MustCompile(`^([0-9]{4,})_([a-z0-9_]+)\.up\.sql$`)

// Set is one group of migrations with its own history: the schema that
// holds its schema_migrations table, and the advisory lock its runs take.
type Set struct {
	Schema  string // a lower-case SQL identifier; created before the first migration
	FS      fs.FS  // the NNNN_name.up.sql files, at its root
	LockKey int64
}

// Broker is the broker's set: sql/migrations in schema queen.
var Broker = Set{Schema: "queen", FS: migrations.FS, LockKey: LockKey}

var schemaRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Apply applies every embedded broker migration not yet recorded in
// queen.schema_migrations, in version order, each in its own transaction
// together with its bookkeeping row. Schema queen exists before the first
// migration runs. It waits (bounded only by ctx) while another session holds
// the lock. A nil logger discards.
func Apply(ctx context.Context, db DB, logger *slog.Logger) error {
	return ApplySet(ctx, db, Broker, logger)
}

// ApplyFS is Apply with the migrations read from the root of fsys.
func ApplyFS(ctx context.Context, db DB, fsys fs.FS, logger *slog.Logger) error {
	return ApplySet(ctx, db, Set{Schema: Broker.Schema, FS: fsys, LockKey: Broker.LockKey}, logger)
}

// ApplySet is Apply for any set: its history is set.Schema.schema_migrations
// and its lock set.LockKey.
func ApplySet(ctx context.Context, db DB, set Set, logger *slog.Logger) (err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if !schemaRe.MatchString(set.Schema) {
		return fmt.Errorf("migration set schema %q: want a lower-case identifier", set.Schema)
	}
	list, err := Load(set.FS)
	if err != nil {
		return err
	}
	lockKey := set.LockKey

	conn := db
	// clean is false while the session may still hold the lock; a pooled
	// connection in that state is closed rather than handed back.
	clean := true
	if pool, ok := db.(*pgxpool.Pool); ok {
		pc, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquire migration connection: %w", err)
		}
		conn = pc
		defer func() {
			if !clean {
				_ = pc.Hijack().Close(context.WithoutCancel(ctx))
				return
			}
			pc.Release()
		}()
	}

	clean = false
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockKey).Scan(&locked); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	if !locked {
		logger.Info("waiting for migration lock held by another session", slog.Int64("lock_key", lockKey))
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		var released bool
		if uerr := conn.QueryRow(uctx, "SELECT pg_advisory_unlock($1)", lockKey).Scan(&released); uerr != nil {
			err = errors.Join(err, fmt.Errorf("release migration lock: %w", uerr))
			return
		}
		clean = true
		if !released {
			logger.Warn("migration lock was not held at unlock", slog.Int64("lock_key", lockKey))
		}
	}()

	return applyLocked(ctx, conn, set.Schema, list, logger)
}

func applyLocked(ctx context.Context, conn DB, schema string, list []Migration, logger *slog.Logger) error {
	// schema matched schemaRe, so quoting it is all the escaping it needs.
	history := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	bootstrap := "CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() + ";\n" +
		"CREATE TABLE IF NOT EXISTS " + history + ` (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);`
	if _, err := conn.Exec(ctx, bootstrap); err != nil {
		return fmt.Errorf("create %s.schema_migrations: %w", schema, err)
	}

	rows, err := conn.Query(ctx, "SELECT version FROM "+history)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}

	known := make(map[int]bool, len(list))
	count := 0
	for _, m := range list {
		known[m.Version] = true
		if applied[m.Version] {
			continue
		}
		start := time.Now()
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx,
				"INSERT INTO "+history+" (version, name) VALUES ($1, $2)",
				m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %s: %w", m.File, err)
		}
		count++
		logger.Info("migration applied",
			slog.Int("version", m.Version),
			slog.String("name", m.Name),
			slog.Duration("duration", time.Since(start)))
	}
	for v := range applied {
		if !known[v] {
			// A newer broker migrated this database; older code keeps running
			// on the columns it knows, so this is worth a warning, not a stop.
			logger.Warn("database has a migration this binary does not know", slog.Int("version", v))
		}
	}
	logger.Debug("migrations up to date", slog.Int("applied", count), slog.Int("known", len(list)))
	return nil
}

// Load reads and orders the migrations at the root of fsys. Every .sql file
// must be named NNNN_name.up.sql with a unique version.
func Load(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	list := make([]Migration, 0, len(names))
	seen := make(map[int]string, len(names))
	for _, file := range names {
		match := fileRe.FindStringSubmatch(file)
		if match == nil {
			return nil, fmt.Errorf("migration file %q: want NNNN_name.up.sql", file)
		}
		version, err := strconv.Atoi(match[1])
		if err != nil || version > 1<<31-1 {
			return nil, fmt.Errorf("migration file %q: version out of range", file)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migration files %q and %q share version %d", other, file, version)
		}
		seen[version] = file
		body, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", file, err)
		}
		list = append(list, Migration{Version: version, Name: match[2], File: file, SQL: string(body)})
	}
	slices.SortFunc(list, func(a, b Migration) int { return a.Version - b.Version })
	return list, nil
}
