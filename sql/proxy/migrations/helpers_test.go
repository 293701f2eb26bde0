package migrations_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// proxySet is the proxy's migration set, as cmd/queen-proxy applies it.
var proxySet = migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}

// newPXDB returns a pool on a fresh database with the proxy's migrations
// applied, and one active cell, "cell-1".
func newPXDB(t *testing.T) *pxdb {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplySet(ctx, pool, proxySet, nil))
	_, err = pool.Exec(ctx, `INSERT INTO queen_proxy.cells (slug, base_url) VALUES ('cell-1', 'http://127.0.0.1:6632')`)
	require.NoError(t, err)
	return &pxdb{t: t, pool: pool}
}

type pxdb struct {
	t    *testing.T
	pool *pgxpool.Pool
}

// exec runs one statement and fails the test on error.
func (p *pxdb) exec(sql string, args ...any) {
	p.t.Helper()
	_, err := p.pool.Exec(p.t.Context(), sql, args...)
	require.NoError(p.t, err, sql)
}

// uuidOf runs a query returning one uuid.
func (p *pxdb) uuidOf(sql string, args ...any) uuid.UUID {
	p.t.Helper()
	var id uuid.UUID
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(), sql, args...).Scan(&id), sql)
	return id
}

// fails runs a statement that must fail and returns its error text.
func (p *pxdb) fails(sql string, args ...any) string {
	p.t.Helper()
	_, err := p.pool.Exec(p.t.Context(), sql, args...)
	require.Error(p.t, err, sql)
	return err.Error()
}

// bootstrapped is the result of bootstrap_tenant.
type bootstrapped struct {
	TenantID    uuid.UUID `json:"tenant_id"`
	ClusterID   uuid.UUID `json:"cluster_id"`
	UserID      uuid.UUID `json:"user_id"`
	APIKey      *string   `json:"api_key"`
	PasswordSet bool      `json:"password_set"`
	CanLogin    bool      `json:"can_login"`
}

func (p *pxdb) bootstrap(tenant, cluster, email string, password any) bootstrapped {
	p.t.Helper()
	var raw []byte
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(),
		`SELECT queen_proxy.bootstrap_tenant($1, $2, $3, 'pro', 'cell-1', $4, $5)`,
		tenant, tenant+" Inc", cluster, email, password).Scan(&raw))
	var b bootstrapped
	require.NoError(p.t, json.Unmarshal(raw, &b))
	return b
}

// op is one audit row, as the golden tests compare them.
type op struct {
	Action  string
	Actor   string
	ActorID *uuid.UUID
	Target  *string
	Cluster *uuid.UUID
	Meta    map[string]any
}

// lastOp returns the id of the newest audit row (0 when there is none).
func (p *pxdb) lastOp() int64 {
	p.t.Helper()
	var id int64
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(),
		`SELECT coalesce(max(id), 0) FROM queen_proxy.operations`).Scan(&id))
	return id
}

// opsAfter returns the audit rows written after id, in order.
func (p *pxdb) opsAfter(id int64) []op {
	p.t.Helper()
	rows, err := p.pool.Query(p.t.Context(),
		`SELECT action, actor, actor_id, target, cluster_id, meta FROM queen_proxy.operations WHERE id > $1 ORDER BY id`, id)
	require.NoError(p.t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (op, error) {
		var o op
		err := r.Scan(&o.Action, &o.Actor, &o.ActorID, &o.Target, &o.Cluster, &o.Meta)
		return o, err
	})
	require.NoError(p.t, err)
	return out
}

// listen opens a dedicated connection listening on queen_proxy_inval.
func (p *pxdb) listen() *pgx.Conn {
	p.t.Helper()
	conn, err := pgx.Connect(p.t.Context(), p.pool.Config().ConnConfig.ConnString())
	require.NoError(p.t, err)
	p.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(p.t.Context(), "LISTEN queen_proxy_inval")
	require.NoError(p.t, err)
	return conn
}

func ptr[T any](v T) *T { return &v }
