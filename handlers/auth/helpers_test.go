package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Unix(1_700_000_000, 0)

const testSecret = "0123456789abcdef0123456789abcdef"

// Keys are generated once per test binary: RSA generation is slow.
var (
	rsaKeyA = sync.OnceValue(func() *rsa.PrivateKey { return genRSA() })
	rsaKeyB = sync.OnceValue(func() *rsa.PrivateKey { return genRSA() })
	edKey   = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	ecKey = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func genRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// clock is an injected, manually advanced time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newAuth builds an Authenticator at t0 unless cfg has its own clock.
func newAuth(t testing.TB, cfg Config) *Authenticator {
	t.Helper()
	if cfg.NowFunc == nil {
		cfg.NowFunc = func() time.Time { return t0 }
	}
	a, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	return a
}

// sign makes a token; a non-empty kid goes in the header.
func sign(t testing.TB, m jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func hs256(t testing.TB, claims jwt.MapClaims) string {
	return sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims)
}

// unsigned builds a token from a raw header and claims with an empty
// signature, e.g. alg "none".
func unsigned(header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "."
}

func pemOf(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// jwkRSA and jwkEd render JWKS entries.
func jwkRSA(kid string, k *rsa.PublicKey) map[string]any {
	enc := base64.RawURLEncoding.EncodeToString
	m := map[string]any{"kty": "RSA", "n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes()), "use": "sig"}
	if kid != "" {
		m["kid"] = kid
	}
	return m
}

func jwkEd(kid string, k ed25519.PublicKey) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": base64.RawURLEncoding.EncodeToString(k)}
}

func jwksDoc(t testing.TB, keys ...map[string]any) []byte {
	t.Helper()
	if keys == nil {
		keys = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	require.NoError(t, err)
	return b
}

// logBuffer is a logger whose output the test can read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// requireRefused asserts that err is the refusal with this status and message.
func requireRefused(t testing.TB, err error, status int, msg string) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.Status, "%s", e.Message)
	require.Equal(t, msg, e.Message)
}
