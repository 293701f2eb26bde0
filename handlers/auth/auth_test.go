package auth

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// JWT-1: boot-time validation names the variable and never echoes a secret.
func TestNewValidation(t *testing.T) {
	t.Parallel()
	rsaPEM := pemOf(t, &rsaKeyA().PublicKey)
	edPEM := pemOf(t, edKey().Public())
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // fragments of the error; none means New succeeds
	}{
		{"es256 unsupported", Config{Algorithm: "ES256", Secret: "s"},
			[]string{"JWT_ALGORITHM: ", `"ES256" is not supported`, "HS256, HS384, HS512, RS256, RS384, RS512, EdDSA, or auto"}},
		{"lower case", Config{Algorithm: "hs256", Secret: "s"}, []string{"JWT_ALGORITHM: ", "is not supported"}},
		{"none", Config{Algorithm: "none", Secret: "s"}, []string{"JWT_ALGORITHM: ", "is not supported"}},
		{"hs without key", Config{Algorithm: "HS256"}, []string{"JWT_SECRET: no key material", "JWT_SECRET"}},
		{"hs with only jwks", Config{Algorithm: "HS384", JWKSURL: "https://idp.example/jwks"}, []string{"JWT_SECRET: no key material"}},
		{"auto without key", Config{Algorithm: "auto"}, []string{"no key material", "JWT_SECRET", "JWT_PUBLIC_KEY", "JWT_JWKS_URL"}},
		{"rs without key", Config{Algorithm: "RS256", Secret: "s"}, []string{"JWT_PUBLIC_KEY: no key material", "JWT_JWKS_URL"}},
		{"eddsa without key", Config{Algorithm: "EdDSA"}, []string{"JWT_PUBLIC_KEY: no key material", "JWT_JWKS_URL"}},
		{"garbage pem", Config{Algorithm: "RS256", PublicKey: "not a pem"}, []string{"JWT_PUBLIC_KEY: holds no PEM block"}},
		{"private key pem", Config{Algorithm: "RS256", PublicKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"},
			[]string{"JWT_PUBLIC_KEY: ", "not a PUBLIC KEY"}},
		{"ed pem for rs", Config{Algorithm: "RS512", PublicKey: edPEM}, []string{"JWT_PUBLIC_KEY: holds an Ed25519 key"}},
		{"rsa pem for eddsa", Config{Algorithm: "EdDSA", PublicKey: rsaPEM}, []string{"JWT_PUBLIC_KEY: holds an RSA key"}},
		{"jwks not http", Config{Algorithm: "RS256", JWKSURL: "ftp://user:hunter2@idp/jwks"}, []string{"JWT_JWKS_URL: is not an http"}},
		{"jwks no host", Config{Algorithm: "auto", JWKSURL: "https:///jwks"}, []string{"JWT_JWKS_URL: "}},

		{"hs256 with secret", Config{Algorithm: "HS256", Secret: "s"}, nil},
		{"default algorithm", Config{Secret: "s"}, nil},
		{"rs256 with pem", Config{Algorithm: "RS256", PublicKey: rsaPEM}, nil},
		{"pem on one line", Config{Algorithm: "RS256", PublicKey: strings.ReplaceAll(rsaPEM, "\n", `\n`)}, nil},
		{"rs256 with jwks", Config{Algorithm: "RS256", JWKSURL: "https://idp.example/jwks"}, nil},
		{"eddsa with pem", Config{Algorithm: "EdDSA", PublicKey: edPEM}, nil},
		{"auto with pem only", Config{Algorithm: "auto", PublicKey: edPEM}, nil},
		{"auto with jwks only", Config{Algorithm: "auto", JWKSURL: "http://idp/jwks"}, nil},
		{"hs ignores pem", Config{Algorithm: "HS256", Secret: "s", PublicKey: "garbage"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(tc.cfg)
			if tc.want == nil {
				require.NoError(t, err)
				require.NotNil(t, a)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n", "one line per problem")
			require.NotContains(t, err.Error(), "hunter2")
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestKeySource(t *testing.T) {
	t.Parallel()
	require.Equal(t, "secret", newAuth(t, Config{Secret: "s"}).KeySource())
	a := newAuth(t, Config{Algorithm: "auto", Secret: "s", PublicKey: pemOf(t, &rsaKeyA().PublicKey), JWKSURL: "https://idp/jwks"})
	require.Equal(t, "secret+public_key", a.KeySource(), "JWT_PUBLIC_KEY wins over JWT_JWKS_URL")
	require.Equal(t, "jwks", newAuth(t, Config{Algorithm: "RS256", JWKSURL: "https://idp/jwks"}).KeySource())
}

// JWT-4 and JWT-5: the configured set decides before any key is looked up.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	rsaPEM := pemOf(t, &rsaKeyA().PublicKey)
	edPEM := pemOf(t, edKey().Public())
	claims := jwt.MapClaims{"sub": "svc", "role": "admin"}
	rs := func(m jwt.SigningMethod) string { return sign(t, m, rsaKeyA(), "", claims) }
	ed := sign(t, jwt.SigningMethodEdDSA, edKey(), "", claims)
	hs := func(m jwt.SigningMethod) string { return sign(t, m, []byte(testSecret), "", claims) }
	// The classic confusion: an HS token whose HMAC key is the public PEM.
	confused := sign(t, jwt.SigningMethodHS256, []byte(rsaPEM), "", claims)
	es := sign(t, jwt.SigningMethodES256, ecKey(), "", claims)
	ps := sign(t, jwt.SigningMethodPS256, rsaKeyA(), "", claims)
	none := unsigned(`{"alg":"none","typ":"JWT"}`, `{"sub":"svc","role":"admin"}`)
	noneUpper := unsigned(`{"alg":"NONE"}`, `{"sub":"svc","role":"admin"}`)
	noAlg := unsigned(`{"typ":"JWT"}`, `{"sub":"svc"}`)
	numAlg := unsigned(`{"alg":256}`, `{"sub":"svc"}`)

	const ok = ""
	for _, tc := range []struct {
		name  string
		cfg   Config
		token string
		want  string // ok or the refusal's message
	}{
		{"hs256", Config{Algorithm: "HS256", Secret: testSecret}, hs(jwt.SigningMethodHS256), ok},
		{"hs256 refuses hs384", Config{Algorithm: "HS256", Secret: testSecret}, hs(jwt.SigningMethodHS384), "Unsupported token algorithm"},
		{"hs512", Config{Algorithm: "HS512", Secret: testSecret}, hs(jwt.SigningMethodHS512), ok},
		{"hs256 refuses rs256", Config{Algorithm: "HS256", Secret: testSecret}, rs(jwt.SigningMethodRS256), "Unsupported token algorithm"},
		{"hs256 refuses none", Config{Algorithm: "HS256", Secret: testSecret}, none, "Bad token header"},
		{"auto refuses none", Config{Algorithm: "auto", Secret: testSecret}, none, "Bad token header"},
		{"auto refuses NONE", Config{Algorithm: "auto", Secret: testSecret}, noneUpper, "Bad token header"},
		{"no alg", Config{Algorithm: "auto", Secret: testSecret}, noAlg, "Bad token header"},
		{"numeric alg", Config{Algorithm: "auto", Secret: testSecret}, numAlg, "Bad token header"},
		{"rs256 takes rs512", Config{Algorithm: "RS256", PublicKey: rsaPEM}, rs(jwt.SigningMethodRS512), ok},
		{"rs256 takes rs384", Config{Algorithm: "RS256", PublicKey: rsaPEM}, rs(jwt.SigningMethodRS384), ok},
		{"rs384 refuses rs256", Config{Algorithm: "RS384", PublicKey: rsaPEM}, rs(jwt.SigningMethodRS256), "Unsupported token algorithm"},
		{"rs refuses hs confusion", Config{Algorithm: "RS256", PublicKey: rsaPEM}, confused, "Unsupported token algorithm"},
		{"auto+pem refuses hs confusion", Config{Algorithm: "auto", PublicKey: rsaPEM}, confused, "HS secret not configured"},
		{"auto+pem has no ed key", Config{Algorithm: "auto", PublicKey: rsaPEM}, ed, "invalid Ed public key PEM"},
		{"auto+ed pem has no rsa key", Config{Algorithm: "auto", PublicKey: edPEM}, rs(jwt.SigningMethodRS256), "invalid RSA public key PEM"},
		{"auto+secret only refuses rs", Config{Algorithm: "auto", Secret: testSecret}, rs(jwt.SigningMethodRS256), "Unsupported token algorithm"},
		{"auto refuses es256", Config{Algorithm: "auto", Secret: testSecret, PublicKey: rsaPEM}, es, "Unsupported token algorithm"},
		{"auto refuses ps256", Config{Algorithm: "auto", Secret: testSecret, PublicKey: rsaPEM}, ps, "Unsupported token algorithm"},
		{"auto hs", Config{Algorithm: "auto", Secret: testSecret, PublicKey: rsaPEM}, hs(jwt.SigningMethodHS384), ok},
		{"auto rs", Config{Algorithm: "auto", Secret: testSecret, PublicKey: rsaPEM}, rs(jwt.SigningMethodRS256), ok},
		{"eddsa", Config{Algorithm: "EdDSA", PublicKey: edPEM}, ed, ok},
		{"wrong hmac key", Config{Algorithm: "HS256", Secret: "another secret"}, hs(jwt.SigningMethodHS256), "Invalid token signature"},
		{"wrong rsa key", Config{Algorithm: "RS256", PublicKey: pemOf(t, &rsaKeyB().PublicKey)}, rs(jwt.SigningMethodRS256), "Invalid token signature"},
		{"two segments", Config{Secret: testSecret}, "a.b", "Malformed token"},
		{"four segments", Config{Secret: testSecret}, hs(jwt.SigningMethodHS256) + ".x", "Malformed token"},
		{"bad header b64", Config{Secret: testSecret}, "!!!.e30.", "Bad token header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAuth(t, tc.cfg)
			id, err := a.ParseToken(t.Context(), tc.token)
			if tc.want == ok {
				require.NoError(t, err)
				require.Equal(t, Identity{Subject: "svc", Grants: grantsOfAdmin}, id)
				return
			}
			require.Error(t, err)
			require.Equal(t, tc.want, err.Error())
		})
	}
}

// A signature that decodes only leniently (non-zero padding bits) is refused:
// a verified token has exactly one spelling.
func TestStrictBase64(t *testing.T) {
	t.Parallel()
	a := newAuth(t, Config{Secret: testSecret})
	tok := hs256(t, jwt.MapClaims{"sub": "x"})
	_, err := a.ParseToken(t.Context(), tok)
	require.NoError(t, err)
	// 32 signature bytes are 43 characters; the last one carries 2 unused
	// bits, zero in the canonical spelling. Setting one keeps the bytes.
	i := strings.IndexByte(base64URLAlphabet, tok[len(tok)-1])
	require.Zero(t, i%4)
	mutated := tok[:len(tok)-1] + string(base64URLAlphabet[i+1])
	_, err = a.ParseToken(t.Context(), mutated)
	require.Error(t, err)
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// JWT-7: time claims with a 30 s skew, issuer, audience, integer-only times.
func TestClaims(t *testing.T) {
	t.Parallel()
	now := t0.Unix()
	a := newAuth(t, Config{Secret: testSecret, ClockSkew: 30 * time.Second})
	strict := newAuth(t, Config{Secret: testSecret, ClockSkew: 30 * time.Second, Issuer: "https://idp", Audience: "queen"})
	for _, tc := range []struct {
		name   string
		a      *Authenticator
		claims jwt.MapClaims
		want   string
	}{
		{"no exp never expires", a, jwt.MapClaims{}, ""},
		{"exp now-29", a, jwt.MapClaims{"exp": now - 29}, ""},
		{"exp now-30", a, jwt.MapClaims{"exp": now - 30}, ""},
		{"exp now-31", a, jwt.MapClaims{"exp": now - 31}, "Token has expired"},
		{"nbf now+29", a, jwt.MapClaims{"nbf": now + 29}, ""},
		{"nbf now+31", a, jwt.MapClaims{"nbf": now + 31}, "Token not yet valid"},
		{"iat now+29", a, jwt.MapClaims{"iat": now + 29}, ""},
		{"iat now+31", a, jwt.MapClaims{"iat": now + 31}, "Token issued in the future"},
		{"fractional exp", a, jwt.MapClaims{"exp": float64(now) + 0.5}, "Invalid token claims"},
		{"exponent exp", a, jwt.MapClaims{"exp": json.Number("1e10")}, "Invalid token claims"},
		{"string exp", a, jwt.MapClaims{"exp": "9999999999"}, "Invalid token claims"},
		{"null nbf", a, jwt.MapClaims{"nbf": nil}, "Invalid token claims"},
		{"huge iat", a, jwt.MapClaims{"iat": json.Number("99999999999999999999")}, "Invalid token claims"},
		{"numeric sub", a, jwt.MapClaims{"sub": 7}, "Invalid token claims"},
		{"iss and aud ok", strict, jwt.MapClaims{"iss": "https://idp", "aud": "queen"}, ""},
		{"aud array", strict, jwt.MapClaims{"iss": "https://idp", "aud": []string{"other", "queen"}}, ""},
		{"wrong iss", strict, jwt.MapClaims{"iss": "https://evil", "aud": "queen"}, "Invalid token issuer"},
		{"no iss", strict, jwt.MapClaims{"aud": "queen"}, "Invalid token issuer"},
		{"wrong aud", strict, jwt.MapClaims{"iss": "https://idp", "aud": "queenx"}, "Invalid token audience"},
		{"aud array without", strict, jwt.MapClaims{"iss": "https://idp", "aud": []any{"a", 1}}, "Invalid token audience"},
		{"no aud", strict, jwt.MapClaims{"iss": "https://idp"}, "Invalid token audience"},
		{"iss ignored when unset", a, jwt.MapClaims{"iss": 5, "aud": false}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.a.ParseToken(t.Context(), hs256(t, tc.claims))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			requireRefused(t, err, http.StatusUnauthorized, tc.want)
		})
	}
}

// The clock is read per token, not once.
func TestClaimsFollowClock(t *testing.T) {
	t.Parallel()
	c := newClock()
	a := newAuth(t, Config{Secret: testSecret, NowFunc: c.Now})
	tok := hs256(t, jwt.MapClaims{"exp": t0.Unix() + 60})
	_, err := a.ParseToken(t.Context(), tok)
	require.NoError(t, err)
	c.Advance(61 * time.Second)
	_, err = a.ParseToken(t.Context(), tok)
	requireRefused(t, err, http.StatusUnauthorized, "Token has expired")
}

func TestBearer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"abc", "abc", true},
		{"", "", false},
		{"Bearer ", "", false},
		{"Bearer", "Bearer", true},
		{"Bearer ab\u00e9", "", false},
	} {
		tok, ok := bearer(tc.header)
		require.Equal(t, tc.ok, ok, "%q", tc.header)
		require.Equal(t, tc.token, tok, "%q", tc.header)
	}
}

// JWT-8: the role claim and the roles array, with configurable names.
func TestRoles(t *testing.T) {
	t.Parallel()
	def := newAuth(t, Config{Secret: testSecret})
	custom := newAuth(t, Config{Secret: testSecret, RolesClaim: "scope", RolesArrayClaim: "groups",
		RoleAdmin: "queen:admin", RoleReadWrite: "queen:rw", RoleReadOnly: "queen:ro", RoleWriteOnly: "queen:wo"})
	for _, tc := range []struct {
		name   string
		a      *Authenticator
		claims jwt.MapClaims
		want   Grants
	}{
		{"no role", def, jwt.MapClaims{}, 0},
		{"unknown role", def, jwt.MapClaims{"role": "root"}, 0},
		{"admin", def, jwt.MapClaims{"role": "admin"}, grantsOfAdmin},
		{"read-write", def, jwt.MapClaims{"role": "read-write"}, GrantReadOnly | GrantWriteOnly | GrantReadWrite},
		{"read-only", def, jwt.MapClaims{"role": "read-only"}, GrantReadOnly},
		{"write-only", def, jwt.MapClaims{"role": "write-only"}, GrantWriteOnly},
		{"array", def, jwt.MapClaims{"roles": []string{"x", "read-only", "write-only"}}, GrantReadOnly | GrantWriteOnly},
		{"claim and array", def, jwt.MapClaims{"role": "read-only", "roles": []string{"write-only"}}, GrantReadOnly | GrantWriteOnly},
		{"role as array is ignored", def, jwt.MapClaims{"role": []string{"admin"}}, 0},
		{"roles as string is ignored", def, jwt.MapClaims{"roles": "admin"}, 0},
		{"non-strings ignored", def, jwt.MapClaims{"roles": []any{1, true, nil, "read-only"}}, GrantReadOnly},
		{"case matters", def, jwt.MapClaims{"role": "Admin"}, 0},
		{"custom names", custom, jwt.MapClaims{"scope": "queen:wo", "groups": []string{"queen:ro"}}, GrantReadOnly | GrantWriteOnly},
		{"custom admin", custom, jwt.MapClaims{"groups": []string{"queen:admin"}}, grantsOfAdmin},
		{"defaults off when renamed", custom, jwt.MapClaims{"role": "admin", "roles": []string{"admin"}}, 0},
	} {
		id, err := tc.a.ParseToken(t.Context(), hs256(t, tc.claims))
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, id.Grants, tc.name)
	}
}

// FuzzParseToken feeds the verifier arbitrary tokens: it never panics, every
// refusal is an *Error with a fixed message, and only a token signed with
// the configured key, spelled exactly as it was signed, is accepted.
func FuzzParseToken(f *testing.F) {
	claims := jwt.MapClaims{"sub": "svc", "role": "admin", "exp": t0.Unix() + 3600}
	valid := map[string]bool{
		sign(f, jwt.SigningMethodHS256, []byte(testSecret), "", claims):     true,
		sign(f, jwt.SigningMethodHS512, []byte(testSecret), "k1", claims):   true,
		sign(f, jwt.SigningMethodRS256, rsaKeyA(), "", claims):              true,
		sign(f, jwt.SigningMethodEdDSA, edKey(), "", jwt.MapClaims{"x": 1}): false, // no Ed key configured: 500
	}
	for tok := range valid {
		f.Add(tok)
	}
	for _, seed := range []string{
		hs256(f, jwt.MapClaims{"exp": t0.Unix() - 3600}),
		hs256(f, jwt.MapClaims{"exp": 1.5}),
		unsigned(`{"alg":"none"}`, `{"sub":"x"}`),
		unsigned(`{"alg":"HS256","kid":{}}`, `{}`),
		unsigned(`{"alg":"HS256"}`, `[]`),
		unsigned(`{"alg":"HS256"}`, `{"exp":"x"}`),
		"", ".", "..", "a.b.c", "e30.e30.", "eyJhbGciOiJIUzI1NiJ9..", "\x00.\x00.\x00",
	} {
		f.Add(seed)
	}
	a := newAuth(f, Config{Algorithm: "auto", Secret: testSecret, PublicKey: pemOf(f, &rsaKeyA().PublicKey)})
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := a.ParseToken(t.Context(), raw)
		if err == nil {
			require.True(t, valid[raw], "accepted a token that was never signed: %q", raw)
			require.Equal(t, "svc", id.Subject)
			return
		}
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusInternalServerError}, e.Status)
		require.True(t, knownMessages[e.Message], "unexpected message %q", e.Message)
	})
}

var knownMessages = map[string]bool{}

func init() {
	for _, e := range []*Error{errMissing, errMalformed, errBadHeader, errUnsupportedAlg, errUnknownKID,
		errSignature, errClaims, errExpired, errNotYetValid, errFutureIssued, errIssuer, errAudience,
		errForbidden, errNoSecret, errNoRSAKey, errNoEdKey} {
		knownMessages[e.Message] = true
	}
}
