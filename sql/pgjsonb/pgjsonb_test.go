package pgjsonb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgjsonb"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Without Register a *json.RawMessage target is scanned by json.Unmarshal;
// with it the bytes are copied.
func TestRegisterCopiesInsteadOfUnmarshal(t *testing.T) {
	var raw json.RawMessage
	m := pgtype.NewMap()
	require.Contains(t, fmt.Sprintf("%T", m.PlanScan(pgtype.JSONBOID, pgtype.BinaryFormatCode, &raw)), "Unwrapper")

	m = pgtype.NewMap()
	pgjsonb.Register(m)
	pgjsonb.Register(m) // twice is once
	plan := m.PlanScan(pgtype.JSONBOID, pgtype.BinaryFormatCode, &raw)
	require.NotContains(t, fmt.Sprintf("%T", plan), "Unwrapper")
	src := []byte("\x01{\"a\": 1}")
	require.NoError(t, plan.Scan(src, &raw))
	require.Equal(t, `{"a": 1}`, string(raw))
	src[1] = 'X'
	require.Equal(t, `{"a": 1}`, string(raw), "a copy, not the connection's buffer")
	require.Error(t, plan.Scan([]byte("\x02{}"), &raw), "an unknown binary version is refused")
}

// Every kind of value reads the same with and without Register, in both of
// PostgreSQL's formats, NULL included.
func TestSameBytesAsUnmarshal(t *testing.T) {
	db := pgtest.NewDB(t)
	values := []string{`{"b": [1, 2.5, "x\"y"], "a": null}`, `"caf\u00e9 \ud83d\ude00"`, `[]`, `null`, `12`, `true`, `{"k": {"n": {}}}`}
	read := func(register bool, mode pgx.QueryExecMode) []json.RawMessage {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, db)
		require.NoError(t, err)
		defer conn.Close(ctx)
		if register {
			pgjsonb.Register(conn.TypeMap())
		}
		var out []json.RawMessage
		for _, v := range values {
			var raw, null json.RawMessage
			null = json.RawMessage("x")
			require.NoError(t, conn.QueryRow(ctx, "SELECT $1::text::jsonb, NULL::jsonb", mode, v).Scan(&raw, &null))
			require.Nil(t, null)
			out = append(out, raw)
		}
		return out
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		require.Equal(t, read(false, mode), read(true, mode), "mode %v", mode)
	}
}
