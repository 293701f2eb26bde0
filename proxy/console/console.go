// Package console is the cluster console of queen-proxy: a page (/console,
// plain ES modules, no build step, like the broker's dashboard) and its API
// (/api/console/*: the cluster's overview and usage for any member; its API
// keys and members for its admins), and the operator API (/api/operator/*).
//
// The proxy gates every request before it gets here (PROXY.md §6.2): the
// cluster, a live human session, the cluster's status, the user's role.
// Every change is one SQL function of pxdb that runs the control-plane
// function and appends the acting user's audit row in the same transaction
// (sql/proxy/migrations/0004_console.up.sql).
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/pxerr"
	"github.com/queenforgo/queen/proxy/reply"
	"github.com/queenforgo/queen/web/uplot"
)

//go:embed static
var static embed.FS

// maxBody bounds a console request body.
const maxBody = 64 << 10

// Config is what New needs.
type Config struct {
	Pool    *pgxpool.Pool
	Timeout time.Duration // PXDB_TIMEOUT_MS
	Logger  *slog.Logger
	NowFunc func() time.Time
}

// Console serves the page and the two APIs.
type Console struct {
	cfg   Config
	q     *pxdb.Queries
	files fs.FS
}

// Request is a gated request: the cluster it is for, the signed-in user,
// the user's role there (admin for a live operator) and whether it is a
// live operator.
type Request struct {
	Cluster  catalog.Cluster
	User     catalog.User
	Role     string
	Operator bool
}

// New returns a Console.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	files, _ := fs.Sub(static, "static")
	return &Console{cfg: cfg, q: pxdb.New(cfg.Pool), files: files}
}

// ServePage serves /console and /console/: the page; /console/assets/*:
// its files; any other /console/ path: the page (a client route).
func (c *Console) ServePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		reply.RouteBlocked(w)
		return
	}
	name := "index.html"
	if rest, ok := strings.CutPrefix(r.URL.Path, "/console/assets/"); ok {
		name = "assets/" + rest
		if !fs.ValidPath(name) || strings.Contains(rest, "..") {
			reply.Error(w, http.StatusNotFound, reply.CodeNotFound, "no such file")
			return
		}
	}
	files := c.files
	if v, ok := strings.CutPrefix(name, "assets/vendor/"); ok {
		// The chart library is the dashboard's copy (web/uplot).
		files, name = uplot.Files, v
	}
	body, err := fs.ReadFile(files, name)
	if err != nil {
		reply.Error(w, http.StatusNotFound, reply.CodeNotFound, "no such file")
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType(name))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if name == "index.html" {
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "+
			"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
	}
	_, _ = w.Write(body)
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "text/plain; charset=utf-8"
}

// ServeAPI routes /api/console/*.
func (c *Console) ServeAPI(w http.ResponseWriter, r *http.Request, req Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/api/console/")
	admin := func() bool {
		if req.Role != catalog.RoleAdmin {
			reply.Error(w, http.StatusForbidden, reply.CodeForbidden, "this needs the admin role on the cluster")
			return false
		}
		return true
	}
	switch {
	case rest == "overview" && r.Method == http.MethodGet:
		c.overview(w, r, req)
	case rest == "usage" && r.Method == http.MethodGet:
		c.usage(w, r, req)
	case rest == "keys" && r.Method == http.MethodGet:
		if admin() {
			c.listKeys(w, r, req)
		}
	case rest == "keys" && r.Method == http.MethodPost:
		if admin() {
			c.issueKey(w, r, req)
		}
	case strings.HasPrefix(rest, "keys/") && r.Method == http.MethodDelete:
		if admin() {
			c.revokeKey(w, r, req, strings.TrimPrefix(rest, "keys/"))
		}
	case rest == "members" && r.Method == http.MethodGet:
		if admin() {
			c.listMembers(w, r, req)
		}
	case rest == "members" && r.Method == http.MethodPost:
		if admin() {
			c.grantMember(w, r, req)
		}
	case rest == "members" && r.Method == http.MethodDelete:
		if admin() {
			c.revokeMember(w, r, req)
		}
	default:
		reply.RouteBlocked(w)
	}
}

// ctx bounds one pxdb call.
func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.Timeout)
}

// decode reads a JSON body into v, refusing unknown fields; a refusal is
// written when it returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		reply.Error(w, http.StatusBadRequest, reply.CodeInvalidRequest, "the body is not the expected JSON: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// dbError answers a failed pxdb call (translated by proxy/pxerr): the SQL
// functions raise not found for what is not there (or not this cluster's:
// the same 404), invalid for bad input and the last-admin guard, conflict
// for an email in use; anything else is pxdb failing.
func (c *Console) dbError(w http.ResponseWriter, err error) {
	err = pxerr.Translate(err)
	switch {
	case errors.Is(err, pxerr.ErrNotFound):
		reply.Error(w, http.StatusNotFound, reply.CodeNotFound, err.Error())
	case errors.Is(err, pxerr.ErrInvalid):
		reply.Error(w, http.StatusBadRequest, reply.CodeInvalidRequest, err.Error())
	case errors.Is(err, pxerr.ErrConflict):
		reply.Error(w, http.StatusConflict, "conflict", "already exists")
	default:
		c.cfg.Logger.Warn("console: pxdb call failed", "err", err)
		reply.Error(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable")
	}
}

// ts renders a time the way the broker does: UTC with Z.
func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func tsPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}
