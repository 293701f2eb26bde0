package pgjsonb_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgjsonb"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A jsonb read into a json.RawMessage is byte for byte what pgx's own
// codec gives, NULL included, in both wire formats; other targets still
// decode; and a value scanned survives the next row (a copy, not a slice
// of the connection's buffer).
func TestScanMatchesPgx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	const query = `SELECT v FROM (VALUES (1, '{"b": [1, 2.50], "a": "é\"\u0001"}'::jsonb), (2, 'null'::jsonb),
	                (3, '"text"'::jsonb), (4, NULL::jsonb), (5, '[]'::jsonb), (6, '12'::jsonb)) AS t(i, v) ORDER BY i`
	read := func(mode pgx.QueryExecMode) []json.RawMessage {
		rows, err := conn.Query(ctx, query, mode)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[json.RawMessage])
		require.NoError(t, err)
		return got
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol}
	var want [][]json.RawMessage
	for _, mode := range modes {
		want = append(want, read(mode))
	}
	pgjsonb.Register(conn.TypeMap())
	for i, mode := range modes {
		got := read(mode)
		require.Equal(t, want[i], got, "mode %v", mode)
		require.Nil(t, got[3], "NULL")
		require.JSONEq(t, `{"a": "é\"\u0001", "b": [1, 2.50]}`, string(got[0]))
	}

	var m map[string]any
	require.NoError(t, conn.QueryRow(ctx, `SELECT '{"k": [true]}'::jsonb`).Scan(&m))
	require.Equal(t, map[string]any{"k": []any{true}}, m)
	var bad struct{ K int }
	require.Error(t, conn.QueryRow(ctx, `SELECT '{"K": "x"}'::jsonb`).Scan(&bad), "other targets still go through encoding/json")
}

// A pop's read: 100 payloads of about the bench's size, scanned into
// json.RawMessage, through pgx's codec and through this one.
func BenchmarkScanPayloads(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(b))
	require.NoError(b, err)
	defer conn.Close(ctx)
	const query = `SELECT jsonb_build_object('t', 1764750000000000000 + i, 'pad', repeat('x', 40)) FROM generate_series(1, 100) i`
	for _, fast := range []bool{false, true} {
		name := "pgx"
		if fast {
			name = "pgjsonb"
			pgjsonb.Register(conn.TypeMap())
		}
		b.Run(name, func(b *testing.B) {
			var v json.RawMessage
			for b.Loop() {
				rows, err := conn.Query(ctx, query)
				require.NoError(b, err)
				for rows.Next() {
					require.NoError(b, rows.Scan(&v))
				}
				require.NoError(b, rows.Err())
			}
		})
	}
}
