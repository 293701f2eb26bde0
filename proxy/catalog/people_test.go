package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/catalog"
)

// Users, roles and revocations: looked up, cached, and dropped or marked by
// the announcements of the SQL functions.
func TestPeople(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	var tenant, user uuid.UUID
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT tenant_id FROM queen_proxy.clusters WHERE id = $1`, f.cluster).Scan(&tenant))
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT queen_proxy.create_user($1, 'Ada@acme.test', NULL)`, tenant).Scan(&user))
	c := catalog.New(catalog.Config{Pool: f.pool, StaleGrace: time.Minute, Timeout: time.Second})
	c.Start()
	t.Cleanup(c.Stop)
	require.Eventually(t, c.Listening, 10*time.Second, 10*time.Millisecond)

	u, err := c.User(ctx, user)
	require.NoError(t, err)
	require.Equal(t, "ada@acme.test", u.Email)
	require.Equal(t, "acme", u.TenantSlug)
	require.False(t, u.IsOperator)
	_, err = c.User(ctx, uuid.New())
	require.ErrorIs(t, err, catalog.ErrNotFound)
	cl, err := c.ClusterByID(ctx, f.cluster)
	require.NoError(t, err)
	require.Equal(t, "acme-prod", cl.Slug)

	_, err = c.Role(ctx, user, f.cluster)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = f.pool.Exec(ctx, `SELECT queen_proxy.grant_cluster_role($1, 'ada@acme.test', 'producer')`, f.cluster)
	require.NoError(t, err)
	require.Eventually(t, func() bool { r, _ := c.Role(context.Background(), user, f.cluster); return r == "producer" },
		time.Second, 5*time.Millisecond, "the grant's announcement drops the cached miss")
	_, err = f.pool.Exec(ctx, `SELECT queen_proxy.set_operator('ada@acme.test', true)`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { u, _ := c.User(context.Background(), user); return u.IsOperator },
		time.Second, 5*time.Millisecond, "user:<id> drops the cached user")

	revoked, err := c.Revoked(ctx, "jti-1")
	require.NoError(t, err)
	require.False(t, revoked)
	_, err = f.pool.Exec(ctx, `SELECT queen_proxy.revoke_session('jti-1', now() + interval '1 hour', 'user', $1)`, user)
	require.NoError(t, err)
	require.Eventually(t, func() bool { r, _ := c.Revoked(context.Background(), "jti-1"); return r },
		time.Second, 5*time.Millisecond, "session:<jti> marks the cached session revoked")

	members, err := c.Memberships(ctx, user, false)
	require.NoError(t, err)
	require.Len(t, members, 1)
	require.Equal(t, "producer", members[0].Role)
	all, err := c.Memberships(ctx, user, true)
	require.NoError(t, err)
	require.Equal(t, "admin", all[0].Role, "an operator is admin everywhere")
}

// When pxdb cannot say, a revocation lookup is uncertain (the caller picks
// fail-open or fail-closed), and a known revocation still holds.
func TestRevokedWithoutPXDB(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pool, err := pgxpool.New(t.Context(), f.url)
	require.NoError(t, err)
	c := catalog.New(catalog.Config{Pool: pool, Timeout: time.Second})
	c.MarkRevoked("gone")
	pool.Close()
	_, err = c.Revoked(t.Context(), "unknown")
	require.ErrorIs(t, err, catalog.ErrUnavailable)
	revoked, err := c.Revoked(t.Context(), "gone")
	require.NoError(t, err)
	require.True(t, revoked)
}
