package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// refetchEvery is the least time between two fetches caused by unknown
	// kids. It is counted from the last attempt, so a dead endpoint is not
	// hit on every request (the reference counted only successes).
	refetchEvery = 5 * time.Second
	// warnEvery rate-limits the warning of failed background refreshes.
	warnEvery = time.Minute
	// maxJWKSBytes caps the JWKS document.
	maxJWKSBytes = 1 << 20
)

// jwk is one usable key of a JWKS document.
type jwk struct {
	key any    // *rsa.PublicKey or ed25519.PublicKey
	alg string // the key's "alg", if the document gives one
}

// keySet is one fetched JWKS document, never changed after the fetch.
type keySet struct {
	byKID map[string]jwk // a key without kid is stored under ""
}

// lookup finds the key of a token. A token without kid matches only when the
// set holds exactly one key (DECISIONS §5): with more, the choice would be a
// guess.
func (s *keySet) lookup(kid string) (jwk, bool) {
	if s == nil {
		return jwk{}, false
	}
	if kid == "" {
		if len(s.byKID) != 1 {
			return jwk{}, false
		}
		for _, k := range s.byKID {
			return k, true
		}
	}
	k, ok := s.byKID[kid]
	return k, ok
}

// jwks is the key cache of JWT_JWKS_URL.
type jwks struct {
	url      *url.URL
	client   *http.Client
	timeout  time.Duration
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	keys atomic.Pointer[keySet]

	mu          sync.Mutex // serialises fetches; guards the fields below
	lastAttempt time.Time
	lastWarn    time.Time
}

func newJWKS(cfg Config, u *url.URL) *jwks {
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &jwks{
		url:      u,
		client:   client,
		timeout:  cfg.JWKSTimeout,
		interval: cfg.JWKSRefreshInterval,
		now:      cfg.NowFunc,
		log:      cfg.Logger,
	}
}

// key returns the key of kid, fetching the document again when the kid is
// unknown and the last attempt is at least refetchEvery old.
func (j *jwks) key(ctx context.Context, kid string) (jwk, bool) {
	if k, ok := j.keys.Load().lookup(kid); ok {
		return k, true
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	// Another request may have fetched while this one waited.
	if k, ok := j.keys.Load().lookup(kid); ok {
		return k, true
	}
	if !j.lastAttempt.IsZero() && j.now().Sub(j.lastAttempt) < refetchEvery {
		return jwk{}, false
	}
	// The fetch is shared: a client that goes away must not cancel it.
	if _, err := j.fetchLocked(context.WithoutCancel(ctx)); err != nil {
		j.warnLocked("JWKS re-fetch for an unknown key id failed", err)
	}
	return j.keys.Load().lookup(kid)
}

// refresh fetches the document now, whatever the throttle says, and returns
// the number of usable keys.
func (j *jwks) refresh(ctx context.Context) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fetchLocked(ctx)
}

// run refreshes the document every interval until ctx ends. A failure keeps
// the old keys.
func (j *jwks) run(ctx context.Context) {
	t := time.NewTicker(j.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j.mu.Lock()
		if _, err := j.fetchLocked(ctx); err != nil && ctx.Err() == nil {
			j.warnLocked("JWKS refresh failed, keeping the previous keys", err)
		}
		j.mu.Unlock()
	}
}

// warnLocked logs a fetch failure at most once per warnEvery.
func (j *jwks) warnLocked(msg string, err error) {
	now := j.now()
	if !j.lastWarn.IsZero() && now.Sub(j.lastWarn) < warnEvery {
		return
	}
	j.lastWarn = now
	j.log.Warn(msg, "err", err)
}

// fetchLocked GETs the document and, on success, replaces the whole cache:
// keys removed upstream disappear. The attempt is stamped first, so that it
// counts for the throttle even when it fails.
func (j *jwks) fetchLocked(ctx context.Context) (int, error) {
	j.lastAttempt = j.now()
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("build jwks request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = j.url.Redacted()
		}
		return 0, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("fetch jwks: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return 0, fmt.Errorf("read jwks: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return 0, fmt.Errorf("read jwks: document larger than %d bytes", maxJWKSBytes)
	}
	set, err := parseJWKS(body)
	if err != nil {
		return 0, err
	}
	j.keys.Store(set)
	return len(set.byKID), nil
}

// parseJWKS reads the usable keys of a JWKS document: kty RSA (n, e) and kty
// OKP with crv Ed25519 (x). Other keys, keys marked for encryption and keys
// that do not decode are skipped; the first key of a kid wins.
func parseJWKS(body []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode jwks: %w", err)
	}
	set := &keySet{byKID: map[string]jwk{}}
	for _, raw := range doc.Keys {
		var k struct {
			Kty, Kid, Use, Alg, N, E, Crv, X string
		}
		if json.Unmarshal(raw, &k) != nil || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if _, dup := set.byKID[k.Kid]; dup {
			continue
		}
		var key any
		switch k.Kty {
		case "RSA":
			n, errN := b64(k.N)
			e, errE := b64(k.E)
			if errN != nil || errE != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
				continue
			}
			exp := new(big.Int).SetBytes(e)
			if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > 1<<31-1 {
				continue
			}
			key = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}
		case "OKP":
			x, err := b64(k.X)
			if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
				continue
			}
			key = ed25519.PublicKey(x)
		default:
			continue
		}
		set.byKID[k.Kid] = jwk{key: key, alg: k.Alg}
	}
	return set, nil
}

// b64 decodes base64url with or without padding.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
