package proxy

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/reply"
	"github.com/queenforgo/queen/proxy/route"
)

// dashboard serves every path that is not the proxy's own nor the broker's
// API: the broker's web app (web/), fetched from the cluster's cell, so that
// the assets always match that broker's version. Every byte needs a live
// human session (PROXY.md §7.2): without one the browser is sent to the
// login page, and an API key is not enough. The user needs a role on the
// cluster; the app's API calls then go through the gateway with the same
// cookie and are authorised by that role.
func (p *Proxy) dashboard(w http.ResponseWriter, r *http.Request, id, rawPath string) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !route.Clean(rawPath) {
		p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
		return
	}
	cred := p.cfg.Identity.Credential(r, false)
	h, err := p.cfg.Identity.Authenticate(r.Context(), cred.Session)
	switch {
	case errors.Is(err, identity.ErrUnavailable):
		p.denySession(w, err)
		return
	case err != nil:
		toLogin(w, r)
		return
	}
	cl, deferred, ok := p.resolveHost(w, r)
	switch {
	case !ok:
		return
	case deferred:
		p.deny(w, http.StatusMisdirectedRequest, reply.CodeClusterUnknown,
			"this host serves several clusters; open the dashboard on a cluster's own host", false)
		return
	case !cl.static:
		if _, err := p.cfg.Identity.Role(r.Context(), h, cl.ID); err != nil {
			p.denySession(w, err)
			return
		}
		if cl.Status == catalog.StatusSuspended || cl.Status == catalog.StatusDeleting {
			p.deny(w, http.StatusForbidden, reply.CodeClusterSuspended, "cluster suspended", false)
			return
		}
	}
	p.cfg.Forwarder.Forward(w, r, forward.Call{Target: cl.target, RequestID: id, Budget: p.cfg.UpstreamTimeout, Private: true})
}

// toLogin sends the browser to the login page, which sends it back here.
func toLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/auth/login?next="+url.QueryEscape(r.URL.RequestURI()))
	w.WriteHeader(http.StatusFound)
}
