package session_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/session"
)

func keyPEMs(t testing.TB) (priv, pub string, key ed25519.PrivateKey) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(pk)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})), sk
}

var now = time.Unix(1_800_000_000, 0)

func clock() time.Time { return now }

func TestMintVerifyEdDSA(t *testing.T) {
	t.Parallel()
	priv, pub, sk := keyPEMs(t)
	minter, err := session.New(session.Config{Ed25519PEM: priv, Issuer: "queen-proxy", NowFunc: clock})
	require.NoError(t, err)
	require.Equal(t, session.ModeMint, minter.Mode())
	require.Equal(t, "EdDSA", minter.Algorithm())
	user, cluster := uuid.New(), uuid.New()
	tok, minted, err := minter.Mint(user, "viewer", &cluster, time.Hour)
	require.NoError(t, err)
	_, err = uuid.Parse(minted.JTI)
	require.NoError(t, err)

	// A verify-only proxy with the public key accepts it.
	verifier, err := session.New(session.Config{Ed25519PubPEM: pub, Issuer: "queen-proxy", NowFunc: clock})
	require.NoError(t, err)
	require.Equal(t, session.ModeVerify, verifier.Mode())
	for _, v := range []*session.Tokens{minter, verifier} {
		c, err := v.Verify(tok)
		require.NoError(t, err)
		require.Equal(t, user, c.User)
		require.Equal(t, minted.JTI, c.JTI)
		require.Equal(t, cluster, *c.Cluster)
		require.Equal(t, now.Add(time.Hour), c.Expires)
	}
	_, _, err = verifier.Mint(user, "viewer", nil, time.Hour)
	require.Error(t, err, "a verify-only proxy cannot mint")

	// The JWKS publishes the key under its kid.
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(minter.JWKS(), &doc))
	require.Len(t, doc.Keys, 1)
	raw := sk.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(raw)
	require.Equal(t, map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(raw),
		"kid": hex.EncodeToString(sum[:16]), "alg": "EdDSA", "use": "sig"}, doc.Keys[0])
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, doc.Keys[0]["kid"], parsed.Header["kid"])
}

func TestHS256AndPrecedence(t *testing.T) {
	t.Parallel()
	priv, pub, _ := keyPEMs(t)
	hs, err := session.New(session.Config{Secret: "s3cret", Ed25519PubPEM: pub, Issuer: "queen-proxy", NowFunc: clock})
	require.NoError(t, err)
	require.Equal(t, "HS256", hs.Algorithm())
	require.Equal(t, "QUEEN_PROXY_JWT_ED25519_PUB_PEM", hs.Ignored, "a public key beside a secret is ignored")
	require.JSONEq(t, `{"keys":[]}`, string(hs.JWKS()), "an HS256 secret is never published")
	tok, _, err := hs.Mint(uuid.New(), "viewer", nil, time.Hour)
	require.NoError(t, err)
	_, err = hs.Verify(tok)
	require.NoError(t, err)

	ed, err := session.New(session.Config{Secret: "s3cret", Ed25519PEM: priv, Issuer: "queen-proxy", NowFunc: clock})
	require.NoError(t, err)
	require.Equal(t, "EdDSA", ed.Algorithm(), "the private key wins over the secret")
	_, err = ed.Verify(tok)
	require.ErrorIs(t, err, session.ErrInvalid, "an HS256 token against an EdDSA verifier")

	none, err := session.New(session.Config{Issuer: "queen-proxy"})
	require.NoError(t, err)
	require.Equal(t, session.ModeNone, none.Mode())
	_, err = none.Verify(tok)
	require.ErrorIs(t, err, session.ErrInvalid)
}

// Every way a token can be wrong is the same refusal.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	v, err := session.New(session.Config{Secret: string(secret), Issuer: "queen-proxy", Audience: "Queen.Example.com", NowFunc: clock})
	require.NoError(t, err)
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": uuid.NewString(), "iss": "queen-proxy", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			"jti": uuid.NewString(), "role": "viewer"}
	}
	sign := func(c jwt.MapClaims, key []byte, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	ok := sign(good(), secret, "hs")
	_, err = v.Verify(ok)
	require.NoError(t, err)
	withAud := good()
	withAud["aud"] = []any{"other", "queen.example.com"}
	_, err = v.Verify(sign(withAud, secret, ""))
	require.NoError(t, err, "one audience matches, case-insensitively; no kid is fine with one key")

	cases := map[string]string{
		"another secret": sign(good(), []byte("other"), "hs"),
		"another kid":    sign(good(), secret, "abc"),
		"not a jwt":      "abc.def",
	}
	edit := map[string]func(jwt.MapClaims){
		"expired":        func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Second).Unix() },
		"no exp":         func(c jwt.MapClaims) { delete(c, "exp") },
		"float exp":      func(c jwt.MapClaims) { c["exp"] = float64(now.Unix()) + 3600.5 },
		"wrong iss":      func(c jwt.MapClaims) { c["iss"] = "someone" },
		"no jti":         func(c jwt.MapClaims) { delete(c, "jti") },
		"blank jti":      func(c jwt.MapClaims) { c["jti"] = " " },
		"role root":      func(c jwt.MapClaims) { c["role"] = "root" },
		"sub not a uuid": func(c jwt.MapClaims) { c["sub"] = "alice" },
		"bad cluster":    func(c jwt.MapClaims) { c["cluster"] = "acme" },
		"other audience": func(c jwt.MapClaims) { c["aud"] = "elsewhere.example.com" },
	}
	for name, f := range edit {
		c := good()
		f(c)
		cases[name] = sign(c, secret, "hs")
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, good())
	cases["alg none"], err = none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	for name, tok := range cases {
		_, err := v.Verify(tok)
		require.ErrorIs(t, err, session.ErrInvalid, name)
	}
}

func TestCookie(t *testing.T) {
	t.Parallel()
	c := session.Cookie{Name: "queen_session", TTL: time.Hour}
	w := httptest.NewRecorder()
	c.Set(w, "tok", false)
	got := w.Result().Cookies()[0]
	require.Equal(t, "tok", got.Value)
	require.True(t, got.HttpOnly)
	require.False(t, got.Secure)
	require.Equal(t, http.SameSiteLaxMode, got.SameSite)
	require.Equal(t, 3600, got.MaxAge)
	require.Equal(t, "/", got.Path)

	w = httptest.NewRecorder()
	session.Cookie{Name: "queen_session", Domain: "example.com", TTL: time.Hour}.Clear(w, false)
	got = w.Result().Cookies()[0]
	require.True(t, got.Secure, "a domain cookie is always Secure")
	require.Equal(t, -1, got.MaxAge)

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("Cookie", "queen_sessionx=no; queen_session=first; queen_session=second")
	require.Equal(t, "first", c.Read(r))
}
