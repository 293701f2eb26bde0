// Package forward sends an admitted request to its cell's broker with
// net/http/httputil.ReverseProxy and its Rewrite hook.
//
// What the broker receives: the client's method, path and query byte for
// byte (the classifier refused every path that could be read two ways); the
// cell's bearer instead of the client's credential; the cluster's tenant in
// x-queen-tenant instead of anything the client sent; and none of the
// client's cookies, act-as header or upgrade request. What the client
// receives: the broker's answer, streamed as it arrives, or 502 bad_gateway
// when the broker cannot be reached, 504 upstream_timeout when it does not
// answer within the budget. A client that leaves cancels the broker call.
package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/queenforgo/queen/proxy/reply"
)

// Headers the proxy sets or strips.
const (
	HeaderTenant     = "X-Queen-Tenant"
	HeaderRequestID  = "X-Queen-Request-Id"
	HeaderActCluster = "X-Queen-Act-Cluster"
)

// Target is where one request goes and as whom.
type Target struct {
	BaseURL *url.URL // the cell's base_url: scheme, host and an optional path prefix
	Secret  *string  // the cell's bearer; nil sends no Authorization
	Tenant  string   // x-queen-tenant to set; "" sets none
}

// MaxCountedBody caps an answer read whole to count its messages; a larger
// one is 502 (PROXY.md §5.3).
const MaxCountedBody = 64 << 20

// Call is one request to forward.
type Call struct {
	Target    Target
	RequestID string
	Budget    time.Duration // for the broker's response headers
	// Delivered, when set, makes a 200 answer be read whole (at most
	// MaxCountedBody) to count the messages it hands out ("messages": [...]),
	// which it stores there. The client still gets the same bytes.
	Delivered *int64
	// Private marks the answer as for one signed-in user: a Cache-Control
	// of public becomes private (the dashboard behind a session).
	Private bool
}

// Config is what New needs.
type Config struct {
	ConnectTimeout time.Duration // QUEEN_PROXY_UPSTREAM_CONNECT_TIMEOUT_MS
	Logger         *slog.Logger
	// ObserveFunc, when set, is told how long the broker took to send its
	// response headers.
	ObserveFunc func(r *http.Request, d time.Duration)
}

// Forwarder forwards requests; one serves every cell.
type Forwarder struct {
	proxy   *httputil.ReverseProxy
	logger  *slog.Logger
	observe func(*http.Request, time.Duration)
}

type ctxKey struct{}

// call is the per-request state the ReverseProxy hooks read.
type call struct {
	target    Target
	requestID string
	delivered *int64
	private   bool
	timer     *time.Timer
	cancel    context.CancelCauseFunc
	client    context.Context // the inbound request's own context
	start     time.Time
	observe   func(*http.Request, time.Duration)
}

var (
	errUpstreamTimeout = errors.New("upstream timeout")
	errTooLarge        = errors.New("answer too large to meter")
)

// New returns a Forwarder with a pooled transport: plaintext HTTP/1.1 to the
// brokers, up to 64 idle connections per host.
func New(cfg Config) *Forwarder {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	transport := &http.Transport{
		Proxy:               nil, // never an HTTP proxy from the environment
		DialContext:         (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // pass the broker's bytes through as they are
	}
	f := &Forwarder{logger: cfg.Logger}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      transport,
		FlushInterval:  -1, // stream: a long-poll's answer goes out the moment it arrives
		ModifyResponse: f.modifyResponse,
		ErrorHandler:   f.errorHandler,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	f.observe = cfg.ObserveFunc
	return f
}

// Forward sends r as cl says and writes the answer to w. cl.Budget bounds
// the wait for the broker's response headers (the long-poll budget for a
// parked pop).
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, cl Call) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	c := &call{target: cl.Target, requestID: cl.RequestID, delivered: cl.Delivered, private: cl.Private,
		cancel: cancel, client: r.Context(), start: time.Now(), observe: f.observe}
	c.timer = time.AfterFunc(cl.Budget, func() { cancel(errUpstreamTimeout) })
	defer c.timer.Stop()
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, ctxKey{}, c)))
}

// rewrite builds the outbound request.
func rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(ctxKey{}).(*call)
	base := c.target.BaseURL
	out := pr.Out
	out.URL.Scheme = base.Scheme
	out.URL.Host = base.Host
	prefix := strings.TrimSuffix(base.Path, "/")
	out.URL.Path = prefix + pr.In.URL.Path
	out.URL.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + pr.In.URL.EscapedPath()
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = ""
	pr.SetXForwarded()

	h := out.Header
	for _, name := range []string{"Authorization", "Proxy-Authorization", "Cookie", HeaderTenant,
		HeaderActCluster, HeaderRequestID, "Upgrade", "Connection"} {
		h.Del(name)
	}
	if c.target.Secret != nil {
		h.Set("Authorization", "Bearer "+*c.target.Secret)
	}
	if c.target.Tenant != "" {
		h.Set(HeaderTenant, c.target.Tenant)
	}
	h.Set(HeaderRequestID, c.requestID)
}

// modifyResponse runs once the broker's headers are in: the budget no longer
// applies (the body streams as long as it takes).
func (f *Forwarder) modifyResponse(resp *http.Response) error {
	c := resp.Request.Context().Value(ctxKey{}).(*call)
	c.timer.Stop()
	if c.observe != nil {
		c.observe(resp.Request, time.Since(c.start))
	}
	resp.Header.Set(HeaderRequestID, c.requestID)
	if c.private {
		if cc := resp.Header.Get("Cache-Control"); strings.Contains(cc, "public") {
			resp.Header.Set("Cache-Control", strings.ReplaceAll(cc, "public", "private"))
		}
	}
	if c.delivered != nil && resp.StatusCode == http.StatusOK {
		return countDelivered(resp, c.delivered)
	}
	return nil
}

// countDelivered reads a pop answer whole to count its messages, and puts
// the bytes back for the client.
func countDelivered(resp *http.Response, n *int64) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxCountedBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if len(body) > MaxCountedBody {
		return errTooLarge
	}
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &doc) == nil {
		*n = int64(len(doc.Messages))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// errorHandler maps a failed broker call to the envelope: the budget ran out
// (504), the broker could not be reached or broke off (502), or the client
// left, in which case there is nobody to answer.
func (f *Forwarder) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	c := r.Context().Value(ctxKey{}).(*call)
	w.Header().Set(HeaderRequestID, c.requestID)
	switch {
	case context.Cause(r.Context()) == errUpstreamTimeout:
		f.logger.Warn("upstream timeout", "request_id", c.requestID, "host", c.target.BaseURL.Host)
		reply.Error(w, http.StatusGatewayTimeout, reply.CodeUpstreamTimeout, "upstream timeout")
	case c.client.Err() != nil:
		f.logger.Debug("client left; upstream call cancelled", "request_id", c.requestID)
	case errors.Is(err, errTooLarge):
		f.logger.Warn("upstream answer over the metering cap", "request_id", c.requestID, "cap", MaxCountedBody)
		reply.Error(w, http.StatusBadGateway, reply.CodeBadGateway, "upstream answer too large")
	default:
		f.logger.Warn("upstream unreachable", "request_id", c.requestID, "host", c.target.BaseURL.Host, "err", err)
		reply.Error(w, http.StatusBadGateway, reply.CodeBadGateway, "upstream unreachable")
	}
}
