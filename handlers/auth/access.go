package auth

import (
	"strings"

	"github.com/queenforgo/queen/gen/routes"
)

// Grants is the set of access levels a token passes. The levels are a set,
// not a ladder (SECURITY-REQUIREMENTS JWT-8): read-only and write-only are
// disjoint, and holding both still does not pass a read-write route.
type Grants uint8

// The bits of Grants, one per access level that needs a token.
const (
	GrantReadOnly Grants = 1 << iota
	GrantWriteOnly
	GrantReadWrite
	GrantAdmin
)

// What each role grants. A read-write token also passes write-only routes,
// because JWT-8 lets "write-only, read-write or admin" through WRITE_ONLY: a
// consumer that may pop and ack may also push. A write-only token passes
// nothing else.
const (
	grantsOfAdmin     = GrantReadOnly | GrantWriteOnly | GrantReadWrite | GrantAdmin
	grantsOfReadWrite = GrantReadOnly | GrantWriteOnly | GrantReadWrite
	grantsOfReadOnly  = GrantReadOnly
	grantsOfWriteOnly = GrantWriteOnly
)

// Allows reports whether a token holding g may use a route of this level.
// An unknown level is refused.
func (g Grants) Allows(level routes.Access) bool {
	switch level {
	case routes.Public:
		return true
	case routes.ReadOnly:
		return g&GrantReadOnly != 0
	case routes.WriteOnly:
		return g&GrantWriteOnly != 0
	case routes.ReadWrite:
		return g&GrantReadWrite != 0
	case routes.Admin:
		return g&GrantAdmin != 0
	}
	return false
}

// Classify returns the access level a request needs. rawPath is the
// still-escaped path, r.URL.EscapedPath(), which routes.Match reads exactly as
// the ServeMux does.
//
// An operation of the spec has the level it declares. Outside the spec, the
// health and metrics endpoints, the dashboard shell and the identity routes
// are public (JWT-11: no setting can protect them, nor does any need to);
// everything else, including unknown /api/ paths and dashboard client routes,
// is read-write (JWT-9 "anything else"), so an anonymous client cannot tell a
// missing route from a protected one.
func Classify(method, rawPath string) routes.Access {
	if r, ok := routes.Match(method, rawPath); ok {
		return r.Access
	}
	if publicShell(method, rawPath) {
		return routes.Public
	}
	return routes.ReadWrite
}

// publicShell reports the routes JWT-9 makes public that are served outside
// the spec (the dashboard) or may be later (metrics). They are read-only by
// nature, so only GET and HEAD pass, plus POST /auth/logout.
func publicShell(method, path string) bool {
	switch method {
	case "GET", "HEAD":
		switch path {
		case "/", "/health", "/metrics", "/metrics/prometheus", "/auth/me", "/auth/login":
			return true
		}
		return strings.HasPrefix(path, "/assets/") || strings.HasPrefix(path, "/favicon")
	case "POST":
		return path == "/auth/logout"
	}
	return false
}

// skipped reports whether JWT_SKIP_PATHS lets the path through without a
// token (JWT-10): an entry matches exactly, and an entry longer than "/" that
// ends in "/" also matches as a prefix. The raw path is compared, so an
// escaped spelling of a skipped path still needs a token: the mistake fails
// closed.
func skipped(entries []string, rawPath string) bool {
	for _, e := range entries {
		if rawPath == e || (len(e) > 1 && strings.HasSuffix(e, "/") && strings.HasPrefix(rawPath, e)) {
			return true
		}
	}
	return false
}

// roles maps role names in a token to the grants they carry.
type roles struct {
	claim, arrayClaim                     string
	admin, readWrite, readOnly, writeOnly string
}

// grants returns the union of the grants of every role the claims hold. A
// role is held when the single-value claim is that string or the array claim
// contains it; values of other types are ignored.
func (r roles) grants(claims map[string]any) Grants {
	var g Grants
	add := func(v any) {
		s, ok := v.(string)
		if !ok || s == "" {
			return
		}
		if s == r.admin {
			g |= grantsOfAdmin
		}
		if s == r.readWrite {
			g |= grantsOfReadWrite
		}
		if s == r.readOnly {
			g |= grantsOfReadOnly
		}
		if s == r.writeOnly {
			g |= grantsOfWriteOnly
		}
	}
	add(claims[r.claim])
	if arr, ok := claims[r.arrayClaim].([]any); ok {
		for _, v := range arr {
			add(v)
		}
	}
	return g
}
