package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMigrationsApplyOnceAndSeedPlans(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	require.NoError(t, migrate.ApplySet(t.Context(), p.pool, proxySet, nil), "a second run is a no-op")
	var versions, plans int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.schema_migrations`).Scan(&versions))
	require.Equal(t, 4, versions)
	require.NoError(t, p.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM queen_proxy.plans WHERE code IN ('free', 'dev', 'pro', 'dedicated-s') AND monthly_msgs_quota IS NULL`).Scan(&plans))
	require.Equal(t, 4, plans)
}

// The audit trail refuses UPDATE, DELETE and TRUNCATE for the role that owns
// it (the proxy's runtime role, which ran the migrations) and for a
// superuser alike.
func TestOperationsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, pgtest.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	role := "pxowner_" + randomHex(6)
	_, err = admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
	require.NoError(t, err)
	// Registered first, so it runs after the database is dropped.
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	superURL := pgtest.NewEmptyDB(t)
	u, err := url.Parse(superURL)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+strings.TrimPrefix(u.Path, "/")+" OWNER TO "+role)
	require.NoError(t, err)
	u.User = url.User(role)

	owner, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	require.NoError(t, migrate.ApplySet(ctx, owner, proxySet, nil), "the owner runs the migrations, pgcrypto included")
	_, err = owner.Exec(ctx, `INSERT INTO queen_proxy.cells (slug, base_url) VALUES ('cell-1', 'http://127.0.0.1:6632')`)
	require.NoError(t, err)
	_, err = owner.Exec(ctx, `SELECT queen_proxy.bootstrap_tenant('acme', 'Acme', 'acme-prod', 'pro', 'cell-1', 'a@acme.test')`)
	require.NoError(t, err, "the runtime role may append through the functions")

	super, err := pgxpool.New(ctx, superURL)
	require.NoError(t, err)
	t.Cleanup(super.Close)

	for _, db := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"owner", owner}, {"superuser", super}} {
		for _, stmt := range []string{
			`UPDATE queen_proxy.operations SET action = 'forged'`,
			`UPDATE queen_proxy.operations SET action = 'forged' WHERE false`,
			`DELETE FROM queen_proxy.operations`,
			`TRUNCATE queen_proxy.operations`,
			`TRUNCATE queen_proxy.tenants CASCADE`,
		} {
			_, err := db.pool.Exec(ctx, stmt)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%s as %s: %v", stmt, db.name, err)
			require.Equal(t, "42501", pgErr.Code, "%s as %s: %s", stmt, db.name, pgErr.Message)
		}
	}
	var n int
	require.NoError(t, super.QueryRow(ctx, `SELECT count(*) FROM queen_proxy.operations WHERE action <> 'forged'`).Scan(&n))
	require.Equal(t, 6, n, "every audit row is still there")
}

func TestFunctionsValidate(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	before := p.lastOp()
	for _, c := range []struct{ hash, scopes, want string }{
		{strings.Repeat("a", 63), "{read}", "64 lowercase hex"},
		{strings.Repeat("A", 64), "{read}", "64 lowercase hex"},
		{strings.Repeat("a", 64), "{}", "non-empty subset"},
		{strings.Repeat("a", 64), "{write}", "non-empty subset"},
	} {
		require.Contains(t, p.fails(`SELECT queen_proxy.issue_api_key($1, 'k', $2, $3::text[])`, b.ClusterID, c.hash, c.scopes), c.want)
	}
	require.Empty(t, p.opsAfter(before), "a refused key issue writes no audit row")
	other := p.bootstrap("globex", "globex-1", "admin@globex.test", nil)
	before = p.lastOp()
	require.Contains(t, p.fails(`SELECT queen_proxy.grant_cluster_role($1, 'admin@acme.test', 'viewer')`, other.ClusterID),
		"no user admin@acme.test in the tenant")
	key := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID)
	p.exec(`SELECT queen_proxy.revoke_api_key($1)`, key)
	require.Contains(t, p.fails(`SELECT queen_proxy.revoke_api_key($1)`, key), "no live key")
	require.Contains(t, p.fails(`SELECT queen_proxy.set_limit_override($1, '{"max_req_per_sec": 0}')`, b.ClusterID), "positive integer")
	require.Contains(t, p.fails(`SELECT queen_proxy.set_limit_override($1, '{"req_per_sec": 5}')`, b.ClusterID), "is not a limit")
	require.Contains(t, p.fails(`SELECT queen_proxy.delete_tenant($1)`, b.TenantID), "purge the broker first")
	require.Contains(t, p.fails(`SELECT queen_proxy.record_operation($1, NULL, 'robot', NULL, 'x', NULL)`, b.TenantID), "actor robot")
	var actions []string
	for _, o := range p.opsAfter(before) {
		actions = append(actions, o.Action)
	}
	require.Equal(t, []string{"api_key_revoked"}, actions, "a refused call writes no audit row")
}

// Every mutating function that names a cluster announces it exactly once
// on queen_proxy_inval; set_tenant_status announces every cluster of the
// tenant.
func TestFunctionsNotify(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	second := p.uuidOf(`SELECT queen_proxy.create_cluster($1, 'acme-dev', 'free', 'cell-1')`, b.TenantID)
	key := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID)
	conn := p.listen()
	c := b.ClusterID.String()
	tests := []struct {
		sql  string
		args []any
		want []string
	}{
		{`SELECT queen_proxy.create_cluster($1, 'acme-test', 'free', 'cell-1')`, []any{b.TenantID}, nil}, // id checked below
		{`SELECT queen_proxy.assign_plan($1, 'dev')`, []any{b.ClusterID}, []string{c}},
		{`SELECT queen_proxy.set_cluster_status($1, 'push_blocked')`, []any{b.ClusterID}, []string{c}},
		{`SELECT queen_proxy.issue_api_key($1, 'x', $2, ARRAY['read'])`, []any{b.ClusterID, hashOf("x")}, []string{c}},
		{`SELECT queen_proxy.revoke_api_key($1)`, []any{key}, []string{c}},
		{`SELECT queen_proxy.set_limit_override($1, '{}')`, []any{b.ClusterID}, []string{c}},
		{`SELECT queen_proxy.grant_cluster_role($1, 'admin@acme.test', 'viewer')`, []any{b.ClusterID}, []string{c}},
		{`SELECT queen_proxy.revoke_cluster_role($1, 'admin@acme.test')`, []any{b.ClusterID}, []string{c}},
		{`SELECT queen_proxy.revoke_session('j1', now() + interval '1 hour', 'user', $1)`, []any{b.UserID}, []string{"session:j1"}},
		{`SELECT queen_proxy.record_user_login($1)`, []any{b.UserID}, []string{}},
	}
	for i, tt := range tests {
		p.exec(tt.sql, tt.args...)
		got := drain(t, p, conn, i)
		if tt.want == nil {
			require.Len(t, got, 1, tt.sql)
			_, err := uuid.Parse(got[0])
			require.NoError(t, err, tt.sql)
			continue
		}
		require.Equal(t, tt.want, got, tt.sql)
	}

	p.exec(`SELECT queen_proxy.set_tenant_status($1, 'suspended')`, b.TenantID)
	got := drain(t, p, conn, len(tests))
	require.Len(t, got, 3)
	require.Contains(t, got, c)
	require.Contains(t, got, second.String())
}

// drain returns the notifications received before a sentinel sent after
// them: notifications arrive in commit order, so the sentinel marks the end
// of what the previous statement sent.
func drain(t *testing.T, p *pxdb, conn *pgx.Conn, seq int) []string {
	t.Helper()
	sentinel := "sentinel-" + strings.Repeat("x", seq%3) + time.Now().Format("150405.000000000")
	p.exec(`SELECT pg_notify('queen_proxy_inval', $1)`, sentinel)
	got := []string{}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Payload == sentinel {
			return got
		}
		got = append(got, n.Payload)
	}
}

// Erasing a tenant anonymises its users, removes its clusters and keys, and
// leaves every audit row in place.
func TestDeleteTenantAnonymises(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", "pw")
	other := p.bootstrap("globex", "globex-1", "admin@globex.test", "pw")
	var rowsBefore int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.operations WHERE tenant_id = $1`, b.TenantID).Scan(&rowsBefore))

	p.exec(`SELECT queen_proxy.delete_tenant($1, true)`, b.TenantID)

	var email, slug string
	var hash *string
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT email, password_hash FROM queen_proxy.users WHERE id = $1`, b.UserID).Scan(&email, &hash))
	require.Equal(t, "erased-"+b.UserID.String()+"@erased.invalid", email)
	require.Nil(t, hash)
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT slug FROM queen_proxy.tenants WHERE id = $1`, b.TenantID).Scan(&slug))
	require.NotContains(t, slug, "acme")
	var clusters, keys, rowsAfter, mentions, outboxEmails int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.clusters WHERE tenant_id = $1`, b.TenantID).Scan(&clusters))
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID).Scan(&keys))
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.operations WHERE tenant_id = $1`, b.TenantID).Scan(&rowsAfter))
	require.NoError(t, p.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM queen_proxy.operations WHERE target ILIKE '%acme.test%' OR meta::text ILIKE '%acme.test%'`).Scan(&mentions))
	require.NoError(t, p.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM queen_proxy.outbox WHERE payload::text ILIKE '%acme.test%'`).Scan(&outboxEmails))
	require.Zero(t, clusters)
	require.Zero(t, keys)
	require.Equal(t, rowsBefore+1, rowsAfter, "the trail keeps every row and gains tenant_erased")
	require.Zero(t, mentions, "no audit row holds the email")
	require.Zero(t, outboxEmails)
	// The other tenant is untouched, and the erased tenant's names are free again.
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.clusters WHERE id = $1`, other.ClusterID).Scan(&clusters))
	require.Equal(t, 1, clusters)
	again := p.bootstrap("acme", "acme-prod", "admin@acme.test", "pw")
	require.NotEqual(t, b.TenantID, again.TenantID)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
