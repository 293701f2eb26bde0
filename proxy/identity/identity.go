// Package identity is the human side of the proxy: who a request's session
// names, and the /auth routes that start and end sessions (PROXY.md §3.3).
//
// A session is a token (proxy/session) in the HttpOnly cookie, or in
// Authorization as a bearer that is not an API key. It is good while its
// signature and expiry hold, its jti is not revoked (revoked_tokens,
// announced to every proxy at once on queen_proxy_inval), and its user
// still exists. It grants nothing by itself: the role on a cluster is
// looked up live (Role), and a live operator is admin everywhere.
package identity

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/clientip"
	"github.com/queenforgo/queen/proxy/session"
	"github.com/queenforgo/queen/proxy/throttle"
)

// BearerTTL is the lifetime of a token from /auth/session-token.
const BearerTTL = 15 * time.Minute

// Why a session is refused. The texts are the answers' (PROXY.md §3.3).
var (
	ErrNoCredential = errors.New("missing bearer credential")
	ErrInvalid      = errors.New("invalid or expired session")
	ErrRevoked      = errors.New("session revoked")
	ErrGone         = errors.New("session no longer valid")
	ErrUnavailable  = errors.New("control plane unavailable")
	ErrNoRole       = errors.New("no role on this cluster")
	ErrWrongCluster = errors.New("token not valid for this cluster")
)

// Config is what New needs.
type Config struct {
	Tokens           *session.Tokens
	Cookie           session.Cookie
	Catalog          *catalog.Catalog // nil without pxdb: nobody can log in
	Pool             *pgxpool.Pool    // pxdb, for logins and logouts
	Throttle         *throttle.Throttle
	Trusted          clientip.Trusted
	RevocationStrict bool // QUEEN_PROXY_REVOCATION_STRICT: refuse when the deny-list cannot be read
	OperatorEnabled  bool // QUEEN_PROXY_OPERATOR_ENABLED
	Timeout          time.Duration
	Logger           *slog.Logger
}

// Identity resolves sessions and serves /auth.
type Identity struct {
	cfg Config
	q   *pxdb.Queries
}

// New returns an Identity.
func New(cfg Config) *Identity {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Throttle == nil {
		cfg.Throttle = throttle.New(throttle.Config{})
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	id := &Identity{cfg: cfg}
	if cfg.Pool != nil {
		id.q = pxdb.New(cfg.Pool)
	}
	return id
}

// Credential is what a request presents: an API key, or a session token.
type Credential struct {
	APIKey     string
	Session    string
	FromCookie bool
}

// None reports whether the request presented nothing.
func (c Credential) None() bool { return c.APIKey == "" && c.Session == "" }

// Credential reads a request's credential (PROXY.md §3.1): Authorization
// first ("Bearer " and one space, or the raw value), a value starting qk_
// being an API key and anything else a session token; else the session
// cookie, where a qk_ value is ignored. On API paths a top-level navigation
// (Sec-Fetch-Mode: navigate) presents no cookie: SameSite=Lax still sends it
// there, and a link must not act with the user's session.
func (id *Identity) Credential(r *http.Request, apiPath bool) Credential {
	if h := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")); h != "" {
		if apikey.IsKey(h) {
			return Credential{APIKey: h}
		}
		return Credential{Session: h}
	}
	if apiPath && strings.EqualFold(r.Header.Get("Sec-Fetch-Mode"), "navigate") {
		return Credential{}
	}
	if v := id.cfg.Cookie.Read(r); v != "" && !apikey.IsKey(v) {
		return Credential{Session: v, FromCookie: true}
	}
	return Credential{}
}

// Human is a live session's user.
type Human struct {
	User     catalog.User
	Claims   session.Claims
	Operator bool // a live operator: is_operator and QUEEN_PROXY_OPERATOR_ENABLED
}

// Authenticate verifies a session token: signature, expiry, the deny-list
// and the user.
func (id *Identity) Authenticate(ctx context.Context, token string) (Human, error) {
	if token == "" {
		return Human{}, ErrNoCredential
	}
	claims, err := id.cfg.Tokens.Verify(token)
	if err != nil {
		id.cfg.Logger.Debug("session refused", "err", err)
		return Human{}, ErrInvalid
	}
	if id.cfg.Catalog == nil {
		return Human{}, ErrGone // no pxdb: no user can be found
	}
	revoked, err := id.cfg.Catalog.Revoked(ctx, claims.JTI)
	switch {
	case err != nil && id.cfg.RevocationStrict:
		return Human{}, ErrUnavailable
	case err != nil:
		// Fail open (QUEEN_PROXY_REVOCATION_STRICT=false): a logout made while
		// pxdb is unreachable on this process stays unknown until it is back.
	case revoked:
		return Human{}, ErrRevoked
	}
	user, err := id.cfg.Catalog.User(ctx, claims.User)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return Human{}, ErrGone
	case err != nil:
		return Human{}, ErrUnavailable
	}
	return Human{User: user, Claims: claims, Operator: user.IsOperator && id.cfg.OperatorEnabled}, nil
}

// Role is h's role on cluster: admin for a live operator, else its row in
// cluster_roles. A token minted for one cluster is good for that one only.
func (id *Identity) Role(ctx context.Context, h Human, cluster uuid.UUID) (string, error) {
	if h.Claims.Cluster != nil && *h.Claims.Cluster != cluster {
		return "", ErrWrongCluster
	}
	if h.Operator {
		return catalog.RoleAdmin, nil
	}
	role, err := id.cfg.Catalog.Role(ctx, h.User.ID, cluster)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return "", ErrNoRole
	case err != nil:
		return "", ErrUnavailable
	}
	return role, nil
}

// Status is the HTTP status of a refusal by Authenticate or Role.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNoRole), errors.Is(err, ErrWrongCluster):
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// OperatorEnabled reports QUEEN_PROXY_OPERATOR_ENABLED.
func (id *Identity) OperatorEnabled() bool { return id.cfg.OperatorEnabled }

// Trusted is the set of proxies whose forwarding headers are believed.
func (id *Identity) Trusted() clientip.Trusted { return id.cfg.Trusted }

// CookieName is the session cookie's name.
func (id *Identity) CookieName() string { return id.cfg.Cookie.Name }
