package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/web/uplot"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func TestIndexAndClientRoutes(t *testing.T) {
	t.Parallel()
	h := New()
	for _, p := range []string{"/", "/queues", "/queues/orders", "/messages", "/dlq", "/consumers", "/traces",
		"/analytics", "/system", "/operations", "/migration", "/queues/with%20space", "/healthz"} {
		t.Run(p, func(t *testing.T) {
			res := get(t, h, "GET", p+"?x=1", nil)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
			require.Equal(t, cacheIndex, res.Header.Get("Cache-Control"))
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
			require.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), "no CORS (SECURITY L-1)")
			b := body(t, res)
			require.Contains(t, b, `<script type="module" src="/assets/`+h.Version()+`/app.js">`)
			require.NotContains(t, b, assetsPlaceholder)
		})
	}
}

func TestHeadServesHeadersOnly(t *testing.T) {
	t.Parallel()
	res := get(t, New(), "HEAD", "/", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	require.Empty(t, body(t, res))
}

func TestIndexReferencesOnlyExistingAssets(t *testing.T) {
	t.Parallel()
	h := New()
	idx := body(t, get(t, h, "GET", "/", nil))
	refs := regexp.MustCompile(`(?:src|href)="(/[^"]+)"`).FindAllStringSubmatch(idx, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		res := get(t, h, "GET", m[1], nil)
		require.Equal(t, http.StatusOK, res.StatusCode, m[1])
	}
}

// Every relative import of every module resolves to an embedded file, so a
// typo in an import path fails here rather than in a browser.
func TestModuleImportsResolve(t *testing.T) {
	t.Parallel()
	h := New()
	imp := regexp.MustCompile(`(?m)^\s*import\s+(?:[^'"]+\s+from\s+)?['"](\.[^'"]+)['"]`)
	n := 0
	for name := range h.files {
		if !strings.HasSuffix(name, ".js") || strings.Contains(name, "/vendor/") {
			continue
		}
		for _, m := range imp.FindAllStringSubmatch(string(h.files[name].body), -1) {
			target := pathJoin(name, m[1])
			_, ok := h.files[target]
			require.True(t, ok, "%s imports %s (%s): no such file", name, m[1], target)
			n++
		}
	}
	require.Greater(t, n, 10)
}

func pathJoin(from, rel string) string {
	dir := from[:strings.LastIndex(from, "/")+1]
	parts := strings.Split(dir+rel, "/")
	var out []string
	for _, p := range parts {
		switch p {
		case ".", "":
		case "..":
			out = out[:len(out)-1]
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

func TestAssetsContentTypesAndCaching(t *testing.T) {
	t.Parallel()
	h := New()
	v := h.Version()
	cases := []struct {
		path, ctype, cache string
	}{
		{"/assets/" + v + "/app.js", "text/javascript; charset=utf-8", cacheImmutable},
		{"/assets/" + v + "/views/messages.js", "text/javascript; charset=utf-8", cacheImmutable},
		{"/assets/" + v + "/style.css", "text/css; charset=utf-8", cacheImmutable},
		{"/assets/" + v + "/vendor/uPlot.esm.js", "text/javascript; charset=utf-8", cacheImmutable},
		{"/assets/" + v + "/vendor/uPlot.LICENSE.txt", "text/plain; charset=utf-8", cacheImmutable},
		{"/assets/app.js", "text/javascript; charset=utf-8", cacheRevalid},                // unversioned
		{"/assets/v-000000000000/api.js", "text/javascript; charset=utf-8", cacheRevalid}, // an older page
		{"/favicon.svg", "image/svg+xml", cacheOther},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			res := get(t, h, "GET", c.path, nil)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, c.ctype, res.Header.Get("Content-Type"))
			require.Equal(t, c.cache, res.Header.Get("Cache-Control"))
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			require.NotEmpty(t, res.Header.Get("ETag"))
			require.NotEmpty(t, body(t, res))
		})
	}
}

func TestAssetMissingIsPlain404(t *testing.T) {
	t.Parallel()
	h := New()
	for _, p := range []string{"/assets/nope.js", "/assets/" + h.Version() + "/nope.js", "/assets/", "/assets/" + h.Version() + "/",
		"/favicon.ico", "/robots.txt", "/queues/orders.json", "/index.html"} {
		res := get(t, h, "GET", p, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
		require.NotContains(t, body(t, res), "<html", p)
	}
}

// The API's paths are never answered with the index, whatever reaches the
// dashboard (the broker's router answers them first; this is the backstop).
func TestAPIPathsNotSwallowed(t *testing.T) {
	t.Parallel()
	h := New()
	for _, p := range []string{"/api/v1/nope", "/api/", "/api", "/streams/v1/x", "/health", "/health/x", "/metrics",
		"/metrics/prometheus", "/auth/me", "/internal/api/notify", "/ws/x"} {
		res := get(t, h, "GET", p, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
		require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"), p)
	}
}

func TestMethodsAndTraversal(t *testing.T) {
	t.Parallel()
	h := New()
	res := get(t, h, "POST", "/", nil)
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))

	req := httptest.NewRequest("GET", "/", nil)
	req.URL.Path = "/assets/../web.go"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
}

func TestConditionalAndGzip(t *testing.T) {
	t.Parallel()
	h := New()
	p := "/assets/" + h.Version() + "/vendor/uPlot.esm.js"
	plain := get(t, h, "GET", p, nil)
	etag := plain.Header.Get("ETag")
	raw := body(t, plain)
	require.Empty(t, plain.Header.Get("Content-Encoding"))
	require.Contains(t, plain.Header.Get("Vary"), "Accept-Encoding")

	res := get(t, h, "GET", p, map[string]string{"If-None-Match": etag})
	require.Equal(t, http.StatusNotModified, res.StatusCode)

	gz := get(t, h, "GET", p, map[string]string{"Accept-Encoding": "br, gzip"})
	require.Equal(t, "gzip", gz.Header.Get("Content-Encoding"))
	require.NotEqual(t, etag, gz.Header.Get("ETag"))
	zr, err := gzip.NewReader(gz.Body)
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, raw, string(unzipped))

	off := get(t, h, "GET", p, map[string]string{"Accept-Encoding": "gzip;q=0"})
	require.Empty(t, off.Header.Get("Content-Encoding"))

	rng := get(t, h, "GET", p, map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-9"})
	require.Equal(t, http.StatusPartialContent, rng.StatusCode)
	require.Empty(t, rng.Header.Get("Content-Encoding"))
	require.Equal(t, raw[:10], body(t, rng))
}

// The version changes with any asset's content, and only then.
func TestVersionFollowsAssets(t *testing.T) {
	t.Parallel()
	root := fstest.MapFS{
		"index.html":    {Data: []byte(`<script src="%ASSETS%/app.js"></script>`)},
		"assets/app.js": {Data: []byte("export {};")},
		"favicon.svg":   {Data: []byte("<svg/>")},
	}
	a, err := newHandler(root, nil)
	require.NoError(t, err)
	root["favicon.svg"] = &fstest.MapFile{Data: []byte("<svg></svg>")}
	b, err := newHandler(root, nil)
	require.NoError(t, err)
	require.Equal(t, a.Version(), b.Version())
	root["assets/app.js"] = &fstest.MapFile{Data: []byte("export const x = 1;")}
	c, err := newHandler(root, nil)
	require.NoError(t, err)
	require.NotEqual(t, a.Version(), c.Version())
	require.True(t, isVersion(c.Version()))
	require.Contains(t, string(c.index.body), "/assets/"+c.Version()+"/app.js")

	_, err = newHandler(fstest.MapFS{"index.html": {Data: []byte("no placeholder")}}, nil)
	require.Error(t, err)
	_, err = newHandler(fstest.MapFS{"assets/app.js": {Data: []byte("x")}}, nil)
	require.Error(t, err)
}

// Every embedded file has a known content type: a new kind of file needs an
// entry in contentTypes, not application/octet-stream.
func TestEveryFileHasAContentType(t *testing.T) {
	t.Parallel()
	err := fs.WalkDir(embedded, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		require.NotEqual(t, "application/octet-stream", newFile(nil, p, nil).ctype, p)
		return nil
	})
	require.NoError(t, err)
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for hdr, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "gzip; q=0.0": false, "br": false, "x-gzip": false,
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Accept-Encoding", hdr)
		require.Equal(t, want, acceptsGzip(req), hdr)
	}
}

func TestVendoredLicensePresent(t *testing.T) {
	t.Parallel()
	lic, err := uplot.Files.ReadFile("uPlot.LICENSE.txt")
	require.NoError(t, err)
	require.True(t, bytes.Contains(lic, []byte("MIT License")))
}

// Every compressed copy, the index's included, unzips to its file: the
// files share one compressor, reset between them.
func TestEveryGzipMatchesItsFile(t *testing.T) {
	t.Parallel()
	h := New()
	files := []*file{h.index}
	for _, f := range h.files {
		files = append(files, f)
	}
	compressed := 0
	for _, f := range files {
		if f.gz == nil {
			continue
		}
		compressed++
		zr, err := gzip.NewReader(bytes.NewReader(f.gz))
		require.NoError(t, err, f.name)
		unzipped, err := io.ReadAll(zr)
		require.NoError(t, err, f.name)
		require.Equal(t, f.body, unzipped, f.name)
	}
	require.Greater(t, compressed, 2)
}
