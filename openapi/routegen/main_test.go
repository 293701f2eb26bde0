package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
)

// spec builds an OpenAPI document from "METHOD /path operationId access" lines; "-" leaves the
// operationId or the x-queen-access out.
func spec(t *testing.T, ops ...string) *openapi3.T {
	t.Helper()
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: test, version: \"1\"}\npaths:\n")
	byPath := map[string][]string{}
	var paths []string
	for _, op := range ops {
		f := strings.Fields(op)
		require.Len(t, f, 4, op)
		if _, seen := byPath[f[1]]; !seen {
			paths = append(paths, f[1])
		}
		line := "    " + strings.ToLower(f[0]) + ":\n"
		if f[2] != "-" {
			line += "      operationId: " + f[2] + "\n"
		}
		if f[3] != "-" {
			line += "      x-queen-access: " + f[3] + "\n"
		}
		line += "      responses: {\"200\": {description: ok}}\n"
		byPath[f[1]] = append(byPath[f[1]], line)
	}
	for _, p := range paths {
		b.WriteString("  " + p + ":\n" + strings.Join(byPath[p], ""))
	}
	doc, err := openapi3.NewLoader().LoadFromData([]byte(b.String()))
	require.NoError(t, err, b.String())
	return doc
}

// routeHandler stands for route i of a table registered on a ServeMux.
type routeHandler int

func (routeHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// newMux registers every route the way the broker's oapi-codegen server does.
func newMux(methods, paths []string) *http.ServeMux {
	mux := http.NewServeMux()
	for i := range methods {
		mux.Handle(muxPattern(methods[i], paths[i]), routeHandler(i))
	}
	return mux
}

// serveMuxRoute returns the index of the route mux serves a request for method and the raw
// path with, or -1. comparable is false when no request arrives with that raw path or mux
// answers it with a redirect (an unclean path, a missing trailing slash) rather than routing it.
func serveMuxRoute(mux *http.ServeMux, method, rawPath string) (i int, comparable bool) {
	decoded, err := url.PathUnescape(rawPath)
	if err != nil || !strings.HasPrefix(rawPath, "/") {
		return -1, false
	}
	u := &url.URL{Path: decoded, RawPath: rawPath}
	if u.EscapedPath() != rawPath {
		return -1, false
	}
	req := &http.Request{Method: method, URL: u, Host: "broker.test"}
	h, _ := mux.Handler(req)
	if rh, ok := h.(routeHandler); ok {
		return int(rh), true
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return -1, rec.Code < 300 || rec.Code >= 400
}

func TestMatch(t *testing.T) {
	t.Parallel()

	doc := spec(t,
		"GET / getRoot public",
		"GET /health getHealth public",
		"POST /api/v1/push pushMessages write-only",
		"GET /api/v1/consumer-groups/lagging listLagging read-only",
		"GET /api/v1/consumer-groups/{group} getConsumerGroup read-only",
		"DELETE /api/v1/consumer-groups/{group} deleteConsumerGroup admin",
		"DELETE /api/v1/consumer-groups/{group}/queues/{queue} deleteGroupQueue admin",
		"GET /api/v1/queues/{queue}/stats/{window} getQueueStats read-only",
		"GET /api/v1/queues/{queue}/stats/latest getLatestStats read-only",
		"GET /api/v1/{kind}/{name}/stats/{window} getAnyStats read-only",
		"HEAD /api/v1/blobs/{blob} headBlob read-only",
		"GET /api/v1/blobs/{blob} getBlob read-only",
		"GET /files/ listFiles read-only",
		"DELETE /api/v1/resources/queues/{queue} deleteQueue admin",
	)
	all, err := collect(doc)
	require.NoError(t, err)
	tbl := newTable(all)
	var methods, paths []string
	for _, r := range all {
		methods = append(methods, r.Method)
		paths = append(paths, r.Path)
	}
	mux := newMux(methods, paths)

	tests := []struct {
		name, method, path string
		want               string // operationId; "" for no match
	}{
		{"static beats param", "GET", "/api/v1/consumer-groups/lagging", "listLagging"},
		{"param", "GET", "/api/v1/consumer-groups/g1", "getConsumerGroup"},
		{"only routes of the method compete", "DELETE", "/api/v1/consumer-groups/lagging", "deleteConsumerGroup"},
		{"static beats param deeper down", "GET", "/api/v1/queues/q/stats/latest", "getLatestStats"},
		{"fewer params win", "GET", "/api/v1/queues/q/stats/1h", "getQueueStats"},
		{"all params", "GET", "/api/v1/topics/q/stats/1h", "getAnyStats"},
		{"head falls back to get", "HEAD", "/health", "getHealth"},
		{"head falls back to the most specific get", "HEAD", "/api/v1/consumer-groups/lagging", "listLagging"},
		{"declared head wins over get", "HEAD", "/api/v1/blobs/b1", "headBlob"},
		{"get is not head", "GET", "/api/v1/blobs/b1", "getBlob"},
		{"wrong method", "POST", "/health", ""},
		{"method is case-sensitive", "get", "/health", ""},
		{"empty method", "", "/health", ""},
		{"unknown path", "GET", "/api/v1/nope", ""},
		{"exact path", "POST", "/api/v1/push", "pushMessages"},
		{"trailing slash", "POST", "/api/v1/push/", ""},
		{"trailing slash after param", "DELETE", "/api/v1/consumer-groups/g1/", ""},
		{"missing segment", "DELETE", "/api/v1/consumer-groups/g1/queues", ""},
		{"extra segment", "GET", "/health/x", ""},
		{"param needs a segment", "GET", "/api/v1/consumer-groups/", ""},
		{"param needs a non-empty segment", "DELETE", "/api/v1/consumer-groups//queues/q", ""},
		{"escaped slash stays in its segment", "GET", "/api/v1/consumer-groups/a%2Fb", "getConsumerGroup"},
		{"param never matches a lone escaped slash", "GET", "/api/v1/consumer-groups/%2F", ""},
		{"escaped literal", "POST", "/api/v1/p%75sh", "pushMessages"},
		{"escaped literal with upper-case hex", "DELETE", "/api/v1/resourc%65s/queues/q", "deleteQueue"},
		{"escaped literal beats param", "GET", "/api/v1/consumer-groups/l%61gging", "listLagging"},
		{"malformed escape is compared raw", "POST", "/api/v1/p%7push", ""},
		{"truncated escape", "POST", "/api/v1/push%", ""},
		{"root", "GET", "/", "getRoot"},
		{"escaped root", "GET", "/%2F", "getRoot"},
		{"trailing-slash template", "GET", "/files/", "listFiles"},
		{"trailing-slash template needs the slash", "GET", "/files", ""},
		{"trailing-slash template is not a prefix", "GET", "/files/a", ""},
		{"empty path", "GET", "", ""},
		{"relative path", "GET", "health", ""},
		{"dot segments are not cleaned", "GET", "/api/v1/consumer-groups/..", "getConsumerGroup"},
		{"double slash", "GET", "//health", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			got, ok := tbl.match(tt.method, tt.path)
			require.Equal(t, tt.want != "", ok)
			require.Equal(t, tt.want, got.OperationID)
			if i, comparable := serveMuxRoute(mux, tt.method, tt.path); comparable {
				want := ""
				if i >= 0 {
					want = all[i].OperationID
				}
				require.Equal(t, want, tt.want, "net/http.ServeMux disagrees")
			}
		})
	}
}

func TestGenerateRejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		ops  []string
		want []string // lines of the error, in order
	}{
		{
			name: "missing access",
			ops:  []string{"GET /health getHealth public", "POST /api/v1/push pushMessages -"},
			want: []string{"POST /api/v1/push: x-queen-access is missing; want one of public, read-only, write-only, read-write, admin"},
		},
		{
			name: "unknown access",
			ops:  []string{"POST /api/v1/push pushMessages superuser"},
			want: []string{`POST /api/v1/push: x-queen-access "superuser" is unknown; want one of public, read-only, write-only, read-write, admin`},
		},
		{
			name: "access in the wrong case",
			ops:  []string{"POST /api/v1/push pushMessages Admin"},
			want: []string{`POST /api/v1/push: x-queen-access "Admin" is unknown`},
		},
		{
			name: "access not a string",
			ops:  []string{"POST /api/v1/push pushMessages [admin]"},
			want: []string{`POST /api/v1/push: x-queen-access []interface {}{"admin"} is unknown`},
		},
		{
			name: "missing operationId",
			ops:  []string{"DELETE /api/v1/queues/{queue} - admin"},
			want: []string{"DELETE /api/v1/queues/{queue}: operationId is missing"},
		},
		{
			name: "every problem at once",
			ops: []string{
				"POST /b - admin",
				"GET /a getA nobody",
				"GET /c getC -",
				"GET /d getD public",
			},
			want: []string{
				`GET /a: x-queen-access "nobody" is unknown`,
				"POST /b: operationId is missing",
				"GET /c: x-queen-access is missing",
			},
		},
		{
			name: "repeated operationId",
			ops:  []string{"GET /a getThing read-only", "GET /b getThing read-only"},
			want: []string{`GET /b: operationId "getThing" is also used by GET /a`},
		},
		{
			name: "parameter inside a segment",
			ops:  []string{"GET /files/{name}.json getFile read-only"},
			want: []string{`GET /files/{name}.json: path segment "{name}.json": a parameter must be a whole segment`},
		},
		{
			name: "empty segment",
			ops:  []string{"GET /a//b getAB read-only"},
			want: []string{"GET /a//b: path template has an empty segment"},
		},
		{
			name: "same template twice",
			ops:  []string{"GET /a/{x} getX read-only", "GET /a/{y} getY admin"},
			want: []string{"GET /a/{y}: conflicts with GET /a/{x}: net/http.ServeMux cannot tell them apart"},
		},
		{
			name: "neither more specific",
			ops:  []string{"GET /a/{x}/c getX read-only", "GET /a/b/{y} getY admin"},
			want: []string{"GET /a/{x}/c: conflicts with GET /a/b/{y}: net/http.ServeMux cannot tell them apart"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			src, err := generate(spec(t, tt.ops...))
			require.Error(t, err)
			require.Nil(t, src)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, len(tt.want), err.Error())
			for i, want := range tt.want {
				require.True(t, strings.HasPrefix(lines[i], want), "line %d: %q does not start with %q", i, lines[i], want)
			}
		})
	}
}

func TestGenerateRejectsEmptySpec(t *testing.T) {
	t.Parallel()

	doc, err := openapi3.NewLoader().LoadFromData([]byte("openapi: 3.0.3\ninfo: {title: test, version: \"1\"}\npaths: {}\n"))
	require.NoError(t, err)
	_, err = generate(doc)
	require.EqualError(t, err, "the spec has no operations")
}

func TestRun(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte(`openapi: 3.0.3
info: {title: test, version: "1"}
paths:
  /health:
    get: {operationId: getHealth, x-queen-access: public, responses: {"200": {description: ok}}}
`), 0o644))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(`openapi: 3.0.3
info: {title: test, version: "1"}
paths:
  /health:
    get: {operationId: getHealth, responses: {"200": {description: ok}}}
`), 0o644))

	out := filepath.Join(dir, "gen", "routes", "routes.gen.go")
	require.NoError(t, run(good, out))
	src, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(src), "// Code generated by openapi/routegen; DO NOT EDIT.\n"))
	require.Contains(t, string(src), `{Method: "GET", Path: "/health", OperationID: "getHealth", Access: Public},`)

	other := filepath.Join(dir, "other.go")
	require.ErrorContains(t, run(bad, other), "GET /health: x-queen-access is missing")
	require.NoFileExists(t, other)
	require.ErrorContains(t, run(filepath.Join(dir, "missing.yaml"), other), "load ")
}

// TestGeneratedIsCurrent fails when gen/routes/routes.gen.go is not what the spec generates.
func TestGeneratedIsCurrent(t *testing.T) {
	t.Parallel()

	doc, err := load("../openapi.yaml")
	require.NoError(t, err)
	got, err := generate(doc)
	require.NoError(t, err)
	want, err := os.ReadFile("../../gen/routes/routes.gen.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "gen/routes/routes.gen.go is stale: run go generate ./openapi")
}

func TestGeneratedMatchAllocatesNothing(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		routes.Match("GET", "/api/v1/pop/queue/orders/partition/p%2F1")
		routes.Match("HEAD", "/health")
		routes.Match("POST", "/api/v1/p%75sh")
		routes.Match("GET", "/nope/nope/nope")
	})
	require.Zero(t, allocs)
}

// FuzzMatch runs the generated Match on arbitrary requests: it must not panic, must only
// return an operation of the request's method (or GET for HEAD), and must pick the operation
// that net/http.ServeMux, serving the real spec's routes, picks.
func FuzzMatch(f *testing.F) {
	for _, seed := range []struct{ method, path string }{
		{"GET", "/health"},
		{"HEAD", "/health"},
		{"POST", "/api/v1/push"},
		{"POST", "/api/v1/push/"},
		{"POST", "/api/v1/p%75sh"},
		{"GET", "/api/v1/pop/queue/orders/partition/p%2F1"},
		{"DELETE", "/api/v1/resources/queues/%2F"},
		{"DELETE", "/api/v1/resourc%65s/queues/orders"},
		{"POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek"},
		{"GET", "/api/v1/pop/queue//partition/p"},
		{"GET", "/api/v1/../health"},
		{"GET", "//"},
		{"GET", ""},
		{"GET", "%"},
	} {
		f.Add(seed.method, seed.path)
	}
	var methods, paths []string
	for _, r := range routes.All {
		methods = append(methods, r.Method)
		paths = append(paths, r.Path)
	}
	mux := newMux(methods, paths)

	f.Fuzz(func(t *testing.T, method, path string) {
		got, ok := routes.Match(method, path)
		if ok {
			require.True(t, got.Method == method || method == "HEAD" && got.Method == "GET", "%s %s matched %+v", method, path, got)
		} else {
			require.Zero(t, got)
		}
		i, comparable := serveMuxRoute(mux, method, path)
		if !comparable {
			return
		}
		if i < 0 {
			require.False(t, ok, "%s %s matched %+v; net/http.ServeMux finds nothing", method, path, got)
			return
		}
		require.True(t, ok, "%s %s matched nothing; net/http.ServeMux finds %+v", method, path, routes.All[i])
		require.Equal(t, routes.All[i], got, "%s %s", method, path)
	})
}

// TestSpecOperationsHaveProxyClass fails when an operation of the spec has no class at the
// proxy: the proxy would refuse it (fail closed), but the operation was meant to be reachable
// or explicitly blocked. Add x-queen-proxy (and x-queen-feature for a gated class).
func TestSpecOperationsHaveProxyClass(t *testing.T) {
	t.Parallel()

	doc, err := load("../openapi.yaml")
	require.NoError(t, err)
	all, err := collect(doc)
	require.NoError(t, err)
	for _, r := range all {
		require.NotEqual(t, Unclassified, r.Proxy, "%s %s (%s) has no %s", r.Method, r.Path, r.OperationID, proxyExtension)
		require.Equal(t, r.Proxy.Gated(), r.Feature != "", "%s %s: a feature goes with a gated class", r.Method, r.Path)
	}
	for _, r := range routes.All {
		require.NotEqual(t, routes.Unclassified, r.Proxy, "gen/routes: %s %s has no proxy class", r.Method, r.Path)
	}
}

func TestGenerateProxyClass(t *testing.T) {
	t.Parallel()

	build := func(ext string) *openapi3.T {
		doc, err := openapi3.NewLoader().LoadFromData([]byte(`openapi: 3.0.3
info: {title: test, version: "1"}
paths:
  /streams/v1/cycle:
    post: {operationId: cycle, x-queen-access: read-write, ` + ext + ` responses: {"200": {description: ok}}}
`))
		require.NoError(t, err)
		return doc
	}
	tests := []struct {
		ext, want string // want "" means it generates
	}{
		{"x-queen-proxy: gated-mixed, x-queen-feature: streams,", ""},
		{"x-queen-proxy: consume,", ""},
		{"", ""}, // Unclassified: generated, refused by the proxy, caught by the test above
		{"x-queen-proxy: Consume,", `x-queen-proxy "Consume" is unknown; want one of produce, consume, queue-admin`},
		{"x-queen-proxy: gated-open,", "x-queen-proxy gated-open needs x-queen-feature"},
		{"x-queen-proxy: gated-open, x-queen-feature: cron,", `x-queen-feature "cron" is unknown; want one of streams, traces`},
		{"x-queen-proxy: read, x-queen-feature: streams,", "x-queen-feature goes only with a gated x-queen-proxy, not read"},
	}
	for _, tt := range tests {
		src, err := generate(build(tt.ext))
		if tt.want == "" {
			require.NoError(t, err, tt.ext)
			continue
		}
		require.Nil(t, src)
		require.ErrorContains(t, err, "POST /streams/v1/cycle: "+tt.want, tt.ext)
	}
	src, err := generate(build("x-queen-proxy: gated-mixed, x-queen-feature: streams,"))
	require.NoError(t, err)
	require.Contains(t, string(src), `Access: ReadWrite, Proxy: ProxyGatedMixed, Feature: "streams"},`)
}
