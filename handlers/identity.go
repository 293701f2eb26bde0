package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
)

// The identity routes (SECURITY-REQUIREMENTS JWT-12) are public in the spec:
// they describe the caller instead of being guarded. The dashboard boots from
// GET /auth/me and derives what it shows from the answer.

const (
	// actClusterHeader is echoed so that the identity has the shape
	// queen-proxy gives it; the broker ignores the header.
	actClusterHeader = "x-queen-act-cluster"
)

// The broker roles of the identity, strongest first, and the auth modes.
const (
	roleAdmin     = "admin"
	roleReadWrite = "read-write"
	roleReadOnly  = "read-only"
	roleWriteOnly = "write-only"
	roleNone      = "none"

	authOff = "off"
	authJWT = "jwt"
)

type authorizationKey struct{}

// withAuthorization passes the Authorization header of GET /auth/me to its
// strict handler, which sees a context but not the request: the route is
// public, so the handler reads the token itself. Other routes are left
// alone (no allocation on the hot path).
func withAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/auth/me" {
			next.ServeHTTP(w, r)
			return
		}
		if h := r.Header.Get("Authorization"); h != "" {
			r = r.WithContext(context.WithValue(r.Context(), authorizationKey{}, h))
		}
		next.ServeHTTP(w, r)
	})
}

func authorizationFrom(ctx context.Context) string {
	h, _ := ctx.Value(authorizationKey{}).(string)
	return h
}

// GetIdentity answers who the caller is: the standalone admin with JWT off,
// the bearer token's identity with JWT on, or 401 auth_required.
func (s *Server) GetIdentity(ctx context.Context, _ api.GetIdentityRequestObject) (api.GetIdentityResponseObject, error) {
	if s.cfg.Auth == nil {
		id := s.identity(ctx, "standalone", roleAdmin, authOff)
		id.Roles, id.Access = grantsView(auth.GrantReadOnly | auth.GrantWriteOnly | auth.GrantReadWrite | auth.GrantAdmin)
		return api.GetIdentity200JSONResponse(id), nil
	}
	who, err := s.cfg.Auth.AuthenticateHeader(ctx, authorizationFrom(ctx))
	if err != nil {
		var e *auth.Error
		if errors.As(err, &e) && e.Status >= http.StatusInternalServerError {
			// A key problem on our side (JWT-5), not the caller's.
			return nil, err
		}
		// One answer for "no token" and "bad token", as the reference
		// gives: the dashboard only needs to know it is signed out.
		return api.GetIdentity401JSONResponse{Error: "auth_required", Code: api.AuthRequiredCodeAuthRequired}, nil
	}
	roles, access := grantsView(who.Grants)
	role := roleNone
	if len(roles) > 0 {
		role = roles[0]
	}
	id := s.identity(ctx, who.Subject, role, authJWT)
	id.Roles, id.Access = roles, access
	if s.cfg.Tenancy && !blank(who.Tenant) {
		// The route is public, so withTenant saw no token: the claim is
		// applied here, as it would be on any guarded route.
		t, ok := broker.NormalizeTenant(who.Tenant)
		if !ok {
			return api.GetIdentity401JSONResponse{Error: "auth_required", Code: api.AuthRequiredCodeAuthRequired}, nil
		}
		id.TenantId, id.TenantFromToken, id.Clusters[0].TenantId = t, true, t
	}
	if who.Subject != "" {
		id.Sub = ptr(who.Subject)
	}
	return api.GetIdentity200JSONResponse(id), nil
}

// identity fills the reference's standalone shape: one synthetic cluster,
// "local", under the request's tenant, served by this broker.
func (s *Server) identity(ctx context.Context, user, role, mode string) api.Identity {
	cell := s.cfg.ServerID
	if cell == "" {
		cell = "local"
	}
	admin := role == roleAdmin
	t := tenantOf(ctx)
	return api.Identity{
		UserId:          user,
		TenantSlug:      "local",
		IsOperator:      admin,
		OperatorEnabled: admin,
		OperatorLive:    admin,
		ActingCluster:   api.IdentityClusterRef{Id: "local", Slug: "local"},
		Clusters: []api.IdentityCluster{{
			Id: "local", Slug: "local", Role: role, TenantSlug: "local",
			TenantId: t.name, Status: "active", CellSlug: cell,
		}},
		ActClusterHeader: actClusterHeader,
		Role:             role,
		Standalone:       true,
		Auth:             mode,
		Roles:            []string{},
		Access:           []string{},
		Tenancy:          s.cfg.Tenancy,
		TenantId:         t.name,
		TenantFromToken:  t.fromToken,
	}
}

// grantsView names what a token's grants amount to: the broker roles, the
// strongest first and none implied by another, and the access levels passed.
func grantsView(g auth.Grants) (roles, access []string) {
	roles = []string{}
	switch {
	case g&auth.GrantAdmin != 0:
		roles = append(roles, roleAdmin)
	case g&auth.GrantReadWrite != 0:
		roles = append(roles, roleReadWrite)
	default:
		if g&auth.GrantReadOnly != 0 {
			roles = append(roles, roleReadOnly)
		}
		if g&auth.GrantWriteOnly != 0 {
			roles = append(roles, roleWriteOnly)
		}
	}
	access = []string{}
	for _, level := range []routes.Access{routes.ReadOnly, routes.WriteOnly, routes.ReadWrite, routes.Admin} {
		if g.Allows(level) {
			access = append(access, string(level))
		}
	}
	return roles, access
}

// GetLoginPage sends the dashboard home with JWT off, and explains with JWT
// on that the broker has nothing to sign in to.
func (s *Server) GetLoginPage(context.Context, api.GetLoginPageRequestObject) (api.GetLoginPageResponseObject, error) {
	if s.cfg.Auth == nil {
		return api.GetLoginPage303Response{Headers: api.GetLoginPage303ResponseHeaders{Location: "/"}}, nil
	}
	return api.GetLoginPage200TexthtmlResponse{Body: strings.NewReader(loginPage), ContentLength: int64(len(loginPage))}, nil
}

// EndSession is a no-op: the broker holds no sessions.
func (s *Server) EndSession(context.Context, api.EndSessionRequestObject) (api.EndSessionResponseObject, error) {
	return api.EndSession200JSONResponse{Ok: true}, nil
}

// loginPage is served with JWT on. It is self-contained (no assets): with
// JWT on, anything else it could load would need a token.
const loginPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Queen: authentication required</title>
<style>
  body { margin: 0; min-height: 100vh; display: grid; place-items: center;
         font: 15px/1.6 system-ui, sans-serif; background: #111317; color: #e6e4e0; }
  main { max-width: 34rem; padding: 2rem 1.5rem; text-align: center; }
  h1 { font-size: 1.15rem; margin: 0 0 .75rem; }
  p { margin: 0 0 .75rem; color: #b6b3ad; }
  code { background: #1c1f25; border-radius: 4px; padding: .1em .35em; color: #e6e4e0; }
</style>
</head>
<body>
<main>
  <h1>This broker requires authentication</h1>
  <p>JWT authentication is on (<code>JWT_ENABLED=true</code>). The API accepts bearer tokens,
     but the broker keeps no user accounts and no browser sessions, so there is nothing to
     sign in to here.</p>
  <p>To use the dashboard, put <code>queen-proxy</code> in front of the broker: it owns
     sign-in and sessions. Or run the broker with authentication off, on a network you trust.</p>
</main>
</body>
</html>
`
