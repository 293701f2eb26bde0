package migrations_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// The functions behind the console and operator routes write the
// control-plane row of the function they call and the row of the person
// who acted, and nothing when they refuse.
func TestConsoleFunctionsGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// run calls the functions and returns every row written since the
		// fixture, or nil when it checked its rows itself.
		run func(p *pxdb, b bootstrapped) []op
	}{
		{"console_issue_api_key", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT queen_proxy.console_issue_api_key($1, $2, ' ci ', $3, ARRAY['produce'])`, b.ClusterID, b.UserID, hashOf("ci"))
			var createdBy uuid.UUID
			require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT created_by FROM queen_proxy.api_keys WHERE id = $1`, id).Scan(&createdBy))
			require.Equal(t, b.UserID, createdBy)
			meta := map[string]any{"name": "ci", "scopes": []any{"produce"}}
			return []op{
				{Action: "api_key_issued", Actor: "control_plane", Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: meta},
				{Action: "console_api_key_issued", Actor: "user", ActorID: &b.UserID, Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: meta},
			}
		}},
		{"console_revoke_api_key", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, b.ClusterID)
			p.exec(`SELECT queen_proxy.console_revoke_api_key($1, $2, $3)`, b.ClusterID, b.UserID, id)
			meta := map[string]any{"name": "default"}
			return []op{
				{Action: "api_key_revoked", Actor: "control_plane", Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: meta},
				{Action: "console_api_key_revoked", Actor: "user", ActorID: &b.UserID, Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: meta},
			}
		}},
		{"console_grant_role", func(p *pxdb, b bootstrapped) []op {
			u := p.uuidOf(`SELECT queen_proxy.create_user($1, 'dev@acme.test', NULL)`, b.TenantID)
			after := p.lastOp()
			p.exec(`SELECT queen_proxy.console_grant_role($1, $2, 'Dev@Acme.test', 'viewer')`, b.ClusterID, b.UserID)
			p.exec(`SELECT queen_proxy.console_grant_role($1, $2, 'dev@acme.test', 'producer')`, b.ClusterID, b.UserID)
			got := p.opsAfter(after)
			require.Equal(t, []op{
				{Action: "cluster_role_granted", Actor: "control_plane", Target: ptr(u.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "viewer"}},
				{Action: "console_member_granted", Actor: "user", ActorID: &b.UserID, Target: ptr(u.String()), Cluster: &b.ClusterID,
					Meta: map[string]any{"role": "viewer", "previous": nil}},
				{Action: "cluster_role_granted", Actor: "control_plane", Target: ptr(u.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "producer"}},
				{Action: "console_member_granted", Actor: "user", ActorID: &b.UserID, Target: ptr(u.String()), Cluster: &b.ClusterID,
					Meta: map[string]any{"role": "producer", "previous": "viewer"}},
			}, got)
			return append([]op{{Action: "user_created", Actor: "control_plane", Target: ptr(u.String()), Meta: map[string]any{"provider": "local"}}}, got...)
		}},
		{"console_revoke_role", func(p *pxdb, b bootstrapped) []op {
			u := p.uuidOf(`SELECT queen_proxy.create_user($1, 'dev@acme.test', NULL)`, b.TenantID)
			p.exec(`SELECT queen_proxy.grant_cluster_role($1, 'dev@acme.test', 'admin')`, b.ClusterID)
			after := p.lastOp()
			p.exec(`SELECT queen_proxy.console_revoke_role($1, $2, 'admin@acme.test')`, b.ClusterID, u)
			got := p.opsAfter(after)
			require.Equal(t, []op{
				{Action: "cluster_role_revoked", Actor: "control_plane", Target: ptr(b.UserID.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "admin"}},
				{Action: "console_member_revoked", Actor: "user", ActorID: &u, Target: ptr(b.UserID.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "admin"}},
			}, got)
			return nil // checked above: the fixture's own rows are not this case's
		}},
		{"operator_create_user", func(p *pxdb, b bootstrapped) []op {
			id := p.uuidOf(`SELECT queen_proxy.operator_create_user(queen_proxy_cell('cell-1'), $1, $2, 'New@acme.test', NULL, 'New Person', 'consumer')`, b.UserID, b.ClusterID)
			return []op{
				{Action: "user_created", Actor: "control_plane", Target: ptr(id.String()), Meta: map[string]any{"provider": "local"}},
				{Action: "user_renamed", Actor: "control_plane", Target: ptr(id.String()), Meta: map[string]any{}},
				{Action: "cluster_role_granted", Actor: "control_plane", Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "consumer"}},
				{Action: "operator_user_created", Actor: "user", ActorID: &b.UserID, Target: ptr(id.String()), Cluster: &b.ClusterID, Meta: map[string]any{"role": "consumer"}},
			}
		}},
		{"operator_update_user", func(p *pxdb, b bootstrapped) []op {
			p.exec(`SELECT queen_proxy.operator_update_user(queen_proxy_cell('cell-1'), $1, $1, 'Ada', '$2a$10$abcdefghijklmnopqrstuv')`, b.UserID)
			u := ptr(b.UserID.String())
			return []op{
				{Action: "user_renamed", Actor: "control_plane", Target: u, Meta: map[string]any{}},
				{Action: "user_password_set", Actor: "control_plane", Target: u, Meta: map[string]any{"cleared": false}},
				{Action: "operator_user_updated", Actor: "user", ActorID: &b.UserID, Target: u, Meta: map[string]any{"name": true, "password": true}},
			}
		}},
		{"operator_set_role and operator_revoke_role", func(p *pxdb, b bootstrapped) []op {
			u := p.uuidOf(`SELECT queen_proxy.create_user($1, 'dev@acme.test', NULL)`, b.TenantID)
			after := p.lastOp()
			p.exec(`SELECT queen_proxy.operator_set_role(queen_proxy_cell('cell-1'), $1, $2, $3, 'viewer')`, b.UserID, u, b.ClusterID)
			p.exec(`SELECT queen_proxy.operator_revoke_role(queen_proxy_cell('cell-1'), $1, $2, $3)`, b.UserID, u, b.ClusterID)
			target := ptr(u.String())
			require.Equal(t, []op{
				{Action: "cluster_role_granted", Actor: "control_plane", Target: target, Cluster: &b.ClusterID, Meta: map[string]any{"role": "viewer"}},
				{Action: "operator_role_granted", Actor: "user", ActorID: &b.UserID, Target: target, Cluster: &b.ClusterID, Meta: map[string]any{"role": "viewer"}},
				{Action: "cluster_role_revoked", Actor: "control_plane", Target: target, Cluster: &b.ClusterID, Meta: map[string]any{"role": "viewer"}},
				{Action: "operator_role_revoked", Actor: "user", ActorID: &b.UserID, Target: target, Cluster: &b.ClusterID, Meta: map[string]any{"role": "viewer"}},
			}, p.opsAfter(after))
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPXDB(t)
			p.exec(`CREATE FUNCTION queen_proxy_cell(text) RETURNS uuid LANGUAGE sql AS 'SELECT id FROM queen_proxy.cells WHERE slug = $1'`)
			b := p.bootstrap("acme", "acme-prod", "admin@acme.test", "pw")
			before := p.lastOp()
			want := tt.run(p, b)
			if len(want) > 0 {
				require.Equal(t, want, p.opsAfter(before))
			}
		})
	}
}

// Refusals: another cluster's key, the last admin, a user of another tenant
// or another cell. Each is the SQLSTATE the proxy maps to its answer, and
// writes nothing.
func TestConsoleFunctionsRefuse(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.exec(`INSERT INTO queen_proxy.cells (slug, base_url) VALUES ('cell-2', 'http://127.0.0.1:6633')`)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", "pw")
	other := p.bootstrap("globex", "globex-1", "admin@globex.test", "pw")
	far := p.uuidOf(`SELECT queen_proxy.create_cluster($1, 'acme-far', 'free', 'cell-2')`, b.TenantID)
	cell1 := p.uuidOf(`SELECT id FROM queen_proxy.cells WHERE slug = 'cell-1'`)
	otherKey := p.uuidOf(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, other.ClusterID)
	before := p.lastOp()

	code := func(sql string, args ...any) string {
		t.Helper()
		_, err := p.pool.Exec(t.Context(), sql, args...)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", sql, err)
		return pgErr.Code
	}
	require.Equal(t, "P0002", code(`SELECT queen_proxy.console_revoke_api_key($1, $2, $3)`, b.ClusterID, b.UserID, otherKey))
	require.Equal(t, "P0002", code(`SELECT queen_proxy.console_revoke_api_key($1, $2, gen_random_uuid())`, b.ClusterID, b.UserID))
	require.Equal(t, "55000", code(`SELECT queen_proxy.console_grant_role($1, $2, 'admin@acme.test', 'viewer')`, b.ClusterID, b.UserID))
	require.Equal(t, "55000", code(`SELECT queen_proxy.console_revoke_role($1, $2, 'admin@acme.test')`, b.ClusterID, b.UserID))
	require.Equal(t, "P0002", code(`SELECT queen_proxy.console_grant_role($1, $2, 'admin@globex.test', 'viewer')`, b.ClusterID, b.UserID))
	require.Equal(t, "P0002", code(`SELECT queen_proxy.console_grant_role($1, $2, 'nobody@acme.test', 'viewer')`, b.ClusterID, b.UserID))
	require.Equal(t, "22023", code(`SELECT queen_proxy.console_grant_role($1, $2, 'admin@acme.test', 'root')`, b.ClusterID, b.UserID))
	require.Equal(t, "22023", code(`SELECT queen_proxy.console_issue_api_key($1, $2, ' ', $3, ARRAY['read'])`, b.ClusterID, b.UserID, hashOf("x")))
	require.Equal(t, "22023", code(`SELECT queen_proxy.console_issue_api_key($1, $2, 'k', $3, ARRAY['write'])`, b.ClusterID, b.UserID, hashOf("x")))
	require.Equal(t, "P0002", code(`SELECT queen_proxy.operator_create_user($1, $2, $3, 'x@acme.test', NULL, NULL, 'viewer')`, cell1, b.UserID, far))
	require.Equal(t, "P0002", code(`SELECT queen_proxy.operator_set_role($1, $2, $3, $4, 'viewer')`, cell1, b.UserID, other.UserID, b.ClusterID))
	require.Equal(t, "23505", code(`SELECT queen_proxy.operator_create_user($1, $2, $3, 'admin@globex.test', NULL, NULL, 'viewer')`, cell1, b.UserID, b.ClusterID))
	require.Empty(t, p.opsAfter(before), "a refused call writes no audit row")

	var live bool
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT revoked_at IS NULL FROM queen_proxy.api_keys WHERE id = $1`, otherKey).Scan(&live))
	require.True(t, live, "another cluster's key stays live")
}

// The "user:<id>" announcements: set_operator, set_user_name and
// set_user_password, so that every proxy drops the user at once.
func TestUserChangesNotify(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	b := p.bootstrap("acme", "acme-prod", "admin@acme.test", nil)
	conn := p.listen()
	u := "user:" + b.UserID.String()
	for i, sql := range []string{
		`SELECT queen_proxy.set_operator('admin@acme.test', true)`,
		`SELECT queen_proxy.set_user_name($1, 'Ada')`,
		`SELECT queen_proxy.set_user_password($1, NULL)`,
	} {
		var args []any
		if i > 0 {
			args = []any{b.UserID}
		}
		p.exec(sql, args...)
		require.Equal(t, []string{u}, drain(t, p, conn, i), sql)
	}
}
