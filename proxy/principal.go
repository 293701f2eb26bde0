package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/reply"
)

// authorize reads the credential of a gateway request (PROXY.md §3.1) and
// decides whether it may reach rt on a cluster: an API key's cluster and
// scopes, or a session's role on the cluster (admin for a live operator).
// cl is the Host's cluster, nil when deferred (a shared host) or when act
// (x-queen-act-cluster) names it. It returns the cluster to forward to, or
// nil once a refusal is written.
func (p *Proxy) authorize(w http.ResponseWriter, r *http.Request, rt routes.Route, cl *cluster, deferred bool, act string) *cluster {
	cred := p.cfg.Identity.Credential(r, true)
	switch {
	case cred.APIKey != "":
		return p.authorizeKey(w, r, rt, cl, deferred, act, cred.APIKey)
	case cred.Session != "":
		return p.authorizeSession(w, r, rt, cl, deferred, act, cred.Session)
	}
	p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "missing bearer credential", false)
	return nil
}

func (p *Proxy) authorizeKey(w http.ResponseWriter, r *http.Request, rt routes.Route, cl *cluster, deferred bool, act, raw string) *cluster {
	if act != "" {
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "an api key cannot act as another cluster", false)
		return nil
	}
	key, ok := p.lookupKey(w, r.Context(), raw)
	if !ok {
		return nil
	}
	switch {
	case deferred:
		cl = p.clusterOf(key.Cluster)
		if !p.gates(w, cl, rt) {
			return nil
		}
	case cl.static:
	case key.Cluster.ID != cl.ID:
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "key/cluster mismatch", false)
		return nil
	}
	switch {
	case rt.Proxy == routes.ProxyOperator:
		// A key is never an operator, and learns nothing about the route.
		p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
		return nil
	case !apikey.Permits(key.Scopes, rt.Proxy):
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "operation not permitted for this credential", false)
		return nil
	}
	return cl
}

// lookupKey finds a live API key.
func (p *Proxy) lookupKey(w http.ResponseWriter, ctx context.Context, raw string) (catalog.Key, bool) {
	if p.cfg.Catalog == nil {
		p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "unknown or revoked api key", false)
		return catalog.Key{}, false
	}
	key, err := p.cfg.Catalog.Key(ctx, apikey.Hash(raw))
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "unknown or revoked api key", false)
		return catalog.Key{}, false
	case err != nil:
		p.deny(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable", false)
		return catalog.Key{}, false
	}
	return key, true
}

func (p *Proxy) authorizeSession(w http.ResponseWriter, r *http.Request, rt routes.Route, cl *cluster, deferred bool, act, raw string) *cluster {
	h, err := p.cfg.Identity.Authenticate(r.Context(), raw)
	if err != nil {
		p.denySession(w, err)
		return nil
	}
	switch {
	case act != "":
		if cl = p.actCluster(w, r.Context(), h, act); cl == nil {
			return nil
		}
		if !p.gates(w, cl, rt) {
			return nil
		}
	case deferred:
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "this host serves several clusters; name one with x-queen-act-cluster", false)
		return nil
	case cl.static:
		// Dev-static has no cluster to hold a role on.
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "sessions need pxdb routing; dev-static accepts API keys only", false)
		return nil
	}
	role, err := p.cfg.Identity.Role(r.Context(), h, cl.ID)
	switch {
	case err != nil:
		p.denySession(w, err)
		return nil
	case rt.Proxy == routes.ProxyOperator && !h.Operator:
		p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
		return nil
	case rt.Proxy != routes.ProxyOperator && !identity.Permits(role, rt.Proxy):
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "operation not permitted for this credential", false)
		return nil
	}
	return cl
}

// actCluster resolves x-queen-act-cluster (a slug or an id) for a session.
// An unknown cluster and one the user has no role on are the same answer,
// so the header cannot be used to find clusters.
func (p *Proxy) actCluster(w http.ResponseWriter, ctx context.Context, h identity.Human, act string) *cluster {
	unknown := func() *cluster {
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "no such cluster, or no role on it", false)
		return nil
	}
	if p.cfg.Catalog == nil {
		return unknown()
	}
	var c catalog.Cluster
	var err error
	if id, perr := uuid.Parse(act); perr == nil && len(act) == 36 {
		c, err = p.cfg.Catalog.ClusterByID(ctx, id)
	} else {
		c, err = p.cfg.Catalog.Cluster(ctx, act)
	}
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return unknown()
	case err != nil:
		p.deny(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable", false)
		return nil
	}
	if _, err := p.cfg.Identity.Role(ctx, h, c.ID); errors.Is(err, identity.ErrNoRole) || errors.Is(err, identity.ErrWrongCluster) {
		return unknown()
	}
	return p.clusterOf(c)
}

// denySession answers a refused session or role.
func (p *Proxy) denySession(w http.ResponseWriter, err error) {
	status := identity.Status(err)
	code := reply.CodeUnauthorized
	switch status {
	case http.StatusForbidden:
		code = reply.CodeForbidden
	case http.StatusServiceUnavailable:
		code = reply.CodeUnavailable
	}
	p.deny(w, status, code, err.Error(), false)
}
