package config

import (
	"log/slog"
	"strings"
)

// Tenancy holds native tenancy (docs/tenancy.md, SECURITY-REQUIREMENTS §9).
type Tenancy struct {
	// Header is QUEEN_TENANCY_HEADER: read each request's tenant from
	// x-queen-tenant. Off, every request is the default tenant.
	Header bool
	// TrustedProxy is QUEEN_TENANCY_TRUSTED_PROXY (or the reference's
	// QUEEN_KV_TRUSTED_PROXY): the operator's statement that only a proxy
	// that sets the header itself reaches the broker. Header needs it.
	TrustedProxy bool
	// Claim is QUEEN_TENANT_CLAIM: the JWT claim that fixes a token's
	// tenant; empty reads none. Needs JWT_ENABLED and Header.
	Claim string
}

// tenancy reads the tenancy variables. The interlocks fail the boot rather
// than warn: each refused combination is one where the operator believes
// tenants are kept apart and they would not be.
func (l *loader) tenancy(jwt bool) Tenancy {
	t := Tenancy{
		Header:       l.boolean("QUEEN_TENANCY_HEADER", false),
		TrustedProxy: l.trustedProxy(),
		Claim:        strings.TrimSpace(l.str("QUEEN_TENANT_CLAIM", "")),
	}
	if t.Header && !t.TrustedProxy {
		l.fail("QUEEN_TENANCY_HEADER", "is on but QUEEN_TENANCY_TRUSTED_PROXY is not true: x-queen-tenant "+
			"is not authenticated, so any caller that reaches the port could act as any tenant; put a proxy "+
			"that sets the header itself (queen-proxy) in front, then set QUEEN_TENANCY_TRUSTED_PROXY=true")
	}
	if t.Claim != "" {
		switch {
		case !jwt:
			l.fail("QUEEN_TENANT_CLAIM", "is set but JWT_ENABLED is off: there is no token to read the claim from")
		case !t.Header:
			// Ignoring it would leave tokens the operator means to bind to
			// a tenant free to act on the default one.
			l.fail("QUEEN_TENANT_CLAIM", "is set but QUEEN_TENANCY_HEADER is off: every request is the default "+
				"tenant and the claim would bind nothing; turn tenancy on or unset it")
		}
	}
	return t
}

// trustedProxy reads QUEEN_TENANCY_TRUSTED_PROXY, or the reference's name
// for it, QUEEN_KV_TRUSTED_PROXY, when only that one is set. Both set must
// agree.
func (l *loader) trustedProxy() bool {
	const name, legacy = "QUEEN_TENANCY_TRUSTED_PROXY", "QUEEN_KV_TRUSTED_PROXY"
	_, set := l.trimmed(name)
	_, legacySet := l.trimmed(legacy)
	v := l.boolean(name, false)
	if !legacySet {
		return v
	}
	old := l.boolean(legacy, false)
	if set && old != v {
		l.fail(legacy, "is the reference's name of %s and disagrees with it; unset one of them", name)
	}
	return v || (!set && old)
}

func (t Tenancy) summary() []slog.Attr {
	return []slog.Attr{
		slog.Bool("header", t.Header),
		slog.Bool("trusted_proxy", t.TrustedProxy),
		slog.String("tenant_claim", t.Claim),
	}
}
