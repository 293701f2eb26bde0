// Package web serves the dashboard: a single-page app of plain ES modules,
// embedded in the binary, that reads only the broker's public API.
//
// Layout of what is served (API-ADMIN §15, with the differences noted):
//
//   - GET / answers index.html, never cached. Its asset links carry a
//     version segment derived from the content of every asset
//     (/assets/v-<hash>/app.js), so the assets themselves are cached for a
//     year as immutable and a new binary is picked up on the next load.
//     Without a build step the file names carry no hash of their own; the
//     version segment plays that role for every relative module import too.
//   - /assets/<file> and /assets/<other version>/<file> serve the current
//     file with "no-cache" (revalidated by ETag); a missing asset is a plain
//     404, never the index.
//   - Other files of the web root (favicon.svg) are cached for an hour.
//   - Any other path without a file extension is a client route and gets the
//     index; one with an extension is a plain 404.
//   - Paths owned by the API (/api/, /streams/, /health, /metrics, /auth/,
//     /internal/, /ws/) are a plain 404 here: the broker's router answers
//     them before the dashboard sees them.
//
// Only GET and HEAD are served. No CORS headers are sent (SECURITY L-1).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queenforgo/queen/web/uplot"
)

//go:embed all:static
var embedded embed.FS

// assetsPlaceholder is replaced in index.html by the versioned assets path.
const assetsPlaceholder = "%ASSETS%"

// Cache-Control values.
const (
	cacheIndex     = "no-cache, no-store, must-revalidate"
	cacheImmutable = "public, max-age=31536000, immutable"
	cacheRevalid   = "no-cache"
	cacheOther     = "public, max-age=3600"
)

// contentSecurityPolicy keeps the dashboard to its own origin: scripts and
// data come from the broker only. Inline styles are allowed because the
// chart library positions its elements with them.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// apiPrefixes are paths the dashboard never answers with its index.
var apiPrefixes = []string{"/api/", "/streams/", "/auth/", "/internal/", "/ws/"}

// apiExact are API paths that may also have sub-paths.
var apiExact = []string{"/api", "/streams", "/health", "/metrics"}

// contentTypes by extension. Fixed here rather than taken from the
// system's MIME tables, which differ between machines.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".txt":   "text/plain; charset=utf-8",
	".woff2": "font/woff2",
}

// file is one embedded file, ready to serve.
type file struct {
	name  string
	body  []byte
	gz    []byte // gzip of body when that is smaller by enough to matter
	etag  string
	ctype string
}

// Handler serves the embedded dashboard. Its zero value is not usable; call
// New.
type Handler struct {
	files   map[string]*file // by path below static/, e.g. "assets/app.js"
	index   *file
	version string // "v-" + 12 hex digits of the assets' hash
	modTime time.Time
}

// New builds the handler from the embedded files. It panics only when the
// embedded tree itself is broken, which the package's tests catch.
func New() *Handler {
	root, err := fs.Sub(embedded, "static")
	if err != nil {
		panic(err)
	}
	h, err := newHandler(root, map[string]fs.FS{"assets/vendor": uplot.Files})
	if err != nil {
		panic(fmt.Sprintf("web: embedded dashboard: %v", err))
	}
	return h
}

// newHandler loads every file of root, and of each mount under its
// directory (the vendored chart library, shared with queen-proxy's
// console), and prepares index.html.
func newHandler(root fs.FS, mounts map[string]fs.FS) (*Handler, error) {
	h := &Handler{files: map[string]*file{}, modTime: time.Now()}
	bodies := map[string][]byte{}
	load := func(fsys fs.FS, dir string) error {
		return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := fs.ReadFile(fsys, p)
			bodies[path.Join(dir, p)] = body
			return err
		})
	}
	if err := load(root, ""); err != nil {
		return nil, err
	}
	for dir, fsys := range mounts {
		if err := load(fsys, dir); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(bodies))
	for name := range bodies {
		names = append(names, name)
	}
	sort.Strings(names)
	sum := sha256.New()
	// One compressor for every file: each gzip.Writer at BestCompression
	// allocates about 1 MB of tables, and with one per file New left
	// 17.6 MB of garbage in the boot of the broker (1.4 MB this way),
	// whose peak RSS that garbage was part of.
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestCompression)
	for _, name := range names {
		body := bodies[name]
		if strings.HasPrefix(name, "assets/") {
			fmt.Fprintf(sum, "%s\x00%d\x00", name, len(body))
			sum.Write(body)
		}
		h.files[name] = newFile(zw, name, body)
	}
	h.version = "v-" + hex.EncodeToString(sum.Sum(nil))[:12]
	tmpl, ok := h.files["index.html"]
	if !ok {
		return nil, fmt.Errorf("no index.html")
	}
	if !bytes.Contains(tmpl.body, []byte(assetsPlaceholder)) {
		return nil, fmt.Errorf("index.html does not reference %s", assetsPlaceholder)
	}
	h.index = newFile(zw, "index.html", bytes.ReplaceAll(tmpl.body, []byte(assetsPlaceholder), []byte("/assets/"+h.version)))
	delete(h.files, "index.html") // only ever served as the index, at /
	return h, nil
}

// newFile prepares one file, compressing it with zw (reset for it) when
// that pays.
func newFile(zw *gzip.Writer, name string, body []byte) *file {
	f := &file{name: name, body: body, ctype: contentTypes[path.Ext(name)]}
	if f.ctype == "" {
		f.ctype = "application/octet-stream"
	}
	d := sha256.Sum256(body)
	f.etag = `"` + hex.EncodeToString(d[:8]) + `"`
	if compressible(f.ctype) && len(body) > 1024 {
		var buf bytes.Buffer
		zw.Reset(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body)*9/10 {
			f.gz = buf.Bytes()
		}
	}
	return f
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.HasPrefix(ctype, "application/json") ||
		strings.HasPrefix(ctype, "image/svg")
}

// Version is the asset version segment the index links to ("v-<hash>").
func (h *Handler) Version() string { return h.version }

// ServeHTTP serves the index, an asset or a 404; see the package comment.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") || hasDotDot(p) {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	if isAPIPath(p) {
		http.NotFound(w, r)
		return
	}
	switch {
	case p == "/":
		h.serve(w, r, h.index, cacheIndex)
	case strings.HasPrefix(p, "/assets/"):
		h.serveAsset(w, r, strings.TrimPrefix(p, "/assets/"))
	default:
		name := strings.TrimPrefix(p, "/")
		if f, ok := h.files[name]; ok && !strings.HasPrefix(name, "assets/") {
			h.serve(w, r, f, cacheOther)
			return
		}
		if path.Ext(p) != "" || p == "/index.html" {
			// A missing file, not a client route. /index.html is only
			// ever served as "/": it would need a token with JWT on
			// (JWT-9), so nothing should link to it.
			http.NotFound(w, r)
			return
		}
		h.serve(w, r, h.index, cacheIndex)
	}
}

// serveAsset serves rest ("v-<hash>/app.js" or "app.js") from assets/.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, rest string) {
	cache := cacheRevalid
	if seg, after, ok := strings.Cut(rest, "/"); ok && isVersion(seg) {
		rest = after
		if seg == h.version {
			cache = cacheImmutable
		}
	}
	f, ok := h.files["assets/"+rest]
	if !ok || rest == "" {
		http.NotFound(w, r)
		return
	}
	h.serve(w, r, f, cache)
}

// serve writes f with its validators; http.ServeContent answers
// conditional and range requests.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f *file, cache string) {
	hdr := w.Header()
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("Cache-Control", cache)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if f == h.index {
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "no-referrer")
	}
	body, etag := f.body, f.etag
	if f.gz != nil {
		hdr.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) && r.Header.Get("Range") == "" {
			body, etag = f.gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("ETag", etag)
	http.ServeContent(w, r, "", h.modTime, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}

func isAPIPath(p string) bool {
	for _, prefix := range apiPrefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	for _, exact := range apiExact {
		if p == exact || strings.HasPrefix(p, exact+"/") {
			return true
		}
	}
	return false
}

// isVersion reports whether seg looks like an asset version segment.
func isVersion(seg string) bool {
	if len(seg) != 14 || !strings.HasPrefix(seg, "v-") {
		return false
	}
	_, err := hex.DecodeString(seg[2:])
	return err == nil
}

func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}
