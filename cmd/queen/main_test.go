package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/handlers/auth"
)

func loadEnv(t *testing.T, m map[string]string) config.Config {
	t.Helper()
	c, err := config.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	return c
}

// Off means no authenticator at all (JWT-14).
func TestNewAuthenticatorOff(t *testing.T) {
	t.Parallel()
	a, err := newAuthenticator(loadEnv(t, map[string]string{"JWT_SECRET": "s"}).Auth, config.Tenancy{}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Nil(t, a)
}

// Every JWT variable reaches the authenticator.
func TestNewAuthenticatorWiring(t *testing.T) {
	t.Parallel()
	c := loadEnv(t, map[string]string{
		"JWT_ENABLED": "true", "JWT_SECRET": "wiring-secret", "JWT_ISSUER": "https://idp", "JWT_AUDIENCE": "queen",
		"JWT_ROLES_ARRAY_CLAIM": "groups", "JWT_ROLE_WRITE_ONLY": "producers",
	})
	a, err := newAuthenticator(c.Auth, c.Tenancy, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NotNil(t, a)
	sign := func(claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("wiring-secret"))
		require.NoError(t, err)
		return s
	}
	id, err := a.ParseToken(t.Context(), sign(jwt.MapClaims{"sub": "p", "iss": "https://idp", "aud": "queen", "groups": []string{"producers"}}))
	require.NoError(t, err)
	require.Equal(t, auth.Identity{Subject: "p", Grants: auth.GrantWriteOnly}, id)
	_, err = a.ParseToken(t.Context(), sign(jwt.MapClaims{"iss": "https://idp"}))
	require.EqualError(t, err, "Invalid token audience")
}

// JWT-1: a bad auth configuration stops the boot, before any listener, with
// one line per problem naming the variable.
func TestNewAuthenticatorRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"JWT_ENABLED": "1", "JWT_ALGORITHM": "ES256", "JWT_SECRET": "s"}, "JWT_ALGORITHM: "},
		{map[string]string{"JWT_ENABLED": "1"}, "JWT_SECRET: no key material"},
		{map[string]string{"JWT_ENABLED": "1", "JWT_ALGORITHM": "RS256"}, "JWT_PUBLIC_KEY: no key material"},
		{map[string]string{"JWT_ENABLED": "1", "JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "x"}, "JWT_PUBLIC_KEY: "},
	} {
		_, err := newAuthenticator(loadEnv(t, tc.env).Auth, config.Tenancy{}, slog.New(slog.DiscardHandler))
		require.Error(t, err)
		for _, line := range strings.Split(err.Error(), "\n") {
			require.True(t, strings.HasPrefix(line, "JWT_"), line)
		}
		require.Contains(t, err.Error(), tc.want)
	}
}

func TestRunExitsOnBadAuthConfig(t *testing.T) {
	t.Setenv("JWT_ENABLED", "true")
	t.Setenv("JWT_ALGORITHM", "hs256")
	require.Equal(t, 2, run())
}
