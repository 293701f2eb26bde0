package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fixture struct {
	url     string
	pool    *pgxpool.Pool
	cluster uuid.UUID
	key     string
	keyID   uuid.UUID
}

func setup(t *testing.T) fixture {
	t.Helper()
	ctx := t.Context()
	url := pgtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplySet(ctx, pool, migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}, nil))
	_, err = pool.Exec(ctx, `INSERT INTO queen_proxy.cells (slug, base_url, cell_secret) VALUES ('cell-1', 'http://127.0.0.1:1', 'tok')`)
	require.NoError(t, err)
	f := fixture{url: url, pool: pool}
	var tenant uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen_proxy.create_tenant('acme', 'Acme')`).Scan(&tenant))
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen_proxy.create_cluster($1, 'acme-prod', 'free', 'cell-1')`, tenant).Scan(&f.cluster))
	key, hash, err := apikey.Generate("test")
	require.NoError(t, err)
	f.key = key
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen_proxy.issue_api_key($1, 'k', $2, ARRAY['read','produce'])`, f.cluster, hash).Scan(&f.keyID))
	return f
}

func TestLookups(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := catalog.New(catalog.Config{Pool: f.pool, StaleGrace: time.Minute})
	k, err := c.Key(t.Context(), apikey.Hash(f.key))
	require.NoError(t, err)
	require.Equal(t, f.keyID, k.ID)
	require.Equal(t, []string{"read", "produce"}, k.Scopes)
	require.Equal(t, "acme-prod", k.Cluster.Slug)
	require.Equal(t, catalog.StatusActive, k.Cluster.Status)
	require.Equal(t, "http://127.0.0.1:1", k.Cluster.BaseURL)
	require.Equal(t, "tok", *k.Cluster.CellSecret)
	require.EqualValues(t, 5, k.Cluster.Limits.ReqPerSec)
	require.False(t, k.Cluster.Features["streams"])
	require.True(t, k.Cluster.Features["kv"])

	cl, err := c.Cluster(t.Context(), "acme-prod")
	require.NoError(t, err)
	require.Equal(t, f.cluster, cl.ID)
	require.Equal(t, k.Cluster.BrokerTenant, cl.BrokerTenant)
	_, err = c.Cluster(t.Context(), "nope")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = c.Key(t.Context(), apikey.Hash("qk_test_unknown"))
	require.ErrorIs(t, err, catalog.ErrNotFound)

	_, err = f.pool.Exec(t.Context(), `SELECT queen_proxy.set_limit_override($1, '{"max_req_per_sec": 1, "max_parked_pops": null}')`, f.cluster)
	require.NoError(t, err)
	_, err = f.pool.Exec(t.Context(), `SELECT queen_proxy.set_tenant_status(cluster_tenant($1), 'grace')`, f.cluster)
	require.Error(t, err, "cluster_tenant is schema-qualified only")
	_, err = f.pool.Exec(t.Context(), `SELECT queen_proxy.set_tenant_status(queen_proxy.cluster_tenant($1), 'grace')`, f.cluster)
	require.NoError(t, err)
	cl, err = c.Cluster(t.Context(), "acme-prod")
	require.NoError(t, err, "not listening: every lookup reads pxdb")
	require.EqualValues(t, 1, cl.Limits.ReqPerSec)
	require.Zero(t, cl.Limits.MaxParkedPops)
	require.Equal(t, catalog.StatusPushBlocked, cl.Status)

	// last_used_at is written in batches; Stop flushes.
	c.Stop()
	var used *time.Time
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT last_used_at FROM queen_proxy.api_keys WHERE id = $1`, f.keyID).Scan(&used))
	require.NotNil(t, used)
}

// A revocation reaches a listening catalog through NOTIFY: the cached key is
// refused at once, not after its 30 s.
func TestRevocationDropsCache(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := catalog.New(catalog.Config{Pool: f.pool, StaleGrace: time.Minute})
	c.Start()
	t.Cleanup(c.Stop)
	require.Eventually(t, c.Listening, 10*time.Second, 10*time.Millisecond)
	hash := apikey.Hash(f.key)
	_, err := c.Key(t.Context(), hash)
	require.NoError(t, err)
	_, err = f.pool.Exec(t.Context(), `SELECT queen_proxy.revoke_api_key($1)`, f.keyID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Key(context.Background(), hash)
		return err == catalog.ErrNotFound
	}, time.Second, 5*time.Millisecond)
}

// With pxdb gone, what it confirmed is served within the grace; an unknown
// key is unavailable; a key it refused stays refused.
func TestStaleGrace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, f.url)
	require.NoError(t, err)
	revoked, hash, err := apikey.Generate("test")
	require.NoError(t, err)
	var revokedID uuid.UUID
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT queen_proxy.issue_api_key($1, 'r', $2, ARRAY['read'])`, f.cluster, hash).Scan(&revokedID))
	_, err = f.pool.Exec(ctx, `SELECT queen_proxy.revoke_api_key($1)`, revokedID)
	require.NoError(t, err)

	now := time.Now()
	c := catalog.New(catalog.Config{Pool: pool, StaleGrace: time.Minute, Timeout: time.Second, NowFunc: func() time.Time { return now }})
	_, err = c.Key(ctx, apikey.Hash(f.key))
	require.NoError(t, err)
	_, err = c.Key(ctx, apikey.Hash(revoked))
	require.ErrorIs(t, err, catalog.ErrNotFound)
	pool.Close()

	now = now.Add(50 * time.Second)
	k, err := c.Key(ctx, apikey.Hash(f.key))
	require.NoError(t, err, "within the grace")
	require.Equal(t, f.keyID, k.ID)
	_, err = c.Key(ctx, apikey.Hash(revoked))
	require.ErrorIs(t, err, catalog.ErrNotFound, "a refused key never comes back")
	_, err = c.Key(ctx, apikey.Hash("qk_test_never_seen"))
	require.ErrorIs(t, err, catalog.ErrUnavailable)
	now = now.Add(20 * time.Second)
	_, err = c.Key(ctx, apikey.Hash(f.key))
	require.ErrorIs(t, err, catalog.ErrUnavailable, "past the grace")
}

func TestMergeStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tenant, cluster string
		want            catalog.Status
	}{
		{"active", "active", catalog.StatusActive},
		{"grace", "active", catalog.StatusPushBlocked},
		{"active", "push_blocked", catalog.StatusPushBlocked},
		{"active", "deleting", catalog.StatusDeleting},
		{"suspended", "push_blocked", catalog.StatusSuspended},
		{"deleting", "suspended", catalog.StatusDeleting},
		{"active", "weird", catalog.StatusSuspended},
	} {
		require.Equal(t, tt.want, catalog.MergeStatus(tt.tenant, tt.cluster), "%s/%s", tt.tenant, tt.cluster)
	}
}
