package proxy

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/console"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/reply"
)

// consolePage serves the console's static page (no gate: its API is
// gated).
func (p *Proxy) consolePage(w http.ResponseWriter, r *http.Request) {
	if p.cfg.Console == nil {
		reply.Error(w, http.StatusServiceUnavailable, reply.CodeNotConfigured, "the console needs pxdb")
		return
	}
	p.cfg.Console.ServePage(w, r)
}

// consoleAPI gates /api/console/* and /api/operator/* (PROXY.md §6.2), in
// order: the cluster the Host names (or, on a shared host only,
// x-queen-act-cluster), pxdb, a live human session (an API key is refused),
// the cluster's status, and a role on the cluster. The operator routes are
// one 404 for everyone but a live operator on a proxy with operators
// enabled.
func (p *Proxy) consoleAPI(w http.ResponseWriter, r *http.Request, rawPath string) {
	operator := strings.HasPrefix(rawPath, "/api/operator/")
	if operator && !p.cfg.Identity.OperatorEnabled() {
		reply.RouteBlocked(w)
		return
	}
	// deny hides every refusal of an operator route behind the same 404.
	deny := func(status int, code, text string) {
		if operator {
			reply.RouteBlocked(w)
			return
		}
		p.deny(w, status, code, text, false)
	}
	if p.cfg.Console == nil || p.cfg.Catalog == nil || p.devCell != nil {
		deny(http.StatusServiceUnavailable, reply.CodeNotConfigured, "the console needs pxdb routing")
		return
	}
	cl, deferred, f := p.lookupHost(r)
	if f != nil {
		deny(f.status, f.code, f.text)
		return
	}
	cred := p.cfg.Identity.Credential(r, true)
	switch {
	case cred.APIKey != "":
		deny(http.StatusForbidden, reply.CodeForbidden, "api keys cannot access the console (human session required)")
		return
	case cred.Session == "":
		deny(http.StatusUnauthorized, reply.CodeUnauthorized, "missing bearer credential")
		return
	}
	h, err := p.cfg.Identity.Authenticate(r.Context(), cred.Session)
	if err != nil {
		deny(identity.Status(err), codeOf(err), err.Error())
		return
	}
	if deferred {
		act := strings.TrimSpace(r.Header.Get(forward.HeaderActCluster))
		if act == "" {
			deny(http.StatusForbidden, reply.CodeForbidden, "this host serves several clusters; name one with x-queen-act-cluster")
			return
		}
		if cl = p.actCluster(w, r.Context(), h, act); cl == nil {
			return
		}
	}
	if cl.Status == catalog.StatusSuspended || cl.Status == catalog.StatusDeleting {
		deny(http.StatusForbidden, reply.CodeClusterSuspended, "cluster suspended")
		return
	}
	role, err := p.cfg.Identity.Role(r.Context(), h, cl.ID)
	if err != nil {
		deny(identity.Status(err), codeOf(err), err.Error())
		return
	}
	req := console.Request{Cluster: cl.Cluster, User: h.User, Role: role, Operator: h.Operator}
	if operator {
		if !h.Operator {
			reply.RouteBlocked(w)
			return
		}
		p.cfg.Console.ServeOperator(w, r, req)
		return
	}
	p.cfg.Console.ServeAPI(w, r, req)
}

func codeOf(err error) string {
	switch identity.Status(err) {
	case http.StatusForbidden:
		return reply.CodeForbidden
	case http.StatusServiceUnavailable:
		return reply.CodeUnavailable
	}
	return reply.CodeUnauthorized
}

// identityView is the answer of /auth/me (PROXY.md §3.3), with what the
// broker's dashboard reads from its own /auth/me: sub, role, access and
// auth.
type identityView struct {
	UserID           string          `json:"user_id"`
	Sub              string          `json:"sub"`
	Email            string          `json:"email"`
	Name             *string         `json:"name"`
	TenantSlug       string          `json:"tenant_slug"`
	IsOperator       bool            `json:"is_operator"`
	OperatorEnabled  bool            `json:"operator_enabled"`
	OperatorLive     bool            `json:"operator_live"`
	ActingCluster    *clusterRef     `json:"acting_cluster"`
	Clusters         []clusterView   `json:"clusters"`
	ActClusterHeader string          `json:"act_cluster_header"`
	Role             string          `json:"role"` // "none" without a role on the acting cluster
	Cluster          *string         `json:"cluster"`
	Auth             string          `json:"auth"`
	Roles            []string        `json:"roles"`
	Access           []string        `json:"access"`
	Session          sessionValidity `json:"session"`
}

type clusterRef struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
}

type clusterView struct {
	ID         string `json:"id"`
	Slug       string `json:"slug"`
	Role       string `json:"role"`
	TenantSlug string `json:"tenant_slug"`
	TenantID   string `json:"tenant_id"`
	Status     string `json:"status"`
	CellSlug   string `json:"cell_slug"`
}

type sessionValidity struct {
	ExpiresAt string `json:"expires_at"`
}

// me answers who the session cookie's user is, which clusters it may act
// on, and its role on the cluster this request is for.
func (p *Proxy) me(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		reply.RouteBlocked(w)
		return
	}
	h, err := p.cfg.Identity.Authenticate(r.Context(), p.cfg.Identity.Credential(r, false).Session)
	if err != nil {
		p.denySession(w, err)
		return
	}
	v := identityView{
		UserID: h.User.ID.String(), Sub: h.User.ID.String(), Email: h.User.Email, Name: h.User.Name,
		TenantSlug: h.User.TenantSlug, IsOperator: h.User.IsOperator, OperatorEnabled: p.cfg.Identity.OperatorEnabled(),
		OperatorLive: h.Operator, Clusters: []clusterView{}, ActClusterHeader: strings.ToLower(forward.HeaderActCluster),
		Role: "none", Auth: "session", Roles: []string{}, Access: []string{},
		Session: sessionValidity{ExpiresAt: h.Claims.Expires.UTC().Format("2006-01-02T15:04:05Z")},
	}
	members, err := p.cfg.Catalog.Memberships(r.Context(), h.User.ID, h.Operator)
	if err != nil {
		p.deny(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable", false)
		return
	}
	for _, m := range members {
		v.Clusters = append(v.Clusters, clusterView{ID: m.ID.String(), Slug: m.Slug, Role: m.Role, TenantSlug: m.TenantSlug,
			TenantID: m.TenantID.String(), Status: string(m.Status), CellSlug: m.CellSlug})
	}
	if cl, deferred, f := p.lookupHost(r); f == nil && !deferred && !cl.static {
		v.ActingCluster = &clusterRef{ID: cl.ID.String(), Slug: cl.Slug}
		id := cl.ID.String()
		v.Cluster = &id
		if role, err := p.cfg.Identity.Role(r.Context(), h, cl.ID); err == nil {
			v.Role = role
			v.Roles = []string{role}
			v.Access = identity.Access(role)
		}
	}
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}
