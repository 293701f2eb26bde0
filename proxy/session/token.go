// Package session is the proxy's human session token: a JWT the proxy mints
// at login and verifies on every request that carries it (PROXY.md §3.3),
// signed EdDSA with an Ed25519 key from the environment, or HS256 with a
// secret, and published at /.well-known/jwks.json when it is Ed25519.
//
// The token grants nothing by itself: it names a user (sub) and carries its
// own id (jti) for revocation. The role on a cluster is looked up live;
// the role claim is a placeholder. Verification pins the one algorithm the
// proxy signs with, so a token cannot pick a weaker one.
package session

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Mode says what a proxy can do with sessions.
type Mode string

// The modes of PROXY.md §1.6.
const (
	ModeNone   Mode = "none"        // no key material: nobody can log in
	ModeMint   Mode = "mint"        // signs and verifies
	ModeVerify Mode = "verify-only" // only the Ed25519 public key: verifies tokens another proxy minted
)

// The placeholder role of a login token (PROXY.md §3.3) and the roles a
// token may name.
var roles = map[string]bool{"admin": true, "producer": true, "consumer": true, "viewer": true}

// Config is the key material and the claims' settings.
type Config struct {
	Secret        string // QUEEN_PROXY_JWT_SECRET: HS256, kid "hs"
	Ed25519PEM    string // QUEEN_PROXY_JWT_ED25519_PEM: PKCS#8 private key; wins over Secret
	Ed25519PubPEM string // QUEEN_PROXY_JWT_ED25519_PUB_PEM: SPKI or raw 32 bytes; alone, verify-only
	Issuer        string // QUEEN_PROXY_JWT_ISS: minted and required
	Audience      string // QUEEN_PROXY_JWT_AUD: "" accepts any
	NowFunc       func() time.Time
}

// Tokens mints and verifies session tokens.
type Tokens struct {
	mode     Mode
	alg      jwt.SigningMethod
	kid      string
	sign     any // ed25519.PrivateKey or []byte
	verify   any // ed25519.PublicKey or []byte
	pub      ed25519.PublicKey
	issuer   string
	audience string
	now      func() time.Time
	// Ignored is set when a public key was configured beside an HS256
	// secret, which wins (the boot warns).
	Ignored string
}

// Claims are what a verified token says.
type Claims struct {
	User    uuid.UUID  // sub
	JTI     string     // the token's id, for revocation
	Expires time.Time  // exp
	Role    string     // a placeholder: roles are looked up live
	Cluster *uuid.UUID // when set, the token is good for this cluster only
}

// ErrInvalid is every refusal of a token; its message says why, for logs.
var ErrInvalid = errors.New("invalid session token")

// New builds Tokens from the material: an Ed25519 private key wins, then an
// HS256 secret, then a public key alone (verify-only); none is ModeNone.
func New(cfg Config) (*Tokens, error) {
	t := &Tokens{issuer: cfg.Issuer, audience: strings.ToLower(cfg.Audience), now: cfg.NowFunc}
	if t.now == nil {
		t.now = time.Now
	}
	switch {
	case cfg.Ed25519PEM != "":
		key, err := parsePrivate(cfg.Ed25519PEM)
		if err != nil {
			return nil, err
		}
		t.mode, t.alg, t.sign = ModeMint, jwt.SigningMethodEdDSA, key
		t.pub = key.Public().(ed25519.PublicKey)
		t.verify, t.kid = t.pub, kidOf(t.pub)
	case cfg.Secret != "":
		t.mode, t.alg, t.kid = ModeMint, jwt.SigningMethodHS256, "hs"
		t.sign, t.verify = []byte(cfg.Secret), []byte(cfg.Secret)
		if cfg.Ed25519PubPEM != "" {
			t.Ignored = "QUEEN_PROXY_JWT_ED25519_PUB_PEM"
		}
	case cfg.Ed25519PubPEM != "":
		pub, err := parsePublic(cfg.Ed25519PubPEM)
		if err != nil {
			return nil, err
		}
		t.mode, t.alg, t.pub, t.verify, t.kid = ModeVerify, jwt.SigningMethodEdDSA, pub, pub, kidOf(pub)
	default:
		t.mode = ModeNone
	}
	return t, nil
}

// Mode says whether this proxy mints, only verifies, or has no key.
func (t *Tokens) Mode() Mode { return t.mode }

// Algorithm names the signing algorithm ("" without a key), for the boot log.
func (t *Tokens) Algorithm() string {
	if t.alg == nil {
		return ""
	}
	return t.alg.Alg()
}

// Mint signs a token for user, valid for ttl, with a fresh jti (a UUID v4).
// cluster, when not nil, restricts it to one cluster.
func (t *Tokens) Mint(user uuid.UUID, role string, cluster *uuid.UUID, ttl time.Duration) (string, Claims, error) {
	if t.mode != ModeMint {
		return "", Claims{}, errors.New("this proxy has no signing key")
	}
	now := t.now().Truncate(time.Second)
	c := Claims{User: user, JTI: uuid.NewString(), Expires: now.Add(ttl), Role: role, Cluster: cluster}
	mc := jwt.MapClaims{
		"sub": user.String(), "iss": t.issuer, "iat": now.Unix(), "exp": c.Expires.Unix(), "jti": c.JTI, "role": role,
	}
	if cluster != nil {
		mc["cluster"] = cluster.String()
	}
	tok := jwt.NewWithClaims(t.alg, mc)
	tok.Header["kid"] = t.kid
	s, err := tok.SignedString(t.sign)
	return s, c, err
}

// Verify checks a token's signature (with the one algorithm this proxy
// uses), issuer, expiry, audience and claims. It does not consult the
// deny-list: the caller does.
func (t *Tokens) Verify(raw string) (Claims, error) {
	if t.verify == nil {
		return Claims{}, fmt.Errorf("%w: this proxy has no key to verify with", ErrInvalid)
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{t.alg.Alg()}), jwt.WithIssuer(t.issuer),
		jwt.WithExpirationRequired(), jwt.WithJSONNumber(), jwt.WithTimeFunc(t.now))
	tok, err := p.Parse(raw, func(tok *jwt.Token) (any, error) {
		if kid, ok := tok.Header["kid"]; ok && kid != t.kid {
			return nil, errors.New("unknown kid")
		}
		return t.verify, nil
	})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	mc, _ := tok.Claims.(jwt.MapClaims)
	return t.claims(mc)
}

// claims checks and extracts the claims of a token whose signature holds.
func (t *Tokens) claims(mc jwt.MapClaims) (Claims, error) {
	bad := func(why string) (Claims, error) { return Claims{}, fmt.Errorf("%w: %s", ErrInvalid, why) }
	for _, name := range []string{"exp", "iat", "nbf"} {
		if v, ok := mc[name]; ok && !integral(v) {
			return bad(name + " is not an integer")
		}
	}
	var c Claims
	sub, _ := mc["sub"].(string)
	user, err := uuid.Parse(sub)
	if err != nil || len(sub) != 36 {
		return bad("sub is not a user id")
	}
	c.User = user
	if c.JTI, _ = mc["jti"].(string); strings.TrimSpace(c.JTI) == "" {
		return bad("no jti")
	}
	if c.Role, _ = mc["role"].(string); !roles[c.Role] {
		return bad("unknown role")
	}
	if v, ok := mc["cluster"]; ok {
		s, _ := v.(string)
		id, err := uuid.Parse(s)
		if err != nil || len(s) != 36 {
			return bad("cluster is not a cluster id")
		}
		c.Cluster = &id
	}
	if !t.audienceOK(mc["aud"]) {
		return bad("audience")
	}
	exp, _ := mc.GetExpirationTime()
	c.Expires = exp.Time
	return c, nil
}

// audienceOK is the one-sided rule of PROXY.md §3.3: a token without an
// audience passes; one with an audience passes when one of its values is
// ours (case-insensitive); a proxy without an audience accepts any.
func (t *Tokens) audienceOK(aud any) bool {
	var list []string
	switch v := aud.(type) {
	case nil:
	case string:
		if v != "" {
			list = []string{v}
		}
	case []any:
		for _, a := range v {
			if s, ok := a.(string); ok && s != "" {
				list = append(list, s)
			} else if !ok {
				return false
			}
		}
	default:
		return false
	}
	if len(list) == 0 || t.audience == "" {
		return true
	}
	for _, a := range list {
		if strings.ToLower(a) == t.audience {
			return true
		}
	}
	return false
}

// integral reports whether a JSON number claim is a whole number written
// as one (DECISIONS §5: "1.5" and "1e9" are refused).
func integral(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	_, err := n.Int64()
	return err == nil
}

// kidOf is the hex of the first 16 bytes of the SHA-256 of the raw public
// key (PROXY.md §3.3).
func kidOf(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:16])
}

func parsePrivate(raw string) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode([]byte(raw))
	if block == nil {
		return nil, errors.New("QUEEN_PROXY_JWT_ED25519_PEM holds no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	priv, ok := key.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, errors.New("QUEEN_PROXY_JWT_ED25519_PEM is not a PKCS#8 Ed25519 private key")
	}
	return priv, nil
}

func parsePublic(raw string) (ed25519.PublicKey, error) {
	block, _ := pem.Decode([]byte(raw))
	if block == nil {
		return nil, errors.New("QUEEN_PROXY_JWT_ED25519_PUB_PEM holds no PEM block")
	}
	if len(block.Bytes) == ed25519.PublicKeySize {
		return ed25519.PublicKey(block.Bytes), nil
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	pub, ok := key.(ed25519.PublicKey)
	if err != nil || !ok {
		return nil, errors.New("QUEEN_PROXY_JWT_ED25519_PUB_PEM is not an Ed25519 public key")
	}
	return pub, nil
}
