package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/route"
)

// recorder is an upstream that records what reaches it. It stands in for the
// network (this test asserts on the proxy's bytes, not on a broker's
// behaviour), so that every forwarded request can be checked.
type recorder struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Clone(req.Context()))
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *recorder) take() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

const devTenant = "00000000-0000-0000-0000-0000000000aa"

// FuzzProxyForwardsOnlyTheTable sends arbitrary methods and raw request
// targets, with credentials and a tenant of the client's own, to a
// dev-static proxy that lets everything through authentication. Whatever
// reaches the upstream is an operation of the spec's table, with exactly the
// path bytes that were sent, the cell's bearer, the cluster's tenant, and
// none of the client's cookies or act-as header.
func FuzzProxyForwardsOnlyTheTable(f *testing.F) {
	rec, front := recordingProxy(f)
	for _, r := range routes.All {
		f.Add(r.Method, strings.NewReplacer("{", "x", "}", "").Replace(r.Path))
	}
	for _, s := range []string{"/api/v1%2Fpush", "/api/v1/p%75sh", "/api/v1/push/../system/maintenance", "//api/v1/push",
		"/api/v1/./push", "/api/v1/push/", "/API/v1/push", "/api/v1/pop/queue/a%2Fb", "/api/v1/pop/queue/a%20b?wait=false",
		"http://evil/api/v1/push", "/api/v1/resources/tenant", "/internal/api/notify", "/metrics", "*", "/api/v1/push?x=%2F"} {
		f.Add("POST", s)
		f.Add("GET", s)
		f.Add("DELETE", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		if !validMethod(method) || !validTarget(target) {
			return
		}
		rawRequest(t, front, method, target)
		for _, got := range rec.take() {
			checkForwarded(t, got, method, target)
		}
	})
}

// Every operation the table lets through does reach the upstream: the fuzz
// test above is not vacuous.
func TestProxyForwardsEveryTableRoute(t *testing.T) {
	t.Parallel()
	rec, front := recordingProxy(t)
	n := 0
	for _, r := range routes.All {
		if r.Path == "/metrics/prometheus" || strings.HasPrefix(r.Path, "/auth/") {
			continue // the proxy serves its own
		}
		target := strings.NewReplacer("{", "x", "}", "").Replace(r.Path) + "?a=1&b=%2F"
		status := rawRequest(t, front, r.Method, target)
		got := rec.take()
		if _, ok := route.Classify(r.Method, pathOf(target)); !ok {
			require.Empty(t, got, "%s %s", r.Method, target)
			require.Equal(t, http.StatusNotFound, status)
			continue
		}
		require.Len(t, got, 1, "%s %s", r.Method, target)
		require.Equal(t, http.StatusNoContent, status)
		checkForwarded(t, got[0], r.Method, target)
		n++
	}
	require.Greater(t, n, 40)
}

// checkForwarded asserts what the upstream received.
func checkForwarded(t *testing.T, got *http.Request, method, target string) {
	t.Helper()
	rawPath, _, _ := strings.Cut(got.RequestURI, "?")
	r, ok := route.Classify(got.Method, rawPath)
	require.True(t, ok, "%s %s reached the upstream, and it is not an operation of the table", got.Method, got.RequestURI)
	require.NotContains(t, []routes.ProxyClass{routes.ProxyBlocked, routes.ProxyOperator, routes.Unclassified}, r.Proxy)
	require.Equal(t, method, got.Method)
	require.Equal(t, target, got.RequestURI, "the path and query arrive byte for byte")
	require.Equal(t, "Bearer "+cellToken, got.Header.Get("Authorization"))
	require.Equal(t, []string{devTenant}, got.Header.Values("X-Queen-Tenant"))
	require.Empty(t, got.Header.Values("Cookie"))
	require.Empty(t, got.Header.Values("X-Queen-Act-Cluster"))
	require.Empty(t, got.Header.Values("X-Foo"), "a header the client named in Connection is hop-by-hop")
	require.NotEmpty(t, got.Header.Get("X-Queen-Request-Id"))
}

const cellToken = "cell-token"

// recordingProxy is a dev-static proxy that authenticates nobody, in front
// of a recorder.
func recordingProxy(t testing.TB) (*recorder, string) {
	rec := &recorder{}
	upstream := httptest.NewServer(rec)
	t.Cleanup(upstream.Close)
	token := cellToken
	h, err := proxy.New(proxy.Config{
		DevCell:         &proxy.DevCell{BaseURL: upstream.URL, Token: &token, Tenant: devTenant},
		DevInsecure:     true,
		TenantHeader:    true,
		UpstreamTimeout: 5 * time.Second,
		LongPollMax:     time.Second,
		MaxBodyBytes:    1 << 20,
		MaxBatchItems:   100,
		Forwarder:       newForwarder(),
	})
	require.NoError(t, err)
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	return rec, front.Listener.Addr().String()
}

func pathOf(target string) string {
	p, _, _ := strings.Cut(target, "?")
	return p
}

// rawRequest writes one HTTP/1.1 request with exactly this request line and
// the client's own credentials, and returns the status.
func rawRequest(t testing.TB, addr, method, target string) int {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: acme.proxy.test\r\nAuthorization: Bearer qk_live_client\r\n"+
		"X-Queen-Tenant: 11111111-1111-1111-1111-111111111111\r\nCookie: queen_session=abc\r\n"+
		"X-Queen-Act-Cluster: other\r\nConnection: keep-alive, X-Foo\r\nX-Foo: 1\r\nContent-Length: 2\r\n\r\n{}", method, target)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// validMethod and validTarget keep the fuzzer to request lines that are
// one line of HTTP/1.1 (a space or CR in them would make another request).
func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for _, c := range []byte(m) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func validTarget(s string) bool {
	if s == "" || len(s) > 4096 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
