// Package planmode makes sqlc queries plan with their actual arguments.
//
// pgx prepares and caches every statement, and after five executions
// PostgreSQL may switch a prepared statement to a generic plan, made without
// the arguments. For the admin and background queries, whose optional
// filters match everything when their argument is empty and whose time
// cutoffs decide between an index range and a scan, the generic plan can be
// a hundred times slower: a retention DELETE went from an index range on created_at (0.5 ms)
// to a scan of every message (200 ms) with 250,000 messages, and the message
// listing from 57 ms to 2.7 s (docs/observability.md). Custom sends such
// statements with pgx.QueryExecModeCacheDescribe: the statement's
// description is cached, but it runs as the unnamed statement, which
// PostgreSQL plans with the arguments at every execution, still in one
// round trip. The data plane keeps its prepared statements.
package planmode

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queenforgo/queen/gen/db"
)

// Custom wraps d so that every statement is planned with its arguments.
func Custom(d db.DBTX) db.DBTX { return custom{d} }

type custom struct{ d db.DBTX }

func withMode(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

func (c custom) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.d.Exec(ctx, sql, withMode(args)...)
}

func (c custom) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.d.Query(ctx, sql, withMode(args)...)
}

func (c custom) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.d.QueryRow(ctx, sql, withMode(args)...)
}

// SendBatch sends b as it is: only the data plane's autoAck reads are
// batched (handlers/broker/read_commit.go), and it keeps its prepared
// statements.
func (c custom) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return c.d.SendBatch(ctx, b)
}
