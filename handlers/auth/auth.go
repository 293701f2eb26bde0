// Package auth decides who a request is and what it may do.
//
// It verifies the JWT of the Authorization header (SECURITY-REQUIREMENTS §3),
// maps the token's roles to a set of access levels (Grants) and compares
// that set with the level of the route, which gen/routes takes from the
// x-queen-access of each operation in openapi/openapi.yaml. The signature is
// checked by github.com/golang-jwt/jwt/v5; algorithm selection, key lookup
// and every claim check are done here, so that the rules are ours:
//
//   - JWT_ALGORITHM is a set of accepted token algorithms (JWT-4); "none",
//     ES* and PS* are never accepted, and the algorithm is checked before any
//     key is looked up, so an HS token cannot be verified with an RSA key.
//   - JWT_PUBLIC_KEY wins over JWT_JWKS_URL; a JWKS is fetched at boot,
//     refreshed in the background and re-fetched on an unknown kid at most
//     once per 5 s, counting attempts, not successes (DECISIONS §5).
//   - A token without kid matches only when exactly one JWKS key is loaded.
//   - exp, nbf and iat must be integers when present; a token without exp
//     never expires (the reference's behaviour, documented in the README).
//
// Where this package is stricter than the reference, boot fails instead of
// every request: HS256/384/512 without JWT_SECRET, and a JWT_PUBLIC_KEY that is
// not an RSA or Ed25519 public key, or not of the family JWT_ALGORITHM names.
package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults of the Config fields; they match the JWT_* variables' defaults.
const (
	AlgorithmDefault           = "HS256"
	JWKSRefreshIntervalDefault = time.Hour
	JWKSTimeoutDefault         = 5 * time.Second
	RolesClaimDefault          = "role"
	RolesArrayClaimDefault     = "roles"
	RoleAdminDefault           = "admin"
	RoleReadWriteDefault       = "read-write"
	RoleReadOnlyDefault        = "read-only"
	RoleWriteOnlyDefault       = "write-only"
)

// Config is the input of New. Every field but the last three comes from the
// JWT_* variable of the same name.
type Config struct {
	Algorithm           string // JWT_ALGORITHM: HS256, HS384, HS512, RS256, RS384, RS512, EdDSA or auto
	Secret              string // JWT_SECRET: HMAC key, raw bytes
	PublicKey           string // JWT_PUBLIC_KEY: PEM; a literal `\n` stands for a line break
	JWKSURL             string // JWT_JWKS_URL
	JWKSRefreshInterval time.Duration
	JWKSTimeout         time.Duration // per fetch
	Issuer              string        // JWT_ISSUER: if set, iss must equal it
	Audience            string        // JWT_AUDIENCE: if set, aud must contain it
	ClockSkew           time.Duration // applied to exp, nbf and iat; whole seconds
	SkipPaths           []string      // JWT_SKIP_PATHS, already split
	RolesClaim          string        // claim holding one role string
	RolesArrayClaim     string        // claim holding an array of role strings
	RoleAdmin           string
	RoleReadWrite       string
	RoleReadOnly        string
	RoleWriteOnly       string
	// TenantClaim (QUEEN_TENANT_CLAIM) names the claim that binds a token
	// to a tenant (Identity.Tenant); "" reads none. What the tenant means
	// is the adapter's business (docs/tenancy.md).
	TenantClaim string

	Logger *slog.Logger
	// HTTPClient fetches the JWKS; its CheckRedirect is replaced so that
	// redirects are never followed. Nil means a client on a clone of
	// http.DefaultTransport.
	HTTPClient *http.Client
	// NowFunc is the clock of claim checks and of the re-fetch throttle.
	NowFunc func() time.Time
}

// ConfigDefault fills the zero fields of a Config that have a default.
// ClockSkew and SkipPaths are taken as given: zero and empty are valid.
func ConfigDefault(c Config) Config {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Algorithm, AlgorithmDefault)
	def(&c.RolesClaim, RolesClaimDefault)
	def(&c.RolesArrayClaim, RolesArrayClaimDefault)
	def(&c.RoleAdmin, RoleAdminDefault)
	def(&c.RoleReadWrite, RoleReadWriteDefault)
	def(&c.RoleReadOnly, RoleReadOnlyDefault)
	def(&c.RoleWriteOnly, RoleWriteOnlyDefault)
	if c.JWKSRefreshInterval <= 0 {
		c.JWKSRefreshInterval = JWKSRefreshIntervalDefault
	}
	if c.JWKSTimeout <= 0 {
		c.JWKSTimeout = JWKSTimeoutDefault
	}
	if c.ClockSkew < 0 {
		c.ClockSkew = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

// algorithmSets maps JWT_ALGORITHM to the token algorithms it accepts
// (JWT-4). RS256 is the widest RSA setting, as in the reference.
var algorithmSets = map[string][]string{
	"auto":  {"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "EdDSA"},
	"HS256": {"HS256"},
	"HS384": {"HS384"},
	"HS512": {"HS512"},
	"RS256": {"RS256", "RS384", "RS512"},
	"RS384": {"RS384"},
	"RS512": {"RS512"},
	"EdDSA": {"EdDSA"},
}

const algorithmList = "HS256, HS384, HS512, RS256, RS384, RS512, EdDSA, or auto"

// Authenticator verifies tokens and guards routes. It is safe for
// concurrent use; Start and Stop run its JWKS refresh, if it has one.
type Authenticator struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	algs    map[string]bool
	parsers map[string]*jwt.Parser
	roles   roles

	secret []byte            // nil: HS tokens answer 500 (only possible with auto)
	static bool              // JWT_PUBLIC_KEY is the only asymmetric key
	rsaKey *rsa.PublicKey    // from JWT_PUBLIC_KEY
	edKey  ed25519.PublicKey // from JWT_PUBLIC_KEY
	jwks   *jwks             // nil unless the JWKS is the asymmetric key source

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New validates the configuration (JWT-1) and builds the Authenticator. It
// does no I/O: Start fetches the JWKS. The error holds one line per problem,
// each starting with the variable's name; no secret is ever echoed.
func New(cfg Config) (*Authenticator, error) {
	cfg = ConfigDefault(cfg)
	a := &Authenticator{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.NowFunc,
		algs:    map[string]bool{},
		parsers: map[string]*jwt.Parser{},
		roles: roles{
			claim: cfg.RolesClaim, arrayClaim: cfg.RolesArrayClaim,
			admin: cfg.RoleAdmin, readWrite: cfg.RoleReadWrite,
			readOnly: cfg.RoleReadOnly, writeOnly: cfg.RoleWriteOnly,
		},
	}
	set, ok := algorithmSets[cfg.Algorithm]
	if !ok {
		return nil, fmt.Errorf("JWT_ALGORITHM: %s is not supported (use %s)", quote(cfg.Algorithm), algorithmList)
	}
	var hs, asym bool
	for _, alg := range set {
		a.algs[alg] = true
		a.parsers[alg] = jwt.NewParser(jwt.WithValidMethods([]string{alg}), jwt.WithJSONNumber(),
			jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())
		hs = hs || strings.HasPrefix(alg, "HS")
		asym = asym || !strings.HasPrefix(alg, "HS")
	}
	if cfg.Secret != "" && hs {
		a.secret = []byte(cfg.Secret)
	}

	var errs []error
	switch {
	case cfg.Algorithm == "auto" && cfg.Secret == "" && cfg.PublicKey == "" && cfg.JWKSURL == "":
		errs = append(errs, errors.New("JWT_SECRET: no key material: JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL"))
	case hs && !asym && cfg.Secret == "":
		errs = append(errs, fmt.Errorf("JWT_SECRET: no key material: JWT_ALGORITHM=%s needs JWT_SECRET", cfg.Algorithm))
	case !hs && cfg.PublicKey == "" && cfg.JWKSURL == "":
		errs = append(errs, fmt.Errorf("JWT_PUBLIC_KEY: no key material: JWT_ALGORITHM=%s needs JWT_PUBLIC_KEY or JWT_JWKS_URL", cfg.Algorithm))
	}
	switch {
	case asym && cfg.PublicKey != "":
		if err := a.loadPublicKey(cfg.PublicKey); err != nil {
			errs = append(errs, err)
		}
	case asym && cfg.JWKSURL != "":
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			// The URL may carry credentials: do not echo it.
			errs = append(errs, errors.New("JWT_JWKS_URL: is not an http:// or https:// URL"))
			break
		}
		a.jwks = newJWKS(cfg, u)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// loadPublicKey parses JWT_PUBLIC_KEY and checks that its family is one
// JWT_ALGORITHM accepts.
func (a *Authenticator) loadPublicKey(raw string) error {
	key, err := parsePublicKeyPEM(raw)
	if err != nil {
		return fmt.Errorf("JWT_PUBLIC_KEY: %w", err)
	}
	a.static = true
	switch k := key.(type) {
	case *rsa.PublicKey:
		if !a.algs["RS256"] && !a.algs["RS384"] && !a.algs["RS512"] {
			return fmt.Errorf("JWT_PUBLIC_KEY: holds an RSA key but JWT_ALGORITHM=%s needs an Ed25519 key", a.cfg.Algorithm)
		}
		if k.N.BitLen() < 1024 {
			return fmt.Errorf("JWT_PUBLIC_KEY: the RSA key has %d bits, fewer than the 1024 Go can verify with", k.N.BitLen())
		}
		a.rsaKey = k
	case ed25519.PublicKey:
		if !a.algs["EdDSA"] {
			return fmt.Errorf("JWT_PUBLIC_KEY: holds an Ed25519 key but JWT_ALGORITHM=%s needs an RSA key", a.cfg.Algorithm)
		}
		a.edKey = k
	}
	return nil
}

// parsePublicKeyPEM reads the first PEM block as an RSA or Ed25519 public
// key: PKIX "PUBLIC KEY", PKCS#1 "RSA PUBLIC KEY" or a certificate. Errors
// never include any of the value.
func parsePublicKeyPEM(raw string) (any, error) {
	raw = strings.ReplaceAll(strings.TrimSpace(raw), `\n`, "\n")
	block, _ := pem.Decode([]byte(raw))
	if block == nil {
		return nil, errors.New("holds no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("the PEM block is a %s, not a PUBLIC KEY", quote(block.Type))
	}
	if err != nil {
		return nil, errors.New("the PEM block is not a valid public key")
	}
	switch key.(type) {
	case *rsa.PublicKey, ed25519.PublicKey:
		return key, nil
	}
	return nil, errors.New("is neither an RSA nor an Ed25519 public key")
}

// KeySource names where verification keys come from, for the boot log:
// "secret", "public_key", "jwks", joined with "+" under auto.
func (a *Authenticator) KeySource() string {
	var s []string
	if a.secret != nil {
		s = append(s, "secret")
	}
	if a.static {
		s = append(s, "public_key")
	}
	if a.jwks != nil {
		s = append(s, "jwks")
	}
	return strings.Join(s, "+")
}

// Start fetches the JWKS once and starts its background refresh; without a
// JWKS it does nothing. A failed first fetch is logged and returned, never
// fatal: keys are fetched again on demand (JWT-6). Calling Start again, or
// after Stop, does nothing.
func (a *Authenticator) Start(ctx context.Context) error {
	a.mu.Lock()
	if a.jwks == nil || a.started || a.stopped {
		a.mu.Unlock()
		return nil
	}
	a.started = true
	ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	a.done = make(chan struct{})
	a.mu.Unlock()

	if a.jwks.url.Scheme == "http" {
		a.log.Warn("JWT_JWKS_URL uses http://: signing keys fetched in cleartext can be forged by anyone on the path")
	}
	n, err := a.jwks.refresh(ctx)
	if err != nil {
		a.log.Warn("JWKS pre-fetch failed (will retry on demand)", "err", err)
	} else {
		a.log.Info("JWKS pre-fetch OK", "keys", n)
	}
	go func() {
		defer close(a.done)
		a.jwks.run(ctx)
	}()
	return err
}

// Stop ends the JWKS refresh and waits for it. Safe to call more than once
// and without Start.
func (a *Authenticator) Stop() {
	a.mu.Lock()
	a.stopped = true
	cancel, done := a.cancel, a.done
	a.cancel = nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// quote renders a non-secret value for an error message, cut short if long.
func quote(v string) string {
	const max = 64
	if len(v) > max {
		return fmt.Sprintf("%q...", v[:max])
	}
	return fmt.Sprintf("%q", v)
}
