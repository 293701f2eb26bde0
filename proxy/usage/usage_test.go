package usage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/usage"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is pxdb with one cluster.
type fixture struct {
	pool    *pgxpool.Pool
	cluster uuid.UUID
	spool   string
}

func setup(t *testing.T) fixture {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplySet(ctx, pool, migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}, nil))
	_, err = pool.Exec(ctx, `INSERT INTO queen_proxy.cells (slug, base_url) VALUES ('cell-1', 'http://127.0.0.1:1')`)
	require.NoError(t, err)
	var tenant, cluster uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen_proxy.create_tenant('acme', 'Acme')`).Scan(&tenant))
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen_proxy.create_cluster($1, 'acme', 'free', 'cell-1')`, tenant).Scan(&cluster))
	return fixture{pool: pool, cluster: cluster, spool: t.TempDir()}
}

func (f fixture) meter(t *testing.T) *usage.Meter {
	t.Helper()
	m, err := usage.New(usage.Config{Pool: f.pool, SpoolDir: f.spool, Timeout: 2 * time.Second})
	require.NoError(t, err)
	return m
}

// total is what usage_minutes holds for the cluster and class.
func (f fixture) total(t *testing.T, class string) (msgs, reqs, in, out int64) {
	t.Helper()
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(msgs), 0), coalesce(sum(reqs), 0), coalesce(sum(bytes_in), 0), coalesce(sum(bytes_out), 0)
		 FROM queen_proxy.usage_minutes WHERE cluster_id = $1 AND op_class = $2`, f.cluster, class).Scan(&msgs, &reqs, &in, &out))
	return msgs, reqs, in, out
}

// Usage counted while pxdb is stopped is spooled, and written once pxdb is
// back: every count once, none lost, none twice. pxdb is really stopped
// (the harness cluster), so this test is not parallel.
func TestOutageSpoolsAndReplaysOnce(t *testing.T) {
	f := setup(t)
	m := f.meter(t)
	push := usage.Counts{Msgs: 5, Reqs: 1, BytesIn: 100, BytesOut: 40}
	m.Add(f.cluster, usage.ClassPush, push)
	require.NoError(t, m.Flush(t.Context()))
	msgs, _, _, _ := f.total(t, usage.ClassPush)
	require.EqualValues(t, 5, msgs)

	pgtest.Stop(t)
	m.Add(f.cluster, usage.ClassPush, push)
	m.Add(f.cluster, usage.ClassDelivery, usage.Counts{Msgs: 2, Reqs: 1})
	require.Error(t, m.Flush(t.Context()))
	require.Equal(t, 1, m.Spooled())
	require.Zero(t, m.Pending(), "spooled, not kept in memory")
	m.Add(f.cluster, usage.ClassPush, push)
	require.Error(t, m.Flush(t.Context()))
	require.Equal(t, 2, m.Spooled(), "newer usage queues behind the spool")

	pgtest.Start(t)
	require.Eventually(t, func() bool {
		_ = m.Flush(context.Background())
		return m.Spooled() == 0
	}, 30*time.Second, 50*time.Millisecond, "the spool drains once pxdb is back")
	require.NoError(t, m.Flush(t.Context()))
	msgs, reqs, in, out := f.total(t, usage.ClassPush)
	require.EqualValues(t, 15, msgs)
	require.EqualValues(t, 3, reqs)
	require.EqualValues(t, 300, in)
	require.EqualValues(t, 120, out)
	msgs, _, _, _ = f.total(t, usage.ClassDelivery)
	require.EqualValues(t, 2, msgs)
}

// A batch pxdb committed but whose confirmation was lost is spooled anyway;
// its replay is recognised and not counted again.
func TestReplayOfCommittedBatchCountsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := f.meter(t)
	m.Add(f.cluster, usage.ClassTxn, usage.Counts{Msgs: 7, Reqs: 1})
	require.NoError(t, m.ApplyThenSpool(t.Context()))
	require.Equal(t, 1, m.Spooled())
	require.NoError(t, m.Flush(t.Context()))
	require.Zero(t, m.Spooled())
	msgs, reqs, _, _ := f.total(t, usage.ClassTxn)
	require.EqualValues(t, 7, msgs)
	require.EqualValues(t, 1, reqs)
}

// A spool file that is not a batch is set aside, not replayed forever.
func TestUnreadableSpoolFileSetAside(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := f.meter(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.spool, "usage-00000000000000000001-x.json"), []byte("{broken"), 0o600))
	m.Add(f.cluster, usage.ClassRead, usage.Counts{Reqs: 1})
	require.NoError(t, m.Flush(t.Context()))
	require.Zero(t, m.Spooled())
	_, reqs, _, _ := f.total(t, usage.ClassRead)
	require.EqualValues(t, 1, reqs)
	bad, err := filepath.Glob(filepath.Join(f.spool, "*.bad"))
	require.NoError(t, err)
	require.Len(t, bad, 1)
}

// Stop flushes what is counted, and a meter that cannot reach pxdb at Stop
// leaves it in the spool for the next start.
func TestStopFlushes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := f.meter(t)
	m.Start()
	m.Add(f.cluster, usage.ClassConfigure, usage.Counts{Reqs: 2})
	m.Stop()
	m.Stop()
	_, reqs, _, _ := f.total(t, usage.ClassConfigure)
	require.EqualValues(t, 2, reqs)

	dead, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	defer dead.Close()
	gone, err := usage.New(usage.Config{Pool: dead, SpoolDir: f.spool, Timeout: time.Second, DrainTimeout: 2 * time.Second})
	require.NoError(t, err)
	gone.Add(f.cluster, usage.ClassConfigure, usage.Counts{Reqs: 3})
	gone.Stop()
	require.Equal(t, 1, gone.Spooled())
	require.NoError(t, m.Flush(t.Context()), "another meter on the same spool replays it")
	_, reqs, _, _ = f.total(t, usage.ClassConfigure)
	require.EqualValues(t, 5, reqs)
}

func TestSpoolDirMustBeWritable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := usage.New(usage.Config{SpoolDir: filepath.Join(file, "spool")})
	require.ErrorContains(t, err, "QUEEN_PROXY_SPOOL_DIR")
}

func TestClassOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		class routes.ProxyClass
		op    string
		want  string
	}{
		{routes.ProxyProduce, "pushMessages", usage.ClassPush},
		{routes.ProxyProduce, "executeTransaction", usage.ClassTxn},
		{routes.ProxyConsume, "popQueue", usage.ClassDelivery},
		{routes.ProxyConsume, "ackMessage", usage.ClassDelivery},
		{routes.ProxyQueueAdmin, "configureQueue", usage.ClassConfigure},
		{routes.ProxyRead, "listQueues", usage.ClassRead},
		{routes.ProxyGatedRead, "x", usage.ClassRead},
		{routes.ProxyGatedMixed, "commitStreamCycle", usage.ClassTxn},
		{routes.ProxyOperator, "getStatus", usage.ClassRead},
	} {
		require.Equal(t, tt.want, usage.ClassOf(tt.class, tt.op), "%s %s", tt.class, tt.op)
	}
}
