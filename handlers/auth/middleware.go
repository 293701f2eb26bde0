package auth

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/queenforgo/queen/gen/routes"
)

// Middleware returns next behind authentication. A request reaches next when
// its route is public (Classify), when JWT_SKIP_PATHS lets it through (with
// no identity), or when its token verifies and grants the route's level; a
// verified token's sub is then put in the request context with withSubject,
// which is how pushes record producerSub (JWT-13), and its tenant claim
// (Config.TenantClaim) for TenantFrom. Every other request is
// answered here with JSON {"error": ...} (JWT-15): 401 without a valid token,
// 403 "Insufficient permissions" with one that does not grant the level, 500
// for a server-side key problem.
//
// It must be the outermost layer of the chain, so that a request without a
// token learns nothing from the layers behind it. Tokens are never logged.
func (a *Authenticator) Middleware(next http.Handler, withSubject func(context.Context, string) context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.EscapedPath()
		level := Classify(r.Method, path)
		if level == routes.Public || skipped(a.cfg.SkipPaths, path) {
			next.ServeHTTP(w, r)
			return
		}
		id, err := a.Authenticate(r)
		if err == nil && !id.Grants.Allows(level) {
			err = errForbidden
		}
		if err != nil {
			a.refuse(w, r, level, err)
			return
		}
		if id.Subject != "" && withSubject != nil {
			r = r.WithContext(withSubject(r.Context(), id.Subject))
		}
		if id.Tenant != "" {
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, id.Tenant))
		}
		next.ServeHTTP(w, r)
	})
}

type tenantKey struct{}

// TenantFrom returns the tenant claim (Config.TenantClaim) of the token that
// Middleware verified for this request, as the token has it; "" when the
// token carries none, or the route was public or skipped.
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// refuse answers a request that may not go on.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, level routes.Access, err error) {
	e, ok := err.(*Error)
	if !ok {
		e = errMalformed
	}
	a.log.Debug("request refused", "method", r.Method, "path", r.URL.Path,
		"access", string(level), "status", e.Status, "reason", e.Message)
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": e.Message})
}
