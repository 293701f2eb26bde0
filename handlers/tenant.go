package handlers

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
)

// Native tenancy (docs/tenancy.md). With Config.Tenancy off every request
// is the default tenant and x-queen-tenant is never read: the middleware
// only removes it. With it on, withTenant resolves the tenant of each
// request once, before anything else runs but authentication, and the
// operations read it from the context: tenant(ctx) for the broker's entry
// points, tenantID(ctx) for the read routes' queries.

// tenantHeader is the header queen-proxy sets (and strips from clients).
const (
	tenantHeader          = "x-queen-tenant"
	canonicalTenantHeader = "X-Queen-Tenant"
)

// The answers of a tenant the request may not have (TEN-3, and the claim
// rule of QUEEN_TENANT_CLAIM).
const (
	errTenantHeader   = "invalid x-queen-tenant header (must be a UUID)"
	errTenantClaim    = "the token's tenant claim is not a UUID"
	errTenantMismatch = "x-queen-tenant does not match the tenant of the token"
)

// requestTenant is a resolved tenant: its canonical name and its UUID.
type requestTenant struct {
	name string
	id   uuid.UUID
	// fromToken: the token's claim fixed it (the identity route says so).
	fromToken bool
}

type tenantKey struct{}

var defaultTenant = requestTenant{name: broker.DefaultTenant, id: uuid.MustParse(broker.DefaultTenant)}

func tenantOf(ctx context.Context) requestTenant {
	if t, ok := ctx.Value(tenantKey{}).(requestTenant); ok {
		return t
	}
	return defaultTenant
}

// tenant is the tenant of a request, as the broker's entry points take it.
func tenant(ctx context.Context) string { return tenantOf(ctx).name }

// tenantID is the tenant of a request, as the read routes' queries take it.
func tenantID(ctx context.Context) uuid.UUID { return tenantOf(ctx).id }

// withTenant resolves the request's tenant, or answers 400 or 403 at once.
// It runs behind authentication (which gives it the token's claim) and in
// front of everything else, so that a request with a bad tenant reads,
// decodes and changes nothing.
func (s *Server) withTenant(next http.Handler) http.Handler {
	if !s.cfg.Tenancy {
		// Never read (TEN-1): not even by the generated decoder, which
		// would refuse a header sent twice.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, sent := r.Header[canonicalTenantHeader]; sent {
				r.Header.Del(canonicalTenantHeader)
			}
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, status, msg := resolveTenant(r)
		if status != 0 {
			writeError(w, status, msg)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
		next.ServeHTTP(w, r)
	})
}

// resolveTenant applies the rules in order: the header's shape (TEN-3: a
// bad one is 400 whatever else holds), then the token's claim, which wins:
// a header naming another tenant is 403, no header takes the claim. A token
// without the claim (or with JWT off) leaves the header's tenant, absent or
// blank meaning the default one.
func resolveTenant(r *http.Request) (requestTenant, int, string) {
	var header string
	switch values := r.Header.Values(tenantHeader); {
	case len(values) > 1:
		// Two tenants for one request: which one a proxy meant is unknown.
		return requestTenant{}, http.StatusBadRequest, errTenantHeader
	case len(values) == 1 && !blank(values[0]):
		n, ok := broker.NormalizeTenant(values[0])
		if !ok {
			return requestTenant{}, http.StatusBadRequest, errTenantHeader
		}
		header = n
	}
	if claim := auth.TenantFrom(r.Context()); !blank(claim) {
		n, ok := broker.NormalizeTenant(claim)
		if !ok {
			return requestTenant{}, http.StatusForbidden, errTenantClaim
		}
		if header != "" && header != n {
			return requestTenant{}, http.StatusForbidden, errTenantMismatch
		}
		return newRequestTenant(n, true), 0, ""
	}
	if header == "" {
		return defaultTenant, 0, ""
	}
	return newRequestTenant(header, false), 0, ""
}

// newRequestTenant makes the tenant of a canonical name (NormalizeTenant's).
func newRequestTenant(name string, fromToken bool) requestTenant {
	if name == broker.DefaultTenant && !fromToken {
		return defaultTenant
	}
	return requestTenant{name: name, id: uuid.MustParse(name), fromToken: fromToken}
}

func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}
