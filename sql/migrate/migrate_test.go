package migrate_test

import (
	"context"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/migrations"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type appliedRow struct {
	Version   int32
	Name      string
	AppliedAt time.Time
}

func appliedRows(t *testing.T, db migrate.DB) []appliedRow {
	t.Helper()
	rows, err := db.Query(t.Context(),
		"SELECT version, name, applied_at FROM queen.schema_migrations ORDER BY version")
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedRow])
	require.NoError(t, err)
	return out
}

func embedded(t *testing.T) []migrate.Migration {
	t.Helper()
	list, err := migrate.Load(migrations.FS)
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestApplyTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t, pgtest.NewEmptyDB(t))

	require.NoError(t, migrate.Apply(ctx, conn, nil))
	first := appliedRows(t, conn)
	require.Len(t, first, len(embedded(t)))

	require.NoError(t, migrate.Apply(ctx, conn, nil))
	require.Equal(t, first, appliedRows(t, conn))
}

func TestApplyOnTemplateClone(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	before := appliedRows(t, pool)
	require.Len(t, before, len(embedded(t)))

	require.NoError(t, migrate.Apply(t.Context(), pool, nil))
	require.Equal(t, before, appliedRows(t, pool))
}

func TestApplyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewEmptyDB(t)

	const brokers = 4
	conns := make([]*pgx.Conn, brokers)
	for i := range conns {
		conns[i] = connect(t, url)
	}
	start := make(chan struct{})
	errs := make([]error, brokers)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			<-start
			errs[i] = migrate.Apply(ctx, conn, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "broker %d", i)
	}

	var total, distinct int
	require.NoError(t, conns[0].QueryRow(ctx,
		"SELECT count(*), count(DISTINCT version) FROM queen.schema_migrations").Scan(&total, &distinct))
	require.Equal(t, len(embedded(t)), total)
	require.Equal(t, total, distinct)

	var hasMessages bool
	require.NoError(t, conns[0].QueryRow(ctx,
		"SELECT to_regclass('queen.messages') IS NOT NULL").Scan(&hasMessages))
	require.True(t, hasMessages)
}

func TestApplyFailingMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	broken := fstest.MapFS{
		"0001_ok.up.sql":  {Data: []byte("CREATE TABLE queen.ok (x int);")},
		"0002_bad.up.sql": {Data: []byte("CREATE TABLE queen.bad (x int); SELECT 1/0;")},
	}
	err = migrate.ApplyFS(ctx, pool, broken, nil)
	require.ErrorContains(t, err, "apply migration 0002_bad.up.sql: ")

	rows := appliedRows(t, pool)
	require.Len(t, rows, 1)
	require.Equal(t, "ok", rows[0].Name)
	var hasBad bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('queen.bad') IS NOT NULL").Scan(&hasBad))
	require.False(t, hasBad, "the failed migration must roll back")

	// The lock must not stay behind in the pool.
	other := connect(t, url)
	var got bool
	require.NoError(t, other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrate.LockKey).Scan(&got))
	require.True(t, got)
	require.NoError(t, other.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", migrate.LockKey).Scan(&got))

	broken["0002_bad.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE queen.bad (x int);")}
	require.NoError(t, migrate.ApplyFS(ctx, pool, broken, nil))
	require.Len(t, appliedRows(t, pool), 2)
}

func TestLoad(t *testing.T) {
	t.Parallel()
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr string
	}{
		{
			name: "ordered by version",
			fsys: fstest.MapFS{"0010_c.up.sql": sql, "0002_b.up.sql": sql, "0001_a.up.sql": sql},
			want: []int{1, 2, 10},
		},
		{
			name:    "bad name",
			fsys:    fstest.MapFS{"0001_a.up.sql": sql, "2_b.sql": sql},
			wantErr: `migration file "2_b.sql": want NNNN_name.up.sql`,
		},
		{
			name:    "down file",
			fsys:    fstest.MapFS{"0001_a.down.sql": sql},
			wantErr: "want NNNN_name.up.sql",
		},
		{
			name:    "duplicate version",
			fsys:    fstest.MapFS{"0001_a.up.sql": sql, "0001_b.up.sql": sql},
			wantErr: "share version 1",
		},
		{
			name: "non-sql files ignored",
			fsys: fstest.MapFS{"0001_a.up.sql": sql, "migrations.go": sql},
			want: []int{1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			list, err := migrate.Load(tt.fsys)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var got []int
			for _, m := range list {
				got = append(got, m.Version)
			}
			require.Equal(t, tt.want, got)
		})
	}
}
