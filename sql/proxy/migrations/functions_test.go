package migrations_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var keyFormat = regexp.MustCompile(`^qk_live_[A-Za-z0-9_-]{43}$`)

func TestBootstrapTenantGolden(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	before := p.lastOp()
	b := p.bootstrap("acme", "acme-prod", "Admin@Acme.test", "s3cret")
	require.NotNil(t, b.APIKey)
	require.Regexp(t, keyFormat, *b.APIKey)
	require.True(t, b.PasswordSet)
	require.True(t, b.CanLogin)

	keyID := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID)
	sum := sha256.Sum256([]byte(*b.APIKey))
	var stored string
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT key_hash FROM queen_proxy.api_keys WHERE id = $1`, keyID).Scan(&stored))
	require.Equal(t, hex.EncodeToString(sum[:]), stored, "the key is stored as the hex sha256 of the whole key")

	c := &b.ClusterID
	require.Equal(t, []op{
		{Action: "tenant_created", Actor: "control_plane", Target: ptr(b.TenantID.String()), Meta: map[string]any{"slug": "acme"}},
		{Action: "cluster_created", Actor: "control_plane", Target: ptr(b.ClusterID.String()), Cluster: c,
			Meta: map[string]any{"slug": "acme-prod", "plan": "pro", "cell": "cell-1"}},
		{Action: "user_created", Actor: "control_plane", Target: ptr(b.UserID.String()), Meta: map[string]any{"provider": "local"}},
		{Action: "cluster_role_granted", Actor: "control_plane", Target: ptr(b.UserID.String()), Cluster: c,
			Meta: map[string]any{"role": "admin"}},
		{Action: "api_key_issued", Actor: "control_plane", Target: ptr(keyID.String()), Cluster: c,
			Meta: map[string]any{"name": "default", "scopes": []any{"produce", "consume", "admin", "read"}}},
		{Action: "tenant_bootstrapped", Actor: "control_plane", Target: ptr(b.TenantID.String()), Cluster: c,
			Meta: map[string]any{"cluster_slug": "acme-prod", "plan": "pro", "cell": "cell-1", "created": true}},
	}, p.opsAfter(before))

	// A re-run changes nothing but the grant and says so; the key is not
	// shown again.
	before = p.lastOp()
	again := p.bootstrap("acme", "acme-prod", "admin@acme.test", "s3cret")
	require.Nil(t, again.APIKey)
	require.Equal(t, b.TenantID, again.TenantID)
	require.Equal(t, b.ClusterID, again.ClusterID)
	require.Equal(t, b.UserID, again.UserID)
	require.False(t, again.PasswordSet)
	var actions []string
	for _, o := range p.opsAfter(before) {
		actions = append(actions, o.Action)
	}
	require.Equal(t, []string{"cluster_role_granted", "tenant_bootstrapped"}, actions)

	var outbox int
	require.NoError(t, p.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM queen_proxy.outbox WHERE kind = 'tenant_bootstrapped'`).Scan(&outbox))
	require.Equal(t, 1, outbox, "the outbox event is for the tenant's creation only")

	var ok bool
	require.NoError(t, p.pool.QueryRow(t.Context(),
		`SELECT password_hash = public.crypt('s3cret', password_hash) FROM queen_proxy.users WHERE id = $1`, b.UserID).Scan(&ok))
	require.True(t, ok, "the password is stored as a bcrypt hash")
}

func TestBootstrapTenantRefusesAnotherTenantsNames(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	require.Contains(t, p.fails(`SELECT queen_proxy.bootstrap_tenant('globex', 'Globex', 'acme-prod', 'pro', 'cell-1', 'a@globex.test')`),
		"belongs to another tenant")
	require.Contains(t, p.fails(`SELECT queen_proxy.bootstrap_tenant('globex', 'Globex', 'globex-1', 'pro', 'cell-1', 'admin@acme.test')`),
		"belongs to another tenant")
	// Both calls rolled back whole: no globex tenant exists.
	var n int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_proxy.tenants WHERE slug = 'globex'`).Scan(&n))
	require.Zero(t, n)
}

// Each control-plane function writes exactly these audit rows.
func TestControlPlaneFunctionsGolden(t *testing.T) {
	t.Parallel()
	key := func(p *pxdb, cluster uuid.UUID, name string) uuid.UUID {
		return p.uuidOf(`SELECT queen_proxy.issue_api_key($1, $2, $3, ARRAY['read'])`, cluster, name, hashOf(name))
	}
	tests := []struct {
		name string
		// run calls the function on the fixture and returns the rows it must write.
		run func(p *pxdb, b bootstrapped) []op
	}{
		{"create_tenant", func(p *pxdb, _ bootstrapped) []op {
			id := p.uuidOf(`SELECT queen_proxy.create_tenant('globex', 'Globex')`)
			return []op{{Action: "tenant_created", Actor: "control_plane", Target: ptr(id.String()), Meta: map[string]any{"slug": "globex"}}}
		}},
		{"create_user", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT queen_proxy.create_user($1, 'Dev@Acme.test', NULL, 'github')`, b.TenantID)
			var email string
			require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT email FROM queen_proxy.users WHERE id = $1`, id).Scan(&email))
			require.Equal(t, "dev@acme.test", email)
			return []op{{Action: "user_created", Actor: "control_plane", Target: ptr(id.String()), Meta: map[string]any{"provider": "github"}}}
		}},
		{"create_cluster", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT queen_proxy.create_cluster($1, 'acme-dev', 'free', 'cell-1')`, b.TenantID)
			return []op{{Action: "cluster_created", Actor: "control_plane", Target: ptr(id.String()), Cluster: &id,
				Meta: map[string]any{"slug": "acme-dev", "plan": "free", "cell": "cell-1"}}}
		}},
		{"assign_plan", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.assign_plan($1, 'dev')`, b.ClusterID)
			return []op{{Action: "plan_assigned", Actor: "control_plane", Target: ptr(b.ClusterID.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"plan": "dev"}}}
		}},
		{"set_tenant_status", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.set_tenant_status($1, 'grace')`, b.TenantID)
			return []op{{Action: "tenant_status_changed", Actor: "control_plane", Target: ptr(b.TenantID.String()),
				Meta: map[string]any{"status": "grace", "previous": "active"}}}
		}},
		{"set_cluster_status", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.set_cluster_status($1, 'suspended')`, b.ClusterID)
			return []op{{Action: "cluster_status_changed", Actor: "control_plane", Target: ptr(b.ClusterID.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"status": "suspended", "previous": "active"}}}
		}},
		{"issue_api_key", func(p *pxdb, b bootstrapped) []op {
			id := key(p, b.ClusterID, "ci")
			return []op{{Action: "api_key_issued", Actor: "control_plane", Target: ptr(id.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"name": "ci", "scopes": []any{"read"}}}}
		}},
		{"revoke_api_key", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID)
			p.exec(`SELECT queen_proxy.revoke_api_key($1)`, id)
			return []op{{Action: "api_key_revoked", Actor: "control_plane", Target: ptr(id.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"name": "default"}}}
		}},
		{"set_limit_override", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_req_per_sec": 1, "max_queues": null}')`, b.ClusterID)
			return []op{{Action: "limit_override_set", Actor: "control_plane", Target: ptr(b.ClusterID.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"max_req_per_sec": float64(1), "max_queues": nil}}}
		}},
		{"revoke_session", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.revoke_session('jti-1', now() + interval '1 hour', 'user', $1)`, b.UserID)
			p.exec(`SELECT queen_proxy.revoke_session('jti-1', now() + interval '1 hour', 'user', $1)`, b.UserID)
			return []op{{Action: "session_revoked", Actor: "user", ActorID: &b.UserID, Target: ptr("jti-1"), Meta: map[string]any{}}}
		}},
		{"grant_cluster_role", func(p *pxdb, b bootstrapped) []op {
			u := p.uuidOf(`SELECT queen_proxy.create_user($1, 'ops@acme.test', NULL)`, b.TenantID)
			after := p.lastOp()
			p.exec(`SELECT queen_proxy.grant_cluster_role($1, 'OPS@acme.test', 'viewer')`, b.ClusterID)
			require.Len(t, p.opsAfter(after), 1)
			return []op{
				{Action: "user_created", Actor: "control_plane", Target: ptr(u.String()), Meta: map[string]any{"provider": "local"}},
				{Action: "cluster_role_granted", Actor: "control_plane", Target: ptr(u.String()), Cluster: &b.ClusterID,
					Meta: map[string]any{"role": "viewer"}},
			}
		}},
		{"revoke_cluster_role", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.revoke_cluster_role($1, 'admin@acme.test')`, b.ClusterID)
			return []op{{Action: "cluster_role_revoked", Actor: "control_plane", Target: ptr(b.UserID.String()), Cluster: &b.ClusterID,
				Meta: map[string]any{"role": "admin"}}}
		}},
		{"set_operator", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.set_operator('admin@acme.test', true)`)
			p.exec(`SELECT queen_proxy.set_operator('admin@acme.test', true)`)
			p.exec(`SELECT queen_proxy.set_operator('admin@acme.test', false)`)
			target := ptr(b.UserID.String())
			return []op{
				{Action: "operator_granted", Actor: "control_plane", Target: target, Meta: map[string]any{"changed": true}},
				{Action: "operator_granted", Actor: "control_plane", Target: target, Meta: map[string]any{"changed": false}},
				{Action: "operator_revoked", Actor: "control_plane", Target: target, Meta: map[string]any{"changed": true}},
			}
		}},
		{"record_user_login", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.record_user_login($1)`, b.UserID)
			return []op{{Action: "login", Actor: "user", ActorID: &b.UserID, Target: ptr(b.UserID.String()), Meta: map[string]any{}}}
		}},
		{"delete_tenant", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.set_tenant_status($1, 'deleting')`, b.TenantID)
			after := p.lastOp()
			p.exec(`SELECT queen_proxy.delete_tenant($1)`, b.TenantID)
			got := p.opsAfter(after)
			require.Equal(t, []op{{Action: "tenant_erased", Actor: "control_plane", Target: ptr(b.TenantID.String()),
				Meta: map[string]any{"clusters": float64(1), "users": float64(1), "api_keys": float64(1), "forced": false}}}, got)
			return []op{
				{Action: "tenant_status_changed", Actor: "control_plane", Target: ptr(b.TenantID.String()),
					Meta: map[string]any{"status": "deleting", "previous": "active"}},
				got[0],
			}
		}},
		// Support functions write no audit rows.
		{"support functions", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.sweep_revoked_tokens()`)
			p.exec(`SELECT queen_proxy.emit_outbox('cluster_monthly_quota_warning', '{}')`)
			p.exec(`SELECT queen_proxy.rollup_usage_days(current_date)`)
			p.exec(`SELECT queen_proxy.cluster_month_msgs($1, current_date)`, b.ClusterID)
			p.exec(`SELECT queen_proxy.prune_usage_minutes(90)`)
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPXDB(t)
			b := p.bootstrap("acme", "acme-prod", "admin@acme.test", "pw")
			before := p.lastOp()
			want := tt.run(p, b)
			got := p.opsAfter(before)
			if want == nil {
				require.Empty(t, got)
				return
			}
			require.Equal(t, want, got)
		})
	}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
