// Package roots is the set of trusted root certificates compiled into the
// binary: Mozilla's NSS store, as packaged by
// golang.org/x/crypto/x509roots/fallback. The broker verifies PostgreSQL
// (PG_USE_SSL) and the JWKS endpoint (JWT_JWKS_URL) against it instead of
// the operating system's store, so what is trusted does not depend on the
// image the binary runs in (DECISIONS §5).
//
// Keeping it current means updating that module; govulncheck reports when
// a version is withdrawn.
package roots

import (
	"crypto/x509"
	"sync"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Mozilla returns the pool of the compiled-in roots. It is built once, on
// first use, and shared: callers must not add to it.
func Mozilla() *x509.CertPool { return mozilla() }

var mozilla = sync.OnceValue(func() *x509.CertPool {
	pool := x509.NewCertPool()
	for r := range bundle.Roots() {
		cert, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			// Upstream tests that every root parses; one that does not is
			// left out, which can only trust less.
			continue
		}
		if r.Constraint == nil {
			pool.AddCert(cert)
		} else {
			// Roots the NSS store distrusts after a date keep that limit.
			pool.AddCertWithConstraint(cert, r.Constraint)
		}
	}
	return pool
})
