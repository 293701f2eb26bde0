package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/reply"
	"github.com/queenforgo/queen/proxy/route"
)

// serve runs the pipeline and returns the route class, for the metrics.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, id string) string {
	rawPath, ok := requestPath(r)
	if ok && rawPath == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		p.healthz(w)
		return "proxy"
	}
	if ok && rawPath == "/metrics/prometheus" && r.Method == http.MethodGet {
		p.cfg.Metrics.Handler().ServeHTTP(w, r)
		return "proxy"
	}

	// 2. Classify, before anything else is read.
	rt, forwardable := route.Classify(r.Method, rawPath)
	if !ok || !forwardable {
		p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
		return ""
	}
	class := string(rt.Proxy)

	// 3. The cluster, unless the key names it (shared host).
	cl, deferred, ok := p.resolveHost(w, r)
	if !ok {
		return class
	}
	if !deferred && !p.gates(w, cl, rt) {
		return class
	}

	// 4. The credential. Dev-insecure skips it, except on a shared host,
	// where only a key can name the cluster.
	if !p.cfg.DevInsecure || deferred {
		key, ok := p.authenticate(w, r)
		if !ok {
			return class
		}
		switch {
		case deferred:
			cl = p.clusterOf(key.Cluster)
			if !p.gates(w, cl, rt) {
				return class
			}
		case cl.static:
		case key.Cluster.ID != cl.ID:
			p.deny(w, http.StatusForbidden, reply.CodeForbidden, "key/cluster mismatch", false)
			return class
		}
		if !apikey.Permits(key.Scopes, rt.Proxy) {
			p.deny(w, http.StatusForbidden, reply.CodeForbidden, "operation not permitted for this credential", false)
			return class
		}
	}

	// 5. Limits, then 6. forward.
	budget := p.cfg.UpstreamTimeout
	if !cl.static {
		release, longPoll, ok := p.admit(w, r, cl, rt)
		if !ok {
			return class
		}
		if release != nil {
			defer release()
		}
		if longPoll > 0 {
			budget = longPoll
		}
	} else if d := p.longPollBudget(r, rt); d > 0 {
		budget = d
	}
	r = r.WithContext(context.WithValue(r.Context(), classKey{}, class))
	p.cfg.Forwarder.Forward(w, r, cl.target, id, budget)
	return class
}

// requestPath returns the raw path to classify and forward. It must be the
// request target as received: an absolute-form target, or one Go's parser
// re-encoded, is refused.
func requestPath(r *http.Request) (string, bool) {
	raw := r.URL.EscapedPath()
	target := r.RequestURI
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	return raw, target == raw
}

// resolveHost finds the cluster the Host header names. deferred is true on
// a shared host, where the key will name it. A refusal is already written
// when ok is false.
func (p *Proxy) resolveHost(w http.ResponseWriter, r *http.Request) (cl *cluster, deferred, ok bool) {
	if p.devCell != nil {
		return p.devCell, false, true
	}
	host := canonicalHost(r.Host)
	if p.shared[host] {
		return nil, true, true
	}
	slug := firstLabel(host)
	if slug == "" {
		slug = p.cfg.DefaultCluster
	}
	if slug == "" {
		p.deny(w, http.StatusMisdirectedRequest, reply.CodeClusterUnknown, "no cluster for this host", false)
		return nil, false, false
	}
	c, err := p.cfg.Catalog.Cluster(r.Context(), slug)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		p.deny(w, http.StatusMisdirectedRequest, reply.CodeClusterUnknown, "no cluster for this host", false)
		return nil, false, false
	case err != nil:
		p.deny(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable", false)
		return nil, false, false
	}
	return p.clusterOf(c), false, true
}

// firstLabel is the cluster slug a host names: its first DNS label. An IP
// literal names none.
func firstLabel(host string) string {
	if host == "" || net.ParseIP(strings.Trim(host, "[]")) != nil {
		return ""
	}
	label, _, _ := strings.Cut(host, ".")
	return label
}

// clusterOf pairs a catalog cluster with its forwarding target.
func (p *Proxy) clusterOf(c catalog.Cluster) *cluster {
	tenant := ""
	if p.cfg.TenantHeader {
		tenant = tenantOf(c.BrokerTenant)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		// pxdb checks base_url's shape; a URL Go cannot parse is forwarded
		// nowhere: the host is left empty and the transport refuses it (502).
		u = &url.URL{Scheme: "http"}
	}
	return &cluster{Cluster: c, target: forward.Target{BaseURL: u, Secret: c.CellSecret, Tenant: tenant}}
}

// newTarget builds the dev-static target.
func newTarget(baseURL string, token *string, tenant string, tenantHeader bool) (forward.Target, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return forward.Target{}, fmt.Errorf("dev cell URL %q: want http(s)://host[:port]", baseURL)
	}
	if !tenantHeader {
		tenant = ""
	}
	return forward.Target{BaseURL: u, Secret: token, Tenant: tenant}, nil
}

// gates applies the cluster's status and its plan's features (PROXY.md
// §5.1 steps 2 and 3).
func (p *Proxy) gates(w http.ResponseWriter, cl *cluster, rt routes.Route) bool {
	if cl.static {
		return true
	}
	switch cl.Status {
	case catalog.StatusSuspended, catalog.StatusDeleting:
		p.deny(w, http.StatusForbidden, reply.CodeClusterSuspended, "cluster suspended", false)
		return false
	case catalog.StatusPushBlocked:
		if rt.Proxy == routes.ProxyProduce || rt.Proxy == routes.ProxyGatedGrow {
			p.deny(w, http.StatusForbidden, reply.CodePushBlocked, "pushes blocked (billing hold)", false)
			return false
		}
	}
	if rt.Proxy.Gated() && !cl.Features[rt.Feature] {
		p.deny(w, http.StatusForbidden, reply.CodeFeatureGated, "not in your plan", false)
		return false
	}
	return true
}

// authenticate reads the bearer (PROXY.md §3.1) and looks the key up.
func (p *Proxy) authenticate(w http.ResponseWriter, r *http.Request) (catalog.Key, bool) {
	cred := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	switch {
	case cred == "":
		p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "missing bearer credential", false)
		return catalog.Key{}, false
	case !apikey.IsKey(cred):
		// Human sessions are served by part 2 of the proxy.
		p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "unknown credential (use an API key)", false)
		return catalog.Key{}, false
	case r.Header.Get(forward.HeaderActCluster) != "":
		p.deny(w, http.StatusForbidden, reply.CodeForbidden, "an api key cannot act as another cluster", false)
		return catalog.Key{}, false
	case p.cfg.Catalog == nil:
		p.deny(w, http.StatusUnauthorized, reply.CodeUnauthorized, "unknown or revoked api key", false)
		return catalog.Key{}, false
	}
	key, err := p.cfg.Catalog.Key(r.Context(), apikey.Hash(cred))
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

// deny writes a refusal and counts it. shadow refusals are only counted and
// logged; the caller goes on.
func (p *Proxy) deny(w http.ResponseWriter, status int, code, text string, shadow bool) {
	p.cfg.Metrics.Denial(code, shadow)
	if shadow {
		return
	}
	reply.Error(w, status, code, text)
}

// tooMany is the 429 of a rate or slot limit, or its shadow.
func (p *Proxy) tooMany(w http.ResponseWriter, cl *cluster, what string, retry time.Duration) bool {
	if !p.cfg.Enforce {
		p.cfg.Metrics.Denial(reply.CodeRateLimited, true)
		p.cfg.Logger.Info("would_block", "cluster", cl.Slug, "limit", what, "retry_after", retry)
		return true
	}
	p.cfg.Metrics.Denial(reply.CodeRateLimited, false)
	reply.TooMany(w, reply.CodeRateLimited, "rate limited: "+what, retry)
	return false
}
