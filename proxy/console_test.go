package proxy_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// An admin issues a key in the console (shown once), uses it, lists it
// (never shown again), revokes it and sees it refused; each change writes
// the function's row and the admin's own.
func TestConsoleKeys(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	base := startProxy(t, p, withPeople(t, p))
	admin := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	consoleCall := func(method, path string, body any) answer {
		edits := []func(*http.Request){withCookie(admin), withHeader("Content-Type", "application/json")}
		if body == nil {
			return send(t, base, tn.Host, method, path, nil, edits...)
		}
		return send(t, base, tn.Host, method, path, jsonBody(t, body), edits...)
	}

	before := p.lastOp()
	a := consoleCall("POST", "/api/console/keys", map[string]any{"name": "ci", "scopes": []string{"read", "produce"}})
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	key := a.json(t)["key"].(string)
	id := a.json(t)["id"].(string)
	require.Regexp(t, regexp.MustCompile(`^qk_live_[A-Za-z0-9_-]{43}$`), key)
	meta := map[string]any{"name": "ci", "scopes": []any{"read", "produce"}}
	require.Equal(t, []op{
		{Action: "api_key_issued", Actor: "control_plane", Target: &id, Meta: meta},
		{Action: "console_api_key_issued", Actor: "user", ActorID: &tn.Admin, Target: &id, Meta: meta},
	}, p.opsAfter(before))

	require.Equal(t, http.StatusCreated, call(t, base, tn.Host, "POST", "/api/v1/push", key, push("q", 2)).status)
	list := consoleCall("GET", "/api/console/keys", nil)
	require.Equal(t, http.StatusOK, list.status)
	require.NotContains(t, string(list.body), key, "the plaintext is shown once")
	require.Contains(t, string(list.body), id)

	before = p.lastOp()
	require.Equal(t, http.StatusOK, consoleCall("DELETE", "/api/console/keys/"+id, nil).status)
	require.Equal(t, []op{
		{Action: "api_key_revoked", Actor: "control_plane", Target: &id, Meta: map[string]any{"name": "ci"}},
		{Action: "console_api_key_revoked", Actor: "user", ActorID: &tn.Admin, Target: &id, Meta: map[string]any{"name": "ci"}},
	}, p.opsAfter(before))
	require.Eventually(t, func() bool {
		return call(t, base, tn.Host, "GET", "/api/v1/resources/queues", key, nil).status == http.StatusUnauthorized
	}, test5s, test10ms)
	refused(t, consoleCall("DELETE", "/api/console/keys/"+id, nil), http.StatusNotFound, "not_found")

	for _, bad := range []map[string]any{{"name": "", "scopes": []string{"read"}}, {"name": "x", "scopes": []string{}},
		{"name": "x", "scopes": []string{"write"}}, {"name": "x", "scopes": []string{"read"}, "extra": 1}} {
		before = p.lastOp()
		refused(t, consoleCall("POST", "/api/console/keys", bad), http.StatusBadRequest, "invalid_request")
		require.Empty(t, p.opsAfter(before))
	}
}

// The console's gates: an API key is refused, a viewer sees the overview
// but not the keys or members, another cluster's key id is 404 and stays
// live.
func TestConsoleGates(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	other := p.bootstrap("globex")
	p.user(tn, "viewer@acme.test", "viewer")
	base := startProxy(t, p, withPeople(t, p))

	a := call(t, base, tn.Host, "GET", "/api/console/overview", tn.Key, nil)
	refused(t, a, http.StatusForbidden, "forbidden")
	require.Contains(t, string(a.body), "api keys cannot access the console")
	refused(t, send(t, base, tn.Host, "GET", "/api/console/overview", nil), http.StatusUnauthorized, "unauthorized")
	refused(t, send(t, base, "nope.proxy.test", "GET", "/api/console/overview", nil), http.StatusMisdirectedRequest, "cluster_unknown")

	viewer := login(t, base, tn.Host, "viewer@acme.test", "pw")
	ov := send(t, base, tn.Host, "GET", "/api/console/overview", nil, withCookie(viewer))
	require.Equal(t, http.StatusOK, ov.status, string(ov.body))
	require.Equal(t, "viewer", ov.json(t)["role"])
	for _, path := range []string{"/api/console/keys", "/api/console/members"} {
		refused(t, send(t, base, tn.Host, "GET", path, nil, withCookie(viewer)), http.StatusForbidden, "forbidden")
	}
	refused(t, send(t, base, tn.Host, "POST", "/api/console/keys", jsonBody(t, map[string]any{"name": "x", "scopes": []string{"read"}}),
		withCookie(viewer)), http.StatusForbidden, "forbidden")

	// Signed in on acme, an admin of globex is nobody on acme.
	globexAdmin := login(t, base, other.Host, "admin@globex.test", "pw-globex")
	refused(t, send(t, base, tn.Host, "GET", "/api/console/overview", nil, withCookie(globexAdmin)), http.StatusForbidden, "forbidden")

	admin := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	otherKey := p.id(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, other.Cluster)
	before := p.lastOp()
	for _, id := range []string{otherKey.String(), uuid.NewString(), "not-a-uuid"} {
		refused(t, send(t, base, tn.Host, "DELETE", "/api/console/keys/"+id, nil, withCookie(admin)), http.StatusNotFound, "not_found")
	}
	require.Empty(t, p.opsAfter(before))
	require.Equal(t, http.StatusOK, call(t, base, other.Host, "GET", "/api/v1/resources/queues", other.Key, nil).status,
		"another cluster's key stays live")

	// A suspended cluster's console is closed.
	p.exec(`SELECT queen_proxy.set_cluster_status($1, 'suspended')`, tn.Cluster)
	require.Eventually(t, func() bool {
		return send(t, base, tn.Host, "GET", "/api/console/overview", nil, withCookie(admin)).status == http.StatusForbidden
	}, test5s, test10ms)
	refused(t, send(t, base, tn.Host, "GET", "/api/console/overview", nil, withCookie(admin)), http.StatusForbidden, "cluster_suspended")

	page := send(t, base, tn.Host, "GET", "/console", nil)
	require.Equal(t, http.StatusOK, page.status, "the page itself is static, with no gate")
	require.Contains(t, page.header.Get("Content-Type"), "text/html")
	js := send(t, base, tn.Host, "GET", "/console/assets/console.js", nil)
	require.Equal(t, http.StatusOK, js.status)
	require.Contains(t, js.header.Get("Content-Type"), "javascript")
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/console/assets/vendor/uPlot.esm.js", nil).status)
	require.Equal(t, http.StatusNotFound, send(t, base, tn.Host, "GET", "/console/assets/../console.go", nil).status)
}

// Members: grant and change a role, the last-admin guard, another tenant's
// user, removal; each change writes its rows.
func TestConsoleMembers(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.cell("cell-1", "http://127.0.0.1:1", nil)
	tn := p.bootstrap("acme")
	p.bootstrap("globex")
	dev := p.user(tn, "dev@acme.test", "")
	base := startProxy(t, p, withPeople(t, p))
	admin := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	members := func(method string, body any) answer {
		return send(t, base, tn.Host, method, "/api/console/members", jsonBody(t, body), withCookie(admin),
			withHeader("Content-Type", "application/json"))
	}
	target := ptr(dev.String())

	before := p.lastOp()
	require.Equal(t, http.StatusOK, members("POST", map[string]any{"email": "Dev@acme.test", "role": "viewer"}).status)
	require.Equal(t, []op{
		{Action: "cluster_role_granted", Actor: "control_plane", Target: target, Meta: map[string]any{"role": "viewer"}},
		{Action: "console_member_granted", Actor: "user", ActorID: &tn.Admin, Target: target, Meta: map[string]any{"role": "viewer", "previous": nil}},
	}, p.opsAfter(before))

	before = p.lastOp()
	refused(t, members("POST", map[string]any{"email": "admin@acme.test", "role": "viewer"}), http.StatusBadRequest, "invalid_request")
	refused(t, members("DELETE", map[string]any{"email": "admin@acme.test"}), http.StatusBadRequest, "invalid_request")
	refused(t, members("POST", map[string]any{"email": "admin@globex.test", "role": "viewer"}), http.StatusNotFound, "not_found")
	refused(t, members("POST", map[string]any{"email": "nobody@acme.test", "role": "viewer"}), http.StatusNotFound, "not_found")
	refused(t, members("POST", map[string]any{"email": "dev@acme.test", "role": "owner"}), http.StatusBadRequest, "invalid_request")
	require.Empty(t, p.opsAfter(before), "refusals write nothing")

	list := send(t, base, tn.Host, "GET", "/api/console/members", nil, withCookie(admin))
	require.Equal(t, http.StatusOK, list.status)
	require.Len(t, list.json(t)["members"], 2)

	before = p.lastOp()
	require.Equal(t, http.StatusOK, members("DELETE", map[string]any{"email": "dev@acme.test"}).status)
	require.Equal(t, []op{
		{Action: "cluster_role_revoked", Actor: "control_plane", Target: target, Meta: map[string]any{"role": "viewer"}},
		{Action: "console_member_revoked", Actor: "user", ActorID: &tn.Admin, Target: target, Meta: map[string]any{"role": "viewer"}},
	}, p.opsAfter(before))
	refused(t, members("DELETE", map[string]any{"email": "dev@acme.test"}), http.StatusNotFound, "not_found")
}

// The operator API: a 404 for all but a live operator; scoped to the
// operator's cell; it can create, rename and grant, never make an operator.
func TestOperatorRoutes(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.cell("cell-1", "http://127.0.0.1:1", nil)
	p.cell("cell-2", "http://127.0.0.1:2", nil)
	tn := p.bootstrap("acme")
	far := p.id(`SELECT queen_proxy.create_cluster($1, 'acme-far', 'free', 'cell-2')`, tn.ID)
	p.user(tn, "ops@acme.test", "viewer")
	base := startProxy(t, p, withPeople(t, p))
	ops := login(t, base, tn.Host, "ops@acme.test", "pw")
	opCall := func(method, path string, body any) answer {
		edits := []func(*http.Request){withCookie(ops), withHeader("Content-Type", "application/json")}
		if body == nil {
			return send(t, base, tn.Host, method, path, nil, edits...)
		}
		return send(t, base, tn.Host, method, path, jsonBody(t, body), edits...)
	}
	refused(t, opCall("GET", "/api/operator/users", nil), http.StatusNotFound, "route_blocked")
	refused(t, call(t, base, tn.Host, "GET", "/api/operator/users", tn.Key, nil), http.StatusNotFound, "route_blocked")

	p.exec(`SELECT queen_proxy.set_operator('ops@acme.test', true)`)
	require.Eventually(t, func() bool { return opCall("GET", "/api/operator/users", nil).status == http.StatusOK }, test5s, test10ms)
	require.Len(t, opCall("GET", "/api/operator/users", nil).json(t)["users"], 2)

	before := p.lastOp()
	a := opCall("POST", "/api/operator/users", map[string]any{"email": "new@acme.test", "password": "long-enough", "name": "New",
		"cluster_id": tn.Cluster, "role": "consumer"})
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	id := a.json(t)["id"].(string)
	opsUser := p.id(`SELECT id FROM queen_proxy.users WHERE email = 'ops@acme.test'`)
	var actions []string
	for _, o := range p.opsAfter(before) {
		actions = append(actions, o.Action)
	}
	require.Equal(t, []string{"user_created", "user_renamed", "cluster_role_granted", "operator_user_created"}, actions)
	require.Equal(t, &opsUser, p.opsAfter(before)[3].ActorID)
	require.Equal(t, http.StatusSeeOther, postLogin(t, base, tn.Host, "new@acme.test", "long-enough", "/").status, "the new user can sign in")

	before = p.lastOp()
	require.Equal(t, http.StatusOK, opCall("PATCH", "/api/operator/users/"+id, map[string]any{"name": "Renamed"}).status)
	require.Equal(t, http.StatusOK, opCall("PUT", "/api/operator/users/"+id+"/roles/"+tn.Cluster.String(), map[string]any{"role": "producer"}).status)
	require.Equal(t, http.StatusOK, opCall("DELETE", "/api/operator/users/"+id+"/roles/"+tn.Cluster.String(), nil).status)
	actions = nil
	for _, o := range p.opsAfter(before) {
		actions = append(actions, o.Action)
	}
	require.Equal(t, []string{"user_renamed", "operator_user_updated", "cluster_role_granted", "operator_role_granted",
		"cluster_role_revoked", "operator_role_revoked"}, actions)

	before = p.lastOp()
	refused(t, opCall("PATCH", "/api/operator/users/"+id, map[string]any{"is_operator": true}), http.StatusBadRequest, "invalid_request")
	refused(t, opCall("PUT", "/api/operator/users/"+id+"/roles/"+far.String(), map[string]any{"role": "viewer"}), http.StatusNotFound, "not_found")
	refused(t, opCall("POST", "/api/operator/users", map[string]any{"email": "x@acme.test", "cluster_id": far, "role": "viewer"}),
		http.StatusNotFound, "not_found")
	refused(t, opCall("POST", "/api/operator/users", map[string]any{"email": "y@acme.test", "password": "short", "cluster_id": tn.Cluster, "role": "viewer"}),
		http.StatusBadRequest, "invalid_request")
	require.Empty(t, p.opsAfter(before))
	var isOp bool
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT is_operator FROM queen_proxy.users WHERE id = $1`, id).Scan(&isOp))
	require.False(t, isOp)
}

// set_operator has no HTTP path: no query the proxy runs calls it or writes
// is_operator.
func TestNoHTTPPathToSetOperator(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../sql/proxy/queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	write := regexp.MustCompile(`(?i)set_operator|is_operator\s*=|UPDATE\s+queen_proxy\.users`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, stmt := range strings.Split(string(raw), "-- name:") {
			require.False(t, write.MatchString(stmt), "%s: %s", f, stmt)
		}
	}
}
