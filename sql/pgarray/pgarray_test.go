package pgarray_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgarray"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/pguuid"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// values are the slices the broker sends, with their edge cases: empty,
// nil (NULL), NULL elements, multi-byte text.
var values = []struct {
	oid   uint32
	value any
}{
	{pgtype.TextArrayOID, []string{"a", "", "é😀", `x,y{}"\`}},
	{pgtype.TextArrayOID, []string{}},
	{pgtype.TextArrayOID, []string(nil)},
	{pgtype.VarcharArrayOID, []string{"v", ""}},
	{pgtype.UUIDArrayOID, []uuid.UUID{uuid.MustParse("0193a5c4-7e2b-7c3d-8f00-0123456789ab"), uuid.Nil}},
	{pgtype.UUIDArrayOID, []uuid.UUID{}},
	{pgtype.JSONBArrayOID, []json.RawMessage{json.RawMessage(`{"a":[1,2]}`), nil, json.RawMessage(`null`), json.RawMessage(`"é"`)}},
	{pgtype.JSONBArrayOID, []json.RawMessage{}},
	{pgtype.Int8ArrayOID, []int64{0, -1, 1 << 62, -1 << 63}},
	{pgtype.Int4ArrayOID, []int32{0, -1, 1 << 30, -1 << 31}},
	{pgtype.BoolArrayOID, []bool{true, false}},
}

// The bytes are pgx's own: the same value encoded through pgx's generic
// array codec and through this package's plans.
func TestEncodeMatchesPgx(t *testing.T) {
	t.Parallel()
	plain := pgtype.NewMap()
	pguuid.Register(plain)
	fast := pgtype.NewMap()
	pguuid.Register(fast)
	pgarray.Register(fast)
	for _, v := range values {
		want, err := plain.Encode(v.oid, pgtype.BinaryFormatCode, v.value, nil)
		require.NoError(t, err, "%T %v", v.value, v.value)
		got, err := fast.Encode(v.oid, pgtype.BinaryFormatCode, v.value, nil)
		require.NoError(t, err, "%T %v", v.value, v.value)
		require.Equal(t, want, got, "%T %v", v.value, v.value)
		plan := fast.PlanEncode(v.oid, pgtype.BinaryFormatCode, v.value)
		require.Contains(t, typeName(plan), "pgarray", "%T on %d takes the direct plan", v.value, v.oid)
	}
	// Other element types and the text format stay pgx's.
	require.NotContains(t, typeName(fast.PlanEncode(pgtype.TextArrayOID, pgtype.TextFormatCode, []string{"a"})), "pgarray")
	require.NotContains(t, typeName(fast.PlanEncode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, []int32{1})), "pgarray")
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// Through PostgreSQL: what goes in comes back, scans unchanged.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	pguuid.Register(conn.TypeMap())
	pgarray.Register(conn.TypeMap())
	var (
		texts    []string
		empty    []string
		null     []string
		ids      []uuid.UUID
		payloads []json.RawMessage
		nulls    []bool
		i8       []int64
		i4       []int32
		flags    []bool
	)
	err = conn.QueryRow(ctx, `SELECT $1::text[], $2::text[], $3::text[], $4::uuid[], $5::jsonb[],
		array(SELECT x IS NULL FROM unnest($5::jsonb[]) x), $6::bigint[], $7::integer[], $8::boolean[]`,
		values[0].value, values[1].value, values[2].value, values[4].value, values[6].value, values[8].value,
		values[9].value, values[10].value).Scan(&texts, &empty, &null, &ids, &payloads, &nulls, &i8, &i4, &flags)
	require.NoError(t, err)
	require.Equal(t, values[0].value, texts)
	require.Equal(t, []string{}, empty)
	require.Nil(t, null)
	require.Equal(t, values[4].value, ids)
	require.Equal(t, []bool{false, true, false, false}, nulls, "a nil message is NULL, JSON null is not")
	require.JSONEq(t, `{"a":[1,2]}`, string(payloads[0]))
	require.Equal(t, values[8].value, i8)
	require.Equal(t, values[9].value, i4)
	require.Equal(t, values[10].value, flags)
}
