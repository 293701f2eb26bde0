package broker

import (
	"strconv"

	"github.com/google/uuid"
)

// Tenants. A queue is identified by its tenant and its name (QueueKey); the
// entry points take the request's tenant in the canonical form below, which
// the adapter derives from the x-queen-tenant header or the token's claim
// (docs/tenancy.md). A tenant is only a UUID: there is no registry, and the
// broker does not check that it exists.

// defaultTenantID is DefaultTenant parsed once: the hot path of a broker
// without tenancy never parses a tenant.
var defaultTenantID = uuid.MustParse(DefaultTenant)

// NormalizeTenant applies the shape check of an x-queen-tenant value
// (SECURITY-REQUIREMENTS TEN-3): surrounding white space is trimmed, then
// it must be exactly 36 ASCII characters, '-' at 8, 13, 18 and 23 and hex
// digits elsewhere. It returns the lower-cased form, the one every key
// uses, so that upper and lower case name the same tenant. Any other shape
// (braces, no dashes, a urn: prefix, non-ASCII) is refused.
func NormalizeTenant(v string) (string, bool) {
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	if len(v) != 36 {
		return "", false
	}
	var b [36]byte
	for i := 0; i < 36; i++ {
		c := v[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", false
		}
		b[i] = c
	}
	if v == string(b[:]) {
		return v, true // already canonical: no copy
	}
	return string(b[:]), true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// tenantOf resolves an entry point's tenant: "" is the default tenant;
// anything else must already be canonical (NormalizeTenant), so that one
// tenant never has two spellings in the caches and wake-up keys.
func tenantOf(t string) (string, error) {
	if t == "" || t == DefaultTenant {
		return DefaultTenant, nil
	}
	if n, ok := NormalizeTenant(t); !ok || n != t {
		return "", invalid("tenant " + strconv.Quote(t) + " is not a lower-case UUID")
	}
	return t, nil
}

// tenantID resolves a tenant as the tables key it.
func tenantID(t string) (uuid.UUID, error) {
	t, err := tenantOf(t)
	if err != nil {
		return uuid.UUID{}, err
	}
	return tenantUUID(t), nil
}

// tenantUUID is the UUID of a tenant tenantOf accepted.
func tenantUUID(t string) uuid.UUID {
	if t == DefaultTenant {
		return defaultTenantID
	}
	id, err := uuid.Parse(t)
	if err != nil {
		// Unreachable: every tenant inside the broker passed tenantOf. Nil
		// is no tenant's id, so a slip can only find nothing.
		return uuid.Nil
	}
	return id
}
