package auth

import (
	"crypto/ed25519"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// idp is a fake identity provider serving a JWKS document that the test
// can replace, fail, and count requests on.
type idp struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	doc    []byte
	status int
	hits   atomic.Int64
	hitCh  chan struct{} // one value per request served
}

func newIdP(t *testing.T, doc []byte) *idp {
	p := &idp{t: t, doc: doc, status: http.StatusOK, hitCh: make(chan struct{}, 1000)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		doc, status := p.doc, p.status
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(doc)
		p.hits.Add(1)
		p.hitCh <- struct{}{}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) serve(doc []byte, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doc, p.status = doc, status
}

// waitHits blocks until n more requests have been served.
func (p *idp) waitHits(n int) {
	p.t.Helper()
	for range n {
		select {
		case <-p.hitCh:
		case <-time.After(10 * time.Second):
			p.t.Fatal("the JWKS endpoint was not fetched")
		}
	}
}

func rsToken(t testing.TB, kid string, sub string) string {
	return sign(t, jwt.SigningMethodRS256, rsaKeyA(), kid, jwt.MapClaims{"sub": sub})
}

// JWT-6: keys rotate without a restart; an unknown kid re-fetches at most
// once per 5 s, and a failed attempt counts for the throttle.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	p := newIdP(t, jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey)))
	c := newClock()
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: p.srv.URL, NowFunc: c.Now})
	require.NoError(t, a.Start(t.Context()))
	require.EqualValues(t, 1, p.hits.Load(), "pre-fetch at start")
	require.NoError(t, a.Start(t.Context()), "Start again does nothing")
	require.EqualValues(t, 1, p.hits.Load())

	tokA := rsToken(t, "a", "svc-a")
	tokB := sign(t, jwt.SigningMethodRS256, rsaKeyB(), "b", jwt.MapClaims{"sub": "svc-b"})
	id, err := a.ParseToken(t.Context(), tokA)
	require.NoError(t, err)
	require.Equal(t, "svc-a", id.Subject)

	// Rotate to B. The first B token re-fetches and passes.
	p.serve(jwksDoc(t, jwkRSA("b", &rsaKeyB().PublicKey)), http.StatusOK)
	c.Advance(10 * time.Second)
	id, err = a.ParseToken(t.Context(), tokB)
	require.NoError(t, err)
	require.Equal(t, "svc-b", id.Subject)
	require.EqualValues(t, 2, p.hits.Load())

	// A was removed upstream: gone from the cache, and within 5 s of the
	// last fetch no unknown kid causes another one.
	_, err = a.ParseToken(t.Context(), tokA)
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	c.Advance(4 * time.Second)
	_, err = a.ParseToken(t.Context(), rsToken(t, "c", "x"))
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	require.EqualValues(t, 2, p.hits.Load(), "throttled")

	// After 5 s, one more fetch.
	c.Advance(time.Second)
	_, err = a.ParseToken(t.Context(), rsToken(t, "c", "x"))
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	require.EqualValues(t, 3, p.hits.Load())

	// A dead endpoint: the failed attempt stamps the throttle too, so the
	// next unknown kids do not hit it again (the reference re-fetched on
	// every miss after a failure).
	p.serve([]byte("oops"), http.StatusInternalServerError)
	c.Advance(time.Minute)
	for range 5 {
		_, err = a.ParseToken(t.Context(), rsToken(t, "d", "x"))
		requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	}
	require.EqualValues(t, 4, p.hits.Load(), "one attempt, then throttled")
	// The old keys survive a failed fetch.
	_, err = a.ParseToken(t.Context(), tokB)
	require.NoError(t, err)
	require.EqualValues(t, 4, p.hits.Load(), "a known kid never fetches")
}

// A failed pre-fetch is not fatal: keys come on demand once the IdP is back.
func TestJWKSPrefetchFailure(t *testing.T) {
	t.Parallel()
	p := newIdP(t, []byte("down"))
	p.serve([]byte("down"), http.StatusServiceUnavailable)
	c := newClock()
	var logs logBuffer
	a := newAuth(t, Config{Algorithm: "auto", JWKSURL: p.srv.URL, NowFunc: c.Now, Logger: logs.logger()})
	require.ErrorContains(t, a.Start(t.Context()), "status 503")
	require.Contains(t, logs.String(), "JWKS pre-fetch failed (will retry on demand)")
	require.Contains(t, logs.String(), "JWT_JWKS_URL uses http://")

	p.serve(jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey)), http.StatusOK)
	_, err := a.ParseToken(t.Context(), rsToken(t, "a", "x"))
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	c.Advance(refetchEvery)
	_, err = a.ParseToken(t.Context(), rsToken(t, "a", "x"))
	require.NoError(t, err)
}

// DECISIONS §5: a token without kid matches only when exactly one key is loaded.
func TestJWKSTokenWithoutKID(t *testing.T) {
	t.Parallel()
	p := newIdP(t, jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey)))
	c := newClock()
	a := newAuth(t, Config{Algorithm: "auto", JWKSURL: p.srv.URL, NowFunc: c.Now})
	require.NoError(t, a.Start(t.Context()))
	noKID := rsToken(t, "", "x")
	_, err := a.ParseToken(t.Context(), noKID)
	require.NoError(t, err, "the only key")

	p.serve(jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey), jwkEd("e", edKey().Public().(ed25519.PublicKey))), http.StatusOK)
	c.Advance(refetchEvery)
	_, err = a.ParseToken(t.Context(), rsToken(t, "zz", "x")) // unknown kid: re-fetch
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")
	require.EqualValues(t, 2, p.hits.Load())
	_, err = a.ParseToken(t.Context(), noKID)
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")

	// Ed25519 keys from a JWKS work, and a key of the wrong family does not.
	ed := sign(t, jwt.SigningMethodEdDSA, edKey(), "e", jwt.MapClaims{"sub": "ed"})
	id, err := a.ParseToken(t.Context(), ed)
	require.NoError(t, err)
	require.Equal(t, "ed", id.Subject)
	_, err = a.ParseToken(t.Context(), rsToken(t, "e", "x"))
	requireRefused(t, err, http.StatusUnauthorized, "Invalid token signature")
}

// A key published for one algorithm is not used for another.
func TestJWKSKeyAlg(t *testing.T) {
	t.Parallel()
	k := jwkRSA("a", &rsaKeyA().PublicKey)
	k["alg"] = "RS512"
	p := newIdP(t, jwksDoc(t, k))
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: p.srv.URL})
	require.NoError(t, a.Start(t.Context()))
	_, err := a.ParseToken(t.Context(), sign(t, jwt.SigningMethodRS512, rsaKeyA(), "a", jwt.MapClaims{}))
	require.NoError(t, err)
	_, err = a.ParseToken(t.Context(), rsToken(t, "a", "x"))
	requireRefused(t, err, http.StatusUnauthorized, "Invalid token signature")
}

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	r := jwkRSA("r", &rsaKeyA().PublicKey)
	enc := jwkRSA("enc", &rsaKeyA().PublicKey)
	enc["use"] = "enc"
	dup := jwkRSA("r", &rsaKeyB().PublicKey)
	noKID := jwkRSA("", &rsaKeyB().PublicKey)
	for _, tc := range []struct {
		name string
		doc  string
		kids []string
	}{
		{"ec only", string(jwksDoc(t, map[string]any{"kty": "EC", "crv": "P-256", "kid": "ec", "x": "AA", "y": "AA"})), nil},
		{"mixed", string(jwksDoc(t, r, jwkEd("ed", edKey().Public().(ed25519.PublicKey)), enc, dup, noKID,
			map[string]any{"kty": "OKP", "crv": "X25519", "kid": "x", "x": "AAAA"},
			map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": "short", "x": "AAAA"},
			map[string]any{"kty": "RSA", "kid": "bad-e", "n": "AQAB", "e": "AQ"},
			map[string]any{"kty": "RSA", "kid": "num", "n": 5},
		)), []string{"", "ed", "r"}},
		{"no keys", `{}`, nil},
	} {
		set, err := parseJWKS([]byte(tc.doc))
		require.NoError(t, err, tc.name)
		var kids []string
		for kid := range set.byKID {
			kids = append(kids, kid)
		}
		require.ElementsMatch(t, tc.kids, kids, tc.name)
	}
	set, err := parseJWKS(jwksDoc(t, r, dup))
	require.NoError(t, err)
	require.True(t, set.byKID["r"].key.(*rsa.PublicKey).Equal(&rsaKeyA().PublicKey), "first key of a kid wins")
	_, err = parseJWKS([]byte(`[`))
	require.Error(t, err)
}

// JWT-2/JWT-6: a JWKS with no readable key boots with keys=0.
func TestJWKSPrefetchLogsKeyCount(t *testing.T) {
	t.Parallel()
	p := newIdP(t, jwksDoc(t, map[string]any{"kty": "EC", "kid": "ec"}))
	var logs logBuffer
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: p.srv.URL, Logger: logs.logger()})
	require.NoError(t, a.Start(t.Context()))
	require.Contains(t, logs.String(), "JWKS pre-fetch OK")
	require.Contains(t, logs.String(), "keys=0")
}

// Redirects are not followed and the document is capped at 1 MiB.
func TestJWKSFetchLimits(t *testing.T) {
	t.Parallel()
	var target atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/jwks", http.StatusFound)
		case "/jwks":
			target.Add(1)
			_, _ = w.Write(jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey)))
		case "/huge":
			_, _ = w.Write([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", maxJWKSBytes) + `"}`))
		}
	}))
	t.Cleanup(srv.Close)
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: srv.URL + "/redirect"})
	require.ErrorContains(t, a.Start(t.Context()), "status 302")
	require.Zero(t, target.Load())
	a = newAuth(t, Config{Algorithm: "RS256", JWKSURL: srv.URL + "/huge"})
	require.ErrorContains(t, a.Start(t.Context()), "larger than")
}

// A failed fetch never reveals the password of the URL.
func TestJWKSErrorRedactsURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens any more
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: "http://user:hunter2@" + addr + "/jwks"})
	err := a.Start(t.Context())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

// The background refresh replaces the keys on its own, at the interval.
func TestJWKSBackgroundRefresh(t *testing.T) {
	t.Parallel()
	p := newIdP(t, jwksDoc(t, jwkRSA("a", &rsaKeyA().PublicKey)))
	// A frozen clock: the on-demand re-fetch stays throttled after the
	// pre-fetch, so only the background refresh can bring key B.
	a := newAuth(t, Config{Algorithm: "RS256", JWKSURL: p.srv.URL, JWKSRefreshInterval: 10 * time.Millisecond})
	require.NoError(t, a.Start(t.Context()))
	p.waitHits(1)
	tokB := sign(t, jwt.SigningMethodRS256, rsaKeyB(), "b", jwt.MapClaims{"sub": "b"})
	_, err := a.ParseToken(t.Context(), tokB)
	requireRefused(t, err, http.StatusUnauthorized, "Unknown key ID")

	p.serve(jwksDoc(t, jwkRSA("b", &rsaKeyB().PublicKey)), http.StatusOK)
	// Fetches are serialised: once the second fetch after the change has
	// started, the first one has stored its keys.
	before := p.hits.Load()
	for p.hits.Load() < before+2 {
		p.waitHits(1)
	}
	_, err = a.ParseToken(t.Context(), tokB)
	require.NoError(t, err)

	a.Stop()
	a.Stop()
	stopped := p.hits.Load()
	require.NoError(t, a.Start(t.Context()), "Start after Stop does nothing")
	require.Equal(t, stopped, p.hits.Load())
}
