package roots

import (
	"crypto/x509"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The pool holds every root of the bundle, and only those: a well-known
// public root is in it, and it is built once.
func TestMozillaPool(t *testing.T) {
	t.Parallel()
	n := 0
	var isrg *x509.Certificate
	for r := range bundle.Roots() {
		n++
		cert, err := x509.ParseCertificate(r.Certificate)
		require.NoError(t, err)
		if cert.Subject.CommonName == "ISRG Root X1" {
			isrg = cert
		}
	}
	require.Greater(t, n, 100)
	require.NotNil(t, isrg, "Let's Encrypt's root is in the bundle")

	pool := Mozilla()
	require.Same(t, pool, Mozilla())
	require.Len(t, pool.Subjects(), n) //nolint:staticcheck // SA1019: a pool of our own roots, not the system pool the deprecation is about
	_, err := isrg.Verify(x509.VerifyOptions{Roots: pool})
	require.NoError(t, err, "a bundled root verifies against the pool")
}
