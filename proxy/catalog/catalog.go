// Package catalog answers what the control plane (pxdb) says about clusters,
// API keys, users, their roles and revoked sessions, with a cache that every proxy process empties the moment a
// control-plane function announces a change on queen_proxy_inval.
//
// Freshness: an answer is served from the cache for 30 s (a miss for 5 s),
// and only while this process is listening: an announcement missed while the
// listening connection was down could be a revocation, so until it is back
// every lookup asks pxdb. When pxdb itself does not answer, a cluster or key
// it confirmed before may be served for up to StaleGrace; one it said was
// unknown or revoked never comes back that way.
package catalog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/pxerr"
)

// Errors of the lookups.
var (
	ErrNotFound    = errors.New("not found")           // unknown slug, or unknown or revoked key
	ErrUnavailable = errors.New("pxdb is unavailable") // and nothing cached may stand in
)

// Channel is where the control-plane functions announce changes.
const Channel = "queen_proxy_inval"

// Cache lifetimes (PROXY.md §3.2) and the last_used_at flush interval.
const (
	hitTTL        = 30 * time.Second
	missTTL       = 5 * time.Second
	touchInterval = 15 * time.Second
)

// Config is what New needs.
type Config struct {
	Pool       *pgxpool.Pool
	Timeout    time.Duration // PXDB_TIMEOUT_MS: bounds each lookup and the listener's connect
	StaleGrace time.Duration // QUEEN_PROXY_STALE_GRACE_MS
	Logger     *slog.Logger
	NowFunc    func() time.Time // time.Now when nil
	// SweepInterval is how often revocations of expired sessions are
	// deleted (QUEEN_PROXY_REVOCATION_SWEEP_MS); 0 never. The first sweep
	// runs at Start.
	SweepInterval time.Duration
}

// Catalog looks clusters and keys up. Start runs the listener and the
// last_used_at flusher; Stop ends them. Lookups work without Start, uncached.
type Catalog struct {
	cfg Config
	q   *pxdb.Queries

	mu        sync.Mutex
	keys      map[string]*entry[Key]     // by key hash
	clusters  map[string]*entry[Cluster] // by slug, and by "#<id>"
	users     map[string]*entry[User]    // by id
	roles     map[string]*entry[role]    // by "<user>/<cluster>"
	revoked   map[string]*entry[bool]    // by session jti
	listening bool                       // the LISTEN connection is up
	epoch     uint64                     // bumped when listening starts: older entries are not fresh
	gen       uint64                     // bumped by every invalidation: a lookup racing one is not cached
	touched   map[uuid.UUID]struct{}     // keys used since the last flush

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

type entry[T any] struct {
	val   T
	found bool
	at    time.Time
	epoch uint64
}

// New returns a Catalog on cfg.Pool.
func New(cfg Config) *Catalog {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	return &Catalog{
		cfg: cfg, q: pxdb.New(cfg.Pool),
		keys: map[string]*entry[Key]{}, clusters: map[string]*entry[Cluster]{},
		users: map[string]*entry[User]{}, roles: map[string]*entry[role]{}, revoked: map[string]*entry[bool]{},
		touched: map[uuid.UUID]struct{}{}, done: make(chan struct{}),
	}
}

// Cluster returns the cluster with this slug.
func (c *Catalog) Cluster(ctx context.Context, slug string) (Cluster, error) {
	return lookup(ctx, c, c.clusters, slug, func(ctx context.Context) (Cluster, error) {
		row, err := c.q.ClusterBySlug(ctx, slug)
		return clusterFromRow(row), err
	})
}

// Key returns the live key whose hash is keyHash, and notes that it was
// used.
func (c *Catalog) Key(ctx context.Context, keyHash string) (Key, error) {
	k, err := lookup(ctx, c, c.keys, keyHash, func(ctx context.Context) (Key, error) {
		row, err := c.q.ApiKeyLookup(ctx, keyHash)
		return keyFromRow(row), err
	})
	if err == nil {
		c.mu.Lock()
		c.touched[k.ID] = struct{}{}
		c.mu.Unlock()
	}
	return k, err
}

// lookup serves m[k] while fresh, asks pxdb otherwise, and falls back on a
// stale positive entry when pxdb fails.
func lookup[T any](ctx context.Context, c *Catalog, m map[string]*entry[T], k string, query func(context.Context) (T, error)) (T, error) {
	now := c.cfg.NowFunc()
	c.mu.Lock()
	e := m[k]
	if e != nil && c.listening && e.epoch == c.epoch && now.Sub(e.at) < ttl(e.found) {
		c.mu.Unlock()
		if !e.found {
			var zero T
			return zero, ErrNotFound
		}
		return e.val, nil
	}
	gen, epoch := c.gen, c.epoch
	c.mu.Unlock()

	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	v, err := query(qctx)
	cancel()
	switch {
	case err == nil || errors.Is(pxerr.Translate(err), pxerr.ErrNotFound):
		found := err == nil
		c.mu.Lock()
		if c.gen == gen {
			m[k] = &entry[T]{val: v, found: found, at: now, epoch: epoch}
		}
		c.mu.Unlock()
		if !found {
			var zero T
			return zero, ErrNotFound
		}
		return v, nil
	case e != nil && !e.found:
		// pxdb said unknown or revoked: that stays the answer.
		var zero T
		return zero, ErrNotFound
	case e != nil && now.Sub(e.at) < c.cfg.StaleGrace:
		c.cfg.Logger.Warn("pxdb lookup failed; serving the last known answer", "err", err,
			"age", now.Sub(e.at).Round(time.Second))
		return e.val, nil
	}
	c.cfg.Logger.Warn("pxdb lookup failed", "err", err)
	var zero T
	return zero, ErrUnavailable
}

func ttl(found bool) time.Duration {
	if found {
		return hitTTL
	}
	return missTTL
}

// Invalidate drops everything cached about a cluster (its keys, the roles
// on it), every negative entry (a new key, cluster or role may have
// appeared), and every user (erasing a tenant announces its clusters only).
func (c *Catalog) Invalidate(cluster uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.keys {
		if !e.found || e.val.Cluster.ID == cluster {
			delete(c.keys, k)
		}
	}
	for k, e := range c.clusters {
		if !e.found || e.val.ID == cluster {
			delete(c.clusters, k)
		}
	}
	for k, e := range c.roles {
		if !e.found || e.val.cluster == cluster {
			delete(c.roles, k)
		}
	}
	clear(c.users)
}

// setListening records that the listening connection came up or went down.
// Coming up starts a new epoch: what was cached before may have missed an
// announcement.
func (c *Catalog) setListening(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listening = up
	c.gen++
	if up {
		c.epoch++
	}
}

// Listening reports whether announcements are being received.
func (c *Catalog) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listening
}
