package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/cmd/queen/pgtls"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgarray"
	"github.com/queenforgo/queen/sql/pgjsonb"
	"github.com/queenforgo/queen/sql/pguuid"
)

// openPool connects to PostgreSQL, retrying for a while so that a broker
// started together with its database waits for it, and applies the
// migrations under an advisory lock.
func openPool(ctx context.Context, cfg config.Config, logger *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := newPool(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err = migrate.Apply(ctx, pool, logger)
		if err == nil {
			return pool, nil
		}
		var certErr *tls.CertificateVerificationError
		if time.Now().After(deadline) || ctx.Err() != nil || errors.As(err, &certErr) {
			// A certificate that does not verify will not start to by
			// waiting: fail the boot at once.
			pool.Close()
			return nil, errors.Join(err, ctx.Err())
		}
		logger.Warn("postgres not ready, retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// newPool builds the pool: every host of the list with
// target_session_attrs (config.PostgresURL), TLS per host (pgtls), and the
// failover guard. It does not connect yet.
func newPool(ctx context.Context, cfg config.Config, logger *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.PostgresURL())
	if err != nil {
		return nil, fmt.Errorf("parse postgres settings: %w", err)
	}
	pcfg.MaxConns = int32(cfg.Postgres.PoolSize)
	// PG_USE_SSL and friends (PGT-1..5): replaces the TLS setup pgx derived
	// from sslmode, on every host's connections and on their cancel
	// requests; each host's certificate must name that host.
	if err := pgtls.Configure(&pcfg.ConnConfig.Config, cfg.Postgres.TLS()); err != nil {
		return nil, err
	}
	g := newFailoverGuard(logger)
	g.install(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	g.attach(pool)
	return pool, nil
}

// failoverGuard makes the pool let go of a server that stopped being a
// writable primary, at the first error instead of once per connection.
//
// What pgx v5's pgxpool does by itself: a connection that is closed when it
// is released is destroyed, and pgconn closes a connection on every FATAL
// error (57P01 admin_shutdown when the primary is stopped or demoted,
// 57P02, 57P03) and on a broken socket. But SQLSTATE 25006
// read_only_sql_transaction is an ERROR: the connection stays open, goes
// back to the pool and fails the next write the same way, and the liveness
// ping pgxpool sends before reusing a connection idle for over a second
// succeeds on a read-only server. And each of the other connections to a
// dead server fails one request of its own before it is dropped; one idle
// for less than a second is not pinged at all.
//
// So: the connection that gets 25006 is closed on the spot (OnPgError), and
// the first statement that fails and leaves its connection closed, while
// its context is still live (a cancelled request closes its connection
// too, and says nothing about the server), resets the pool: every idle
// connection is closed now and every busy one when it is released. New
// connections go through target_session_attrs, which skips servers that
// refuse writes. One reset per generation of connections: an error on a
// connection opened before the last reset is the same news again, and must
// not close the fresh connections to the new primary.
type failoverGuard struct {
	log *slog.Logger

	mu   sync.Mutex
	pool *pgxpool.Pool
	gen  uint64               // bumped by every reset
	born map[*pgx.Conn]uint64 // the generation each live connection was opened in
}

func newFailoverGuard(logger *slog.Logger) *failoverGuard {
	return &failoverGuard{log: logger, born: map[*pgx.Conn]uint64{}}
}

// sqlstateReadOnly is read_only_sql_transaction: the server became a
// standby, or was set read-only, under an open connection.
const sqlstateReadOnly = "25006"

// install puts the guard's hooks on a pool configuration, keeping the
// ones already there.
func (g *failoverGuard) install(pcfg *pgxpool.Config) {
	prevOnErr := pcfg.ConnConfig.OnPgError
	pcfg.ConnConfig.OnPgError = func(c *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code == sqlstateReadOnly {
			return false // close it: it can only fail writes from now on
		}
		return prevOnErr == nil || prevOnErr(c, pgErr)
	}
	pcfg.ConnConfig.Tracer = g
	prevAfter := pcfg.AfterConnect
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if prevAfter != nil {
			if err := prevAfter(ctx, conn); err != nil {
				return err
			}
		}
		pguuid.Register(conn.TypeMap())
		pgarray.Register(conn.TypeMap())
		pgjsonb.Register(conn.TypeMap())
		g.mu.Lock()
		g.born[conn] = g.gen
		g.mu.Unlock()
		return nil
	}
	prevClose := pcfg.BeforeClose
	pcfg.BeforeClose = func(conn *pgx.Conn) {
		if prevClose != nil {
			prevClose(conn)
		}
		g.mu.Lock()
		delete(g.born, conn)
		g.mu.Unlock()
	}
}

func (g *failoverGuard) attach(pool *pgxpool.Pool) {
	g.mu.Lock()
	g.pool = pool
	g.mu.Unlock()
}

// failed looks at one statement's outcome.
func (g *failoverGuard) failed(ctx context.Context, conn *pgx.Conn, err error) {
	if err == nil || ctx.Err() != nil || !conn.IsClosed() {
		return
	}
	g.mu.Lock()
	born, known := g.born[conn]
	pool := g.pool
	if !known || born != g.gen || pool == nil {
		g.mu.Unlock()
		return
	}
	g.gen++
	gen := g.gen
	g.mu.Unlock()
	g.log.Warn("postgres connection lost or server refuses writes: closing every pooled connection",
		"err", err, "generation", gen)
	// Reset takes the pool's lock, and this runs inside a statement on one
	// of its connections: not inline.
	go pool.Reset()
}

// The pgx tracer hooks: only the ends matter.

func (g *failoverGuard) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (g *failoverGuard) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	g.failed(ctx, conn, data.Err)
}

func (g *failoverGuard) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (g *failoverGuard) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	g.failed(ctx, conn, data.Err)
}

func (g *failoverGuard) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	g.failed(ctx, conn, data.Err)
}

func (g *failoverGuard) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}

func (g *failoverGuard) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromEndData) {
	g.failed(ctx, conn, data.Err)
}

var (
	_ pgx.QueryTracer    = (*failoverGuard)(nil)
	_ pgx.BatchTracer    = (*failoverGuard)(nil)
	_ pgx.CopyFromTracer = (*failoverGuard)(nil)
)
