// Package route decides which requests the proxy may forward, from the
// generated table of the spec (gen/routes) and nothing else. It fails
// closed: a request is forwardable only when its method and raw path name
// an operation of the spec exactly as written, without any decoding or
// normalisation, and the operation has a class that a credential can reach.
//
// Exactly, because the broker routes the bytes the proxy forwards: a path
// that only matches after the proxy (or the broker, or something between)
// decodes an escape, removes a dot segment or merges slashes could reach an
// operation other than the one classified. Such paths are refused whole
// (PROXY.md §4.6): "%2F", "%5C", "%2E", "%00" or any malformed escape; "//",
// "." and ".." segments; a backslash, control characters, spaces and
// non-ASCII bytes; a path longer than MaxPathBytes; and an escape in a
// literal segment ("/api/v1/p%75sh"). Escapes stay legal inside a parameter
// segment (a queue or partition name), where the broker decodes them as its
// own value.
package route

import (
	"strings"

	"github.com/queenforgo/queen/gen/routes"
)

// MaxPathBytes bounds the raw path. The broker's longest route with names of
// 255 characters stays well under it.
const MaxPathBytes = 2048

// Classify returns the operation a request reaches and whether the proxy
// may forward it to someone holding the right credential. rawPath is the
// request target's path exactly as received (r.URL.EscapedPath() when it
// equals the path part of r.RequestURI). A false answer is always the same
// 404 route_blocked, before any credential is read.
func Classify(method, rawPath string) (routes.Route, bool) {
	if !clean(rawPath) {
		return routes.Route{}, false
	}
	r, ok := routes.Match(method, rawPath)
	if !ok || !literalsExact(r.Path, rawPath) {
		return routes.Route{}, false
	}
	switch r.Proxy {
	case routes.Unclassified, routes.ProxyBlocked, routes.ProxyOperator:
		// Operator routes are for a live operator's session only: Operator
		// names them, and the pipeline admits them for nobody else.
		return routes.Route{}, false
	}
	return r, true
}

// Operator returns the operator route (x-queen-proxy: operator) a request
// reaches, under the same exactness rules as Classify. Only a live
// operator's session on a proxy with QUEEN_PROXY_OPERATOR_ENABLED may reach
// one; for everyone else it is the same 404 as a blocked route.
func Operator(method, rawPath string) (routes.Route, bool) {
	if !clean(rawPath) {
		return routes.Route{}, false
	}
	r, ok := routes.Match(method, rawPath)
	if !ok || !literalsExact(r.Path, rawPath) || r.Proxy != routes.ProxyOperator {
		return routes.Route{}, false
	}
	return r, true
}

// Clean reports whether a raw path is free of everything that could be read
// two ways (the rules of Classify), for paths the proxy forwards outside
// the table: the dashboard's.
func Clean(rawPath string) bool { return clean(rawPath) }

// clean reports whether the raw path is free of everything that could be
// read two ways.
func clean(p string) bool {
	if len(p) == 0 || len(p) > MaxPathBytes || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c <= ' ' || c >= 0x7f || c == '\\':
			return false
		case c == '%':
			if i+2 >= len(p) || unhex(p[i+1]) > 15 || unhex(p[i+2]) > 15 {
				return false
			}
			switch v := unhex(p[i+1])<<4 | unhex(p[i+2]); v {
			case '/', '\\', '.', 0:
				return false
			}
			i += 2
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(p, "//")
}

// literalsExact reports whether every literal segment of the template
// appears in the raw path byte for byte (routes.Match compares literals
// after decoding them, as the broker's router does).
func literalsExact(template, rawPath string) bool {
	want := strings.Split(template, "/")
	got := strings.Split(rawPath, "/")
	if len(want) != len(got) {
		return false
	}
	for i, w := range want {
		if !strings.HasPrefix(w, "{") && w != got[i] {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 16
}
