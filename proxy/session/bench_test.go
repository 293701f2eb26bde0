package session_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/session"
)

// What verifying a session costs each request that carries one (numbers in
// docs/benchmarks.md).
func BenchmarkVerify(b *testing.B) {
	priv, _, _ := keyPEMs(b)
	for _, c := range []struct {
		name string
		cfg  session.Config
	}{
		{"EdDSA", session.Config{Ed25519PEM: priv, Issuer: "queen-proxy"}},
		{"HS256", session.Config{Secret: "a secret of some length", Issuer: "queen-proxy"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tokens, err := session.New(c.cfg)
			require.NoError(b, err)
			tok, _, err := tokens.Mint(uuid.New(), "viewer", nil, time.Hour)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tokens.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
