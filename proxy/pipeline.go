package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/reply"
	"github.com/queenforgo/queen/proxy/route"
	"github.com/queenforgo/queen/proxy/usage"
)

// serve dispatches a request and returns its class, for the metrics: the
// route class of a gateway request, or what served it.
func (p *Proxy) serve(w *recorder, r *http.Request, id string) string {
	rawPath, ok := requestPath(r)
	switch {
	case !ok:
		p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
		return ""
	case rawPath == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		p.healthz(w)
		return "proxy"
	case rawPath == "/metrics/prometheus" && r.Method == http.MethodGet:
		p.cfg.Metrics.Handler().ServeHTTP(w, r)
		return "proxy"
	case !p.sameOrigin(w, r):
		return "csrf"
	case rawPath == "/auth/me":
		p.me(w, r)
		return "session"
	case strings.HasPrefix(rawPath, "/auth/") || rawPath == "/.well-known/jwks.json":
		p.cfg.Identity.ServeHTTP(w, r)
		return "session"
	case rawPath == "/console" || strings.HasPrefix(rawPath, "/console/"):
		p.consolePage(w, r)
		return "console"
	case strings.HasPrefix(rawPath, "/api/console/") || strings.HasPrefix(rawPath, "/api/operator/"):
		p.consoleAPI(w, r, rawPath)
		return "console"
	case upstream(rawPath):
		return p.gateway(w, r, id, rawPath)
	}
	p.dashboard(w, r, id, rawPath)
	return "dashboard"
}

// upstream reports whether a path belongs to the broker's API (PROXY.md
// §4.2); every other path is the dashboard's.
func upstream(rawPath string) bool {
	for _, prefix := range []string{"/api/", "/streams/", "/internal/"} {
		if strings.HasPrefix(rawPath, prefix) {
			return true
		}
	}
	switch rawPath {
	case "/health", "/status", "/metrics", "/api", "/streams", "/internal":
		return true
	}
	return false
}

// gateway runs the pipeline of a broker route and returns its class.
func (p *Proxy) gateway(w *recorder, r *http.Request, id, rawPath string) string {
	// Classify, before anything else is read. An operator route exists only
	// where operators are enabled, and then only for a live operator.
	rt, forwardable := route.Classify(r.Method, rawPath)
	if !forwardable {
		op, isOp := route.Operator(r.Method, rawPath)
		if !isOp || !p.cfg.Identity.OperatorEnabled() {
			p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
			return ""
		}
		rt = op
	}
	class := string(rt.Proxy)

	// The cluster, unless the credential names it (a key on a shared host,
	// x-queen-act-cluster with a session).
	act := strings.TrimSpace(r.Header.Get(forward.HeaderActCluster))
	if p.devCell != nil {
		act = "" // dev-static has one upstream: there is no other cluster to act as
	}
	var cl *cluster
	deferred := false
	if act == "" {
		var ok bool
		if cl, deferred, ok = p.resolveHost(w, r); !ok {
			return class
		}
		if !deferred && !p.gates(w, cl, rt) {
			return class
		}
	}

	// The credential. Dev-insecure skips it, except on a shared host, where
	// only a key can name the cluster, and with an act-as header, which the
	// dev-insecure principal (a key) may not send.
	if p.cfg.DevInsecure && !deferred && act == "" {
		if rt.Proxy == routes.ProxyOperator {
			p.deny(w, http.StatusNotFound, reply.CodeRouteBlocked, "not available", false)
			return class
		}
	} else if cl = p.authorize(w, r, rt, cl, deferred, act); cl == nil {
		return class
	}

	// Limits, forward, meter.
	budget := p.cfg.UpstreamTimeout
	msgs := int64(0)
	undo := func() {}
	if !cl.static {
		a, ok := p.admit(w, r, cl, rt)
		if !ok {
			return class
		}
		if a.release != nil {
			defer a.release()
		}
		if a.budget > 0 {
			budget = a.budget
		}
		msgs = int64(a.pushed)
		undo = a.undo
	} else if d := p.longPollBudget(r, rt); d > 0 {
		budget = d
	}
	call := forward.Call{Target: cl.target, RequestID: id, Budget: budget}
	var delivered int64
	if rt.Proxy == routes.ProxyConsume && r.Method == http.MethodGet && p.cfg.Meter != nil {
		call.Delivered = &delivered
	}
	in := &countingBody{ReadCloser: r.Body}
	r.Body = in
	before := w.bytes
	r = r.WithContext(context.WithValue(r.Context(), classKey{}, class))
	p.cfg.Forwarder.Forward(w, r, call)
	if w.status < 200 || w.status > 299 {
		undo() // the broker created no queue or partition for it
	} else if !cl.static {
		p.forgetDeleted(cl, rt, r, rawPath)
	}
	if p.cfg.Meter != nil && !cl.static {
		if w.status < 200 || w.status > 299 {
			msgs, delivered = 0, 0 // refused or failed work is not billed
		}
		p.cfg.Meter.Add(cl.ID, usage.ClassOf(rt.Proxy, rt.OperationID),
			usage.Counts{Msgs: msgs + delivered, Reqs: 1, BytesIn: in.n, BytesOut: w.bytes - before})
	}
	return class
}

// countingBody counts the request bytes read, for the meter.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n += int64(n)
	return n, err
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
// a shared host, where the credential will name it. A refusal is already
// written when ok is false.
func (p *Proxy) resolveHost(w http.ResponseWriter, r *http.Request) (cl *cluster, deferred, ok bool) {
	cl, deferred, f := p.lookupHost(r)
	if f != nil {
		p.deny(w, f.status, f.code, f.text, false)
		return nil, false, false
	}
	return cl, deferred, true
}

// failure is a refusal not written yet.
type failure struct {
	status     int
	code, text string
}

// lookupHost is resolveHost without the answer.
func (p *Proxy) lookupHost(r *http.Request) (cl *cluster, deferred bool, f *failure) {
	if p.devCell != nil {
		return p.devCell, false, nil
	}
	host := canonicalHost(r.Host)
	if p.shared[host] {
		return nil, true, nil
	}
	slug := firstLabel(host)
	if slug == "" {
		slug = p.cfg.DefaultCluster
	}
	unknown := &failure{http.StatusMisdirectedRequest, reply.CodeClusterUnknown, "no cluster for this host"}
	if slug == "" || p.cfg.Catalog == nil {
		return nil, false, unknown
	}
	c, err := p.cfg.Catalog.Cluster(r.Context(), slug)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil, false, unknown
	case err != nil:
		return nil, false, &failure{http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable"}
	}
	return p.clusterOf(c), false, nil
}

// firstLabel is the cluster slug a host names: its first DNS label. An IP
// literal names none, and neither does a bare "localhost": a client on the
// proxy's own machine (the official clients' default URLs) reaches the
// default cluster, while acme.localhost still names acme.
func firstLabel(host string) string {
	if host == "" || host == "localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil {
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

// gates applies the cluster's status, the push blocks (the storage flag of
// the last reconcile, then push_blocked) and its plan's features (PROXY.md
// §5.1 steps 2 and 3).
func (p *Proxy) gates(w http.ResponseWriter, cl *cluster, rt routes.Route) bool {
	if cl.static {
		return true
	}
	switch cl.Status {
	case catalog.StatusSuspended, catalog.StatusDeleting:
		p.deny(w, http.StatusForbidden, reply.CodeClusterSuspended, "cluster suspended", false)
		return false
	}
	if rt.Proxy == routes.ProxyProduce || rt.Proxy == routes.ProxyGatedGrow {
		// The push blocks: hard limits, in shadow mode too.
		if p.cfg.Inventory.StorageBlocked(cl.ID) {
			p.deny(w, http.StatusForbidden, reply.CodeStorageQuotaExceeded,
				"storage quota exceeded: the cluster stores more than its plan's max_retained_bytes", false)
			return false
		}
		if cl.Status == catalog.StatusPushBlocked {
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
