package identity

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/clientip"
	"github.com/queenforgo/queen/proxy/pxerr"
	"github.com/queenforgo/queen/proxy/reply"
	"github.com/queenforgo/queen/proxy/session"
)

//go:embed login.html
var loginHTML string

var loginPage = template.Must(template.New("login").Parse(loginHTML))

// logo is the Queen mark, inlined into the login page as base64 (its "#"
// colours would end a plain data URL).
var logo = base64.StdEncoding.EncodeToString([]byte(logoSVG))

const logoSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#4b3f9e"/>` +
	`<path d="M6 22 L8 10 L12.5 16 L16 8 L19.5 16 L24 10 L26 22 Z" fill="#f5c542"/><rect x="6" y="23.5" width="20" height="2.5" rx="1" fill="#f5c542"/></svg>`

// maxFormBytes bounds a login form.
const maxFormBytes = 16 << 10

// dummyHash is compared against when the email is unknown or has no
// password, so that such an attempt takes as long as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such user"), bcrypt.DefaultCost)

// ServeHTTP serves /auth/login (GET, POST), /auth/logout (POST),
// /auth/session-token (GET) and /.well-known/jwks.json. /auth/me needs the
// request's cluster and is served by the proxy itself.
func (id *Identity) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/auth/login" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		id.page(w, http.StatusOK, pageData{Next: SafeNext(r.URL.Query().Get("next"))})
	case r.URL.Path == "/auth/login" && r.Method == http.MethodPost:
		id.login(w, r)
	case r.URL.Path == "/auth/logout" && r.Method == http.MethodPost:
		id.logout(w, r)
	case r.URL.Path == "/auth/session-token" && r.Method == http.MethodGet:
		id.sessionToken(w, r)
	case r.URL.Path == "/.well-known/jwks.json" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(id.cfg.Tokens.JWKS())
	default:
		reply.RouteBlocked(w)
	}
}

type pageData struct {
	Logo   string
	Next   string
	Email  string
	Error  string
	Notice string
}

// page renders the login page with status.
func (id *Identity) page(w http.ResponseWriter, status int, d pageData) {
	d.Logo = logo
	switch {
	case id.cfg.Tokens.Mode() == session.ModeVerify:
		d.Notice = "This host verifies sessions but does not sign anyone in. Sign in on the control plane's host."
	case !id.canLogin():
		d.Notice = "Sign-in is not configured on this proxy (it needs pxdb and QUEEN_PROXY_JWT_ED25519_PEM or QUEEN_PROXY_JWT_SECRET)."
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, d)
}

func (id *Identity) canLogin() bool {
	return id.cfg.Tokens.Mode() == session.ModeMint && id.cfg.Catalog != nil && id.q != nil
}

// login checks a form's email and password (POST /auth/login) and, when
// they match, sets the session cookie and sends the browser to next.
func (id *Identity) login(w http.ResponseWriter, r *http.Request) {
	if !id.canLogin() {
		reply.Error(w, http.StatusServiceUnavailable, reply.CodeNotConfigured, "sign-in is not configured on this proxy")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		reply.Error(w, http.StatusBadRequest, reply.CodeInvalidRequest, "the login form could not be read")
		return
	}
	email := strings.ToLower(strings.TrimSpace(r.PostForm.Get("email")))
	next := SafeNext(r.PostForm.Get("next"))
	d := pageData{Next: next, Email: email}
	if retry, ok := id.cfg.Throttle.Attempt(clientip.Bucket(id.cfg.Trusted.ClientIP(r)), email); !ok {
		id.cfg.Logger.Info("login throttled", "retry_after", retry.Round(time.Second))
		if wantsHTML(r) {
			w.Header().Set("Retry-After", reply.RetrySeconds(retry))
			d.Error = "Too many attempts. Wait a moment and try again."
			id.page(w, http.StatusTooManyRequests, d)
			return
		}
		reply.TooMany(w, reply.CodeRateLimited, "too many login attempts", retry)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), id.cfg.Timeout)
	defer cancel()
	user, err := id.q.UserForLogin(ctx, email)
	if err = pxerr.Translate(err); err != nil && !errors.Is(err, pxerr.ErrNotFound) {
		id.cfg.Logger.Warn("login: pxdb lookup failed", "err", err)
		reply.Error(w, http.StatusServiceUnavailable, reply.CodeUnavailable, "control plane unavailable")
		return
	}
	hash := dummyHash
	if err == nil && user.PasswordHash != nil {
		hash = []byte(*user.PasswordHash)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(r.PostForm.Get("password"))) != nil || err != nil || user.PasswordHash == nil {
		id.cfg.Throttle.Failed(email)
		d.Error = "Invalid email or password."
		id.page(w, http.StatusUnauthorized, d)
		return
	}
	id.cfg.Throttle.Succeeded(email)
	token, _, err := id.cfg.Tokens.Mint(user.ID, catalog.RoleViewer, nil, id.cfg.Cookie.TTL)
	if err != nil {
		id.cfg.Logger.Error("login: minting a session failed", "err", err)
		reply.Error(w, http.StatusInternalServerError, "internal", "could not start a session")
		return
	}
	// A fresh deadline: the one above also covered the bcrypt comparison,
	// which may have used most of it on a busy machine, and the audit row
	// must not be lost to the CPU's slowness.
	rctx, rcancel := context.WithTimeout(r.Context(), id.cfg.Timeout)
	defer rcancel()
	if err := id.q.UserLoginRecord(rctx, user.ID); err != nil {
		// The login stands; its audit row and last_login_at are lost.
		id.cfg.Logger.Warn("login: recording the login failed", "err", err, "user_id", user.ID)
	}
	id.cfg.Cookie.Set(w, token, id.cfg.Trusted.Secure(r))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout revokes the cookie's session for every proxy (revoke_session
// announces it) and clears the cookie. It always answers {"ok": true}.
func (id *Identity) logout(w http.ResponseWriter, r *http.Request) {
	if raw := id.cfg.Cookie.Read(r); raw != "" && id.cfg.Catalog != nil && id.q != nil {
		if c, err := id.cfg.Tokens.Verify(raw); err == nil {
			id.cfg.Catalog.MarkRevoked(c.JTI)
			ctx, cancel := context.WithTimeout(r.Context(), id.cfg.Timeout)
			_, err := id.q.RevokedTokenAdd(ctx, pxdb.RevokedTokenAddParams{Jti: c.JTI, ExpiresAt: c.Expires, UserID: c.User})
			cancel()
			if err != nil {
				id.cfg.Logger.Warn("logout: recording the revocation failed; only this proxy refuses the session", "err", err, "user_id", c.User)
			}
		}
	}
	id.cfg.Cookie.Clear(w, id.cfg.Trusted.Secure(r))
	writeJSON(w, map[string]bool{"ok": true})
}

// sessionToken mints a short bearer for the cookie's live session, for
// scripts and SDKs started from a signed-in browser. It is not on the
// deny-list: a logout does not end one already handed out.
func (id *Identity) sessionToken(w http.ResponseWriter, r *http.Request) {
	if id.cfg.Tokens.Mode() != session.ModeMint {
		reply.Error(w, http.StatusServiceUnavailable, reply.CodeNotConfigured, "this proxy does not sign sessions")
		return
	}
	h, err := id.Authenticate(r.Context(), id.cfg.Cookie.Read(r))
	if err != nil {
		reply.Error(w, Status(err), reply.CodeUnauthorized, err.Error())
		return
	}
	token, _, err := id.cfg.Tokens.Mint(h.User.ID, catalog.RoleViewer, h.Claims.Cluster, BearerTTL)
	if err != nil {
		reply.Error(w, http.StatusInternalServerError, "internal", "could not mint a token")
		return
	}
	writeJSON(w, map[string]any{"token": token, "expires_in": int(BearerTTL / time.Second)})
}

func writeJSON(w http.ResponseWriter, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

func wantsHTML(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") }

// SafeNext returns next when it is a path on this origin, and "/" for
// anything that could send the browser elsewhere: it must start with one
// "/" (not "//" nor "/\"), hold no backslash, no control character or
// space and no "://", and still start with one "/" once percent-decoded.
func SafeNext(next string) string {
	ok := strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") &&
		!strings.ContainsAny(next, "\\ ") && !strings.Contains(next, "://")
	for i := 0; ok && i < len(next); i++ {
		ok = next[i] >= 0x21 && next[i] < 0x7f
	}
	if ok {
		decoded, err := url.PathUnescape(next)
		ok = err == nil && !strings.HasPrefix(decoded, "//") && !strings.ContainsAny(decoded, "\\\x00\t\r\n")
	}
	if ok {
		u, err := url.Parse(next)
		ok = err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
	}
	if !ok {
		return "/"
	}
	return next
}
