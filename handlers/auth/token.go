package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Error is a refusal: the HTTP status and the message the client reads.
// Messages are fixed strings that never echo the token; the ones that tell
// which claim failed are only given once the signature has been verified.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// The refusals (JWT-3..JWT-8, JWT-15).
var (
	errMissing        = &Error{http.StatusUnauthorized, "Authentication required"}
	errMalformed      = &Error{http.StatusUnauthorized, "Malformed token"}
	errBadHeader      = &Error{http.StatusUnauthorized, "Bad token header"}
	errUnsupportedAlg = &Error{http.StatusUnauthorized, "Unsupported token algorithm"}
	errUnknownKID     = &Error{http.StatusUnauthorized, "Unknown key ID"}
	errSignature      = &Error{http.StatusUnauthorized, "Invalid token signature"}
	errClaims         = &Error{http.StatusUnauthorized, "Invalid token claims"}
	errExpired        = &Error{http.StatusUnauthorized, "Token has expired"}
	errNotYetValid    = &Error{http.StatusUnauthorized, "Token not yet valid"}
	errFutureIssued   = &Error{http.StatusUnauthorized, "Token issued in the future"}
	errIssuer         = &Error{http.StatusUnauthorized, "Invalid token issuer"}
	errAudience       = &Error{http.StatusUnauthorized, "Invalid token audience"}
	errForbidden      = &Error{http.StatusForbidden, "Insufficient permissions"}

	// Server-side key problems (JWT-5), reachable only with JWT_ALGORITHM=auto
	// when a token's family has no key configured.
	errNoSecret = &Error{http.StatusInternalServerError, "HS secret not configured"}
	errNoRSAKey = &Error{http.StatusInternalServerError, "invalid RSA public key PEM"}
	errNoEdKey  = &Error{http.StatusInternalServerError, "invalid Ed public key PEM"}
)

// Identity is who a verified token says the caller is.
type Identity struct {
	Subject string // the sub claim; empty when absent
	Grants  Grants // what the token's roles allow
	// Tenant is the Config.TenantClaim claim as the token has it, not
	// checked for shape; empty when absent or no claim is configured.
	Tenant string
}

// Authenticate verifies the request's token and returns its identity. The
// error is always an *Error.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	return a.AuthenticateHeader(r.Context(), r.Header.Get("Authorization"))
}

// AuthenticateHeader is Authenticate given the Authorization header's value,
// for handlers that see the header but not the request (GET /auth/me).
func (a *Authenticator) AuthenticateHeader(ctx context.Context, authorization string) (Identity, error) {
	raw, ok := bearer(authorization)
	if !ok {
		return Identity{}, errMissing
	}
	return a.ParseToken(ctx, raw)
}

// bearer extracts the token (JWT-3): a case-insensitive "Bearer " prefix is
// stripped, and a value without it is taken whole, for bare-token clients.
// An empty or non-ASCII value counts as no token.
func bearer(h string) (string, bool) {
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", false
		}
	}
	if len(h) >= 7 && strings.EqualFold(h[:7], "bearer ") {
		h = h[7:]
	}
	h = strings.TrimSpace(h)
	return h, h != ""
}

// ParseToken verifies a raw token: algorithm within JWT_ALGORITHM before any
// key lookup, signature, then the claims. The error is always an *Error.
func (a *Authenticator) ParseToken(ctx context.Context, raw string) (Identity, error) {
	head, _, ok := strings.Cut(raw, ".")
	if !ok || strings.Count(raw, ".") != 2 {
		return Identity{}, errMalformed
	}
	alg, kid, err := readHeader(head)
	if err != nil {
		return Identity{}, err
	}
	if !a.algs[alg] {
		return Identity{}, errUnsupportedAlg
	}
	key, err := a.key(ctx, alg, kid)
	if err != nil {
		return Identity{}, err
	}
	claims := jwt.MapClaims{}
	_, err = a.parsers[alg].ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return key, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Identity{}, errSignature
	case err != nil:
		return Identity{}, errMalformed
	}
	if err := a.checkClaims(claims); err != nil {
		return Identity{}, err
	}
	var sub, tenant string
	if v, present := claims["sub"]; present {
		if sub, ok = v.(string); !ok {
			return Identity{}, errClaims
		}
	}
	if a.cfg.TenantClaim != "" {
		if v, present := claims[a.cfg.TenantClaim]; present {
			// A tenant binding that is not a string cannot be honoured, and
			// ignoring it would unbind the token: refuse the token.
			if tenant, ok = v.(string); !ok {
				return Identity{}, errClaims
			}
		}
	}
	return Identity{Subject: sub, Grants: a.roles.grants(claims), Tenant: tenant}, nil
}

// readHeader decodes the JOSE header the way the JWT library does (strict
// base64url, JSON object) and returns its alg and kid. "none" and an alg or
// kid that is not a string are a bad header (JWT-4).
func readHeader(seg string) (alg, kid string, err error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return "", "", errBadHeader
	}
	var h map[string]any
	if json.Unmarshal(b, &h) != nil {
		return "", "", errBadHeader
	}
	alg, ok := h["alg"].(string)
	if !ok || strings.EqualFold(alg, "none") {
		return "", "", errBadHeader
	}
	if v, present := h["kid"]; present {
		if kid, ok = v.(string); !ok {
			return "", "", errBadHeader
		}
	}
	return alg, kid, nil
}

// key selects the verification key of a token (JWT-5): the secret for HS*,
// otherwise JWT_PUBLIC_KEY when set, else the JWKS by kid.
func (a *Authenticator) key(ctx context.Context, alg, kid string) (any, error) {
	switch {
	case strings.HasPrefix(alg, "HS"):
		if a.secret == nil {
			a.log.Error("HS token received but JWT_SECRET is not set", "alg", alg)
			return nil, errNoSecret
		}
		return a.secret, nil
	case a.static && alg == "EdDSA":
		if a.edKey == nil {
			a.log.Error("EdDSA token received but JWT_PUBLIC_KEY is not an Ed25519 key")
			return nil, errNoEdKey
		}
		return a.edKey, nil
	case a.static:
		if a.rsaKey == nil {
			a.log.Error("RSA token received but JWT_PUBLIC_KEY is not an RSA key", "alg", alg)
			return nil, errNoRSAKey
		}
		return a.rsaKey, nil
	case a.jwks != nil:
		k, ok := a.jwks.key(ctx, kid)
		if !ok {
			return nil, errUnknownKID
		}
		if k.alg != "" && k.alg != alg {
			// The key is published for another algorithm (RFC 7517 §4.4).
			return nil, errSignature
		}
		return k.key, nil
	}
	// auto with only a secret: asymmetric tokens have no key.
	return nil, errUnsupportedAlg
}

// checkClaims applies the time, issuer and audience rules (JWT-7). Time
// claims must be integers when present; the clock skew widens every window.
func (a *Authenticator) checkClaims(c jwt.MapClaims) error {
	now := a.now().Unix()
	skew := int64(a.cfg.ClockSkew / time.Second)
	for _, check := range []struct {
		name   string
		reject func(v int64) bool
		err    *Error
	}{
		{"exp", func(exp int64) bool { return now-skew > exp }, errExpired},
		{"nbf", func(nbf int64) bool { return nbf > now+skew }, errNotYetValid},
		{"iat", func(iat int64) bool { return iat > now+skew }, errFutureIssued},
	} {
		v, present := c[check.name]
		if !present {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return errClaims
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return errClaims
		}
		if check.reject(i) {
			return check.err
		}
	}
	if a.cfg.Issuer != "" {
		if iss, _ := c["iss"].(string); iss != a.cfg.Issuer {
			return errIssuer
		}
	}
	if a.cfg.Audience != "" && !hasAudience(c["aud"], a.cfg.Audience) {
		return errAudience
	}
	return nil
}

// hasAudience reports whether aud, a string or an array of strings, holds want.
func hasAudience(aud any, want string) bool {
	switch v := aud.(type) {
	case string:
		return v == want
	case []any:
		for _, s := range v {
			if s == want {
				return true
			}
		}
	}
	return false
}
