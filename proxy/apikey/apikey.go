// Package apikey is the cluster API key: its format, how it is stored, and
// what its scopes let it reach.
//
// A key is "qk_<env>_" followed by 43 base64url characters (32 bytes from
// the operating system's CSPRNG). It is shown once; pxdb stores only the
// lowercase hex SHA-256 of the whole string, and a presented key is found by
// hashing it and looking the hash up (an indexed equality, so there is no
// string comparison to time).
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/queenforgo/queen/gen/routes"
)

// Prefix starts every key; a bearer without it is not a key.
const Prefix = "qk_"

// The scopes a key may hold.
const (
	ScopeProduce = "produce"
	ScopeConsume = "consume"
	ScopeAdmin   = "admin"
	ScopeRead    = "read"
)

var envRe = regexp.MustCompile(`^[a-z0-9]+$`)

// Generate returns a new key for env ("live", "test", ...) and its stored
// hash.
func Generate(env string) (key, hash string, err error) {
	if !envRe.MatchString(env) {
		return "", "", fmt.Errorf("key environment %q: want lowercase letters and digits", env)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	key = Prefix + env + "_" + base64.RawURLEncoding.EncodeToString(b[:])
	return key, Hash(key), nil
}

// Hash is the stored form of a key: the lowercase hex SHA-256 of the whole
// string.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// IsKey reports whether a bearer credential is an API key rather than a
// session token.
func IsKey(credential string) bool { return strings.HasPrefix(credential, Prefix) }

// Permits reports whether a key holding scopes may reach a route of class c
// (PROXY.md §4.1). Operator and blocked routes are never reachable with a
// key, and neither is an unclassified one.
func Permits(scopes []string, c routes.ProxyClass) bool {
	has := func(s string) bool { return slices.Contains(scopes, s) }
	switch c {
	case routes.ProxyProduce:
		return has(ScopeProduce)
	case routes.ProxyConsume:
		return has(ScopeConsume)
	case routes.ProxyQueueAdmin:
		return has(ScopeAdmin)
	case routes.ProxyRead:
		return has(ScopeRead) || has(ScopeAdmin)
	case routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed:
		return has(ScopeProduce) || has(ScopeConsume)
	case routes.ProxyGatedRead:
		return len(scopes) > 0
	}
	return false
}
