package pguuid_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/pguuid"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Without Register pgx plans uuid.UUID through driver.Valuer (text); with it
// the plan is the binary wrapper.
func TestRegisterReplacesTheTextFallback(t *testing.T) {
	m := pgtype.NewMap()
	before := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, uuid.New())
	require.NotNil(t, before)
	require.Contains(t, typeName(before), "DriverValuer")

	m = pgtype.NewMap()
	pguuid.Register(m)
	after := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, uuid.New())
	require.NotNil(t, after)
	require.NotContains(t, typeName(after), "DriverValuer")
	buf, err := after.Encode(uuid.MustParse("0193a5c4-7e2b-7c3d-8f00-0123456789ab"), nil)
	require.NoError(t, err)
	require.Len(t, buf, 16, "binary form")
}

// Values and arrays round-trip through PostgreSQL unchanged, and NULL scans
// the way it did before Register: with or without it, the same results.
func TestRoundTripThroughPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	for _, register := range []bool{false, true} {
		t.Run(fmt.Sprintf("register=%v", register), func(t *testing.T) {
			roundTrip(t, db, register)
		})
	}
}

func roundTrip(t *testing.T, db string, register bool) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	if register {
		pguuid.Register(conn.TypeMap())
	}

	one := uuid.New()
	many := []uuid.UUID{uuid.New(), uuid.Nil, uuid.New()}
	var (
		gotOne  uuid.UUID
		gotMany []uuid.UUID
		kept    = uuid.New()
		gotNull = kept
		text    string
		ptr     *uuid.UUID
		nullPtr = &kept
	)
	err = conn.QueryRow(ctx, "SELECT $1::uuid, $2::uuid[], NULL::uuid, $1::uuid::text, $1::uuid, NULL::uuid", one, many).
		Scan(&gotOne, &gotMany, &gotNull, &text, &ptr, &nullPtr)
	require.NoError(t, err)
	require.Equal(t, one, gotOne)
	require.Equal(t, &one, ptr)
	require.Nil(t, nullPtr, "NULL into a *uuid.UUID is nil")
	require.Equal(t, many, gotMany)
	require.Equal(t, kept, gotNull, "NULL leaves the target as it was, as uuid.UUID's Scan does")
	require.Equal(t, one.String(), text, "PostgreSQL received the same id")

	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM unnest($1::uuid[]) u WHERE u = ANY($1)", many).Scan(&n))
	require.Equal(t, 3, n)
}

// Without Register a *uuid.UUID target is scanned through sql.Scanner (the
// id formatted as text, then parsed); with it the 16 bytes are copied.
func TestRegisterScansBinary(t *testing.T) {
	var u uuid.UUID
	m := pgtype.NewMap()
	require.Contains(t, typeName(m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &u)), "SQLScanner")

	m = pgtype.NewMap()
	pguuid.Register(m)
	pguuid.Register(m) // twice is once
	plan := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &u)
	require.NotContains(t, typeName(plan), "SQLScanner")
	want := uuid.MustParse("0193a5c4-7e2b-7c3d-8f00-0123456789ab")
	require.NoError(t, plan.Scan(want[:], &u))
	require.Equal(t, want, u)
	require.Error(t, plan.Scan(want[:15], &u), "a short value is refused")
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
