package auth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/routes"
)

// JWT-8: who passes each level. The table is written out, not derived from
// the code under test.
func TestGrantsAllows(t *testing.T) {
	t.Parallel()
	levels := []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly, routes.ReadWrite, routes.Admin}
	for _, tc := range []struct {
		name  string
		g     Grants
		allow []routes.Access
	}{
		{"no role", 0, []routes.Access{routes.Public}},
		{"read-only", grantsOfReadOnly, []routes.Access{routes.Public, routes.ReadOnly}},
		{"write-only", grantsOfWriteOnly, []routes.Access{routes.Public, routes.WriteOnly}},
		{"read-only+write-only", grantsOfReadOnly | grantsOfWriteOnly, []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly}},
		{"read-write", grantsOfReadWrite, []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly, routes.ReadWrite}},
		{"admin", grantsOfAdmin, levels},
	} {
		for _, l := range levels {
			require.Equal(t, contains(tc.allow, l), tc.g.Allows(l), "%s on %s", tc.name, l)
		}
		require.False(t, tc.g.Allows("superuser"), "an unknown level is refused")
	}
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path string
		want         routes.Access
	}{
		{"GET", "/health", routes.Public},
		{"HEAD", "/health", routes.Public},
		{"POST", "/health", routes.ReadWrite},
		{"GET", "/metrics", routes.Public},
		{"GET", "/metrics/prometheus", routes.Public},
		{"GET", "/", routes.Public},
		{"GET", "/assets/app.js", routes.Public},
		{"GET", "/favicon.ico", routes.Public},
		{"GET", "/auth/me", routes.Public},
		{"GET", "/auth/login", routes.Public},
		{"POST", "/auth/logout", routes.Public},
		{"DELETE", "/auth/logout", routes.ReadWrite},
		{"POST", "/api/v1/push", routes.WriteOnly},
		{"POST", "/api/v1/p%75sh", routes.WriteOnly},
		{"POST", "/api/v1/push/", routes.ReadWrite},
		{"GET", "/api/v1/pop/queue/q", routes.ReadWrite},
		{"HEAD", "/api/v1/dlq", routes.ReadOnly},
		{"GET", "/api/v1/dlq", routes.ReadOnly},
		{"DELETE", "/api/v1/dlq", routes.Admin},
		{"POST", "/api/v1/dlq/0b9b5e4e-2d1c-4c55-9d8e-0c7a1c1f6f00/replay", routes.ReadWrite},
		{"GET", "/api/v1/dlq/0b9b5e4e-2d1c-4c55-9d8e-0c7a1c1f6f00/replay", routes.ReadWrite},
		{"DELETE", "/api/v1/resources/queues/q", routes.Admin},
		{"GET", "/api/v1/resources/queues/q", routes.ReadOnly},
		{"DELETE", "/api/v1/consumer-groups/g", routes.Admin},
		{"GET", "/api/v1/nope", routes.ReadWrite},
		{"GET", "/status", routes.ReadWrite},
		{"GET", "/queues", routes.ReadWrite},
		{"GET", "/index.html", routes.ReadWrite},
		{"GET", "/assets%2F..%2Fapi/v1/dlq", routes.ReadWrite},
		{"get", "/health", routes.ReadWrite},
	} {
		require.Equal(t, tc.want, Classify(tc.method, tc.path), "%s %s", tc.method, tc.path)
	}
}

// JWT-10: exact entries, and prefix entries that end in "/" (not "/" itself).
func TestSkipped(t *testing.T) {
	t.Parallel()
	entries := []string{"/", "/status", "/open/"}
	for path, want := range map[string]bool{
		"/": true, "/status": true, "/status/": false, "/statusx": false,
		"/open/": true, "/open/a/b": true, "/open": false, "/api/v1/dlq": false,
	} {
		require.Equal(t, want, skipped(entries, path), path)
	}
	require.False(t, skipped(nil, "/"))
}

// recordingMux registers the generated routes on a ServeMux, as
// handlers.Server.Handler does, with handlers that only record which
// operation a request reached (r.Pattern, set by the ServeMux).
func recordingMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", http.NotFound)
	record := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pattern", r.Pattern)
		w.WriteHeader(http.StatusTeapot)
	}
	api.HandlerWithOptions(api.NewStrictHandler(nil, nil), api.StdHTTPServerOptions{
		BaseRouter:       mux,
		Middlewares:      []api.MiddlewareFunc{func(http.Handler) http.Handler { return http.HandlerFunc(record) }},
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) { record(w, r) },
	})
	return mux
}

// patternRecorder collects the patterns the generated code registers.
type patternRecorder struct {
	http.ServeMux
	patterns []string
}

func (p *patternRecorder) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	p.patterns = append(p.patterns, pattern)
}

// DECISIONS §5: the route table and the served routes cannot drift. Every
// route the generated router registers has exactly one entry in routes.All,
// every entry is registered, and the spec's operations are the same set.
func TestRouteTableMatchesServedRoutes(t *testing.T) {
	t.Parallel()
	var rec patternRecorder
	api.HandlerWithOptions(api.NewStrictHandler(nil, nil), api.StdHTTPServerOptions{BaseRouter: &rec})

	var table []string
	for _, r := range routes.All {
		table = append(table, r.Method+" "+r.Path)
		require.Contains(t, []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly, routes.ReadWrite, routes.Admin},
			r.Access, "%s %s", r.Method, r.Path)
	}
	doc, err := api.GetSpec()
	require.NoError(t, err)
	var spec []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			spec = append(spec, method+" "+path)
			access, _ := op.Extensions["x-queen-access"].(string)
			r, ok := routes.Match(method, concrete(path))
			require.True(t, ok, "%s %s", method, path)
			require.Equal(t, routes.Access(access), r.Access, "%s %s", method, path)
		}
	}
	sort.Strings(rec.patterns)
	sort.Strings(table)
	sort.Strings(spec)
	require.NotEmpty(t, table)
	require.Equal(t, rec.patterns, table, "registered routes vs routes.All")
	require.Equal(t, spec, table, "openapi.yaml operations vs routes.All")

	// Each entry is reached by its own concrete path, on the real mux too.
	mux := recordingMux()
	for _, r := range routes.All {
		got, ok := routes.Match(r.Method, concrete(r.Path))
		require.True(t, ok, "%s %s", r.Method, r.Path)
		require.Equal(t, r, got)
		req := httptest.NewRequest(r.Method, concrete(r.Path), nil)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		require.Equal(t, r.Method+" "+r.Path, w.Header().Get("X-Pattern"))
	}
}

// concrete fills every {param} of a template with a value.
func concrete(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "p" + strings.Trim(s, "{}")
		}
	}
	return strings.Join(segs, "/")
}

// FuzzClassify checks the classifier against the router itself: whatever
// operation the ServeMux hands a request to, Classify gives that request the
// operation's level, and nothing is public but the spec's public operations
// and the fixed public shell.
func FuzzClassify(f *testing.F) {
	for _, r := range routes.All {
		f.Add(r.Method, concrete(r.Path))
	}
	for _, seed := range [][2]string{
		{"GET", "/"}, {"HEAD", "/api/v1/dlq"}, {"POST", "/api/v1/p%75sh"}, {"POST", "/api/v1/push/"},
		{"GET", "/assets/../api/v1/dlq"}, {"GET", "/assets/%2e%2e/api/v1/dlq"}, {"GET", "/assets%2F..%2Fapi/v1/dlq"},
		{"GET", "//api/v1/dlq"}, {"GET", "/api/v1/pop/queue/%2F"}, {"GET", "/api/v1/pop/queue/a%2Fb/partition/c"},
		{"DELETE", "/api/v1/resources/queues/%71"}, {"GET", "/api/v1/resources/queues/q?x=1"}, {"CONNECT", "/api/v1/push"},
		{"GET", "/favicon/../api/v1/dlq"}, {"OPTIONS", "*"}, {"GET", "/api/v1/dlq#x"}, {"get", "/api/v1/dlq"},
	} {
		f.Add(seed[0], seed[1])
	}
	mux := recordingMux()
	byPattern := map[string]routes.Access{}
	for _, r := range routes.All {
		byPattern[r.Method+" "+r.Path] = r.Access
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		got := Classify(method, target)
		if r, ok := routes.Match(method, target); ok {
			require.Equal(t, r.Access, got)
		} else if got == routes.Public {
			require.True(t, publicShell(method, target))
		} else {
			require.Equal(t, routes.ReadWrite, got, "unknown routes are read-write")
		}

		// Through the router, as the server parses a request line.
		u, err := url.ParseRequestURI(target)
		if err != nil || !validMethod(method) {
			return
		}
		req := &http.Request{Method: method, URL: u, Host: "queen", Header: http.Header{}, RequestURI: target}
		level := Classify(method, u.EscapedPath())
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if p := w.Header().Get("X-Pattern"); p != "" {
			want, ok := byPattern[p]
			require.True(t, ok, "pattern %q", p)
			require.Equal(t, want, level, "%s %s reached %s", method, target, p)
		}
	})
}

// validMethod is the token rule net/http applies to request methods.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}
