package catalog

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
)

// revokedTTL is how long "this session is not revoked" is believed
// (PROXY.md §3.3); a revocation announced on queen_proxy_inval replaces it at
// once.
const revokedTTL = 60 * time.Second

// The roles a user may hold on a cluster.
const (
	RoleAdmin    = "admin"
	RoleProducer = "producer"
	RoleConsumer = "consumer"
	RoleViewer   = "viewer"
)

// User is what a session needs about the user it names.
type User struct {
	ID         uuid.UUID
	Email      string
	Name       *string
	IsOperator bool // users.is_operator; live only where QUEEN_PROXY_OPERATOR_ENABLED
	TenantID   uuid.UUID
	TenantSlug string
}

// role is a cached role with the cluster it is on, so that announcing the
// cluster drops it.
type role struct {
	name    string
	cluster uuid.UUID
}

// ClusterByID returns the cluster with this id.
func (c *Catalog) ClusterByID(ctx context.Context, id uuid.UUID) (Cluster, error) {
	// Slugs are DNS labels, so "#<id>" never collides with one.
	return lookup(ctx, c, c.clusters, "#"+id.String(), func(ctx context.Context) (Cluster, error) {
		row, err := c.q.ClusterByID(ctx, id)
		return clusterFromRow(pxdb.ClusterBySlugRow(row)), err
	})
}

// User returns the user with this id; ErrNotFound when it is gone (erased,
// or its tenant deleted).
func (c *Catalog) User(ctx context.Context, id uuid.UUID) (User, error) {
	return lookup(ctx, c, c.users, id.String(), func(ctx context.Context) (User, error) {
		r, err := c.q.UserByID(ctx, id)
		return User{ID: r.ID, Email: r.Email, Name: r.Name, IsOperator: r.IsOperator, TenantID: r.TenantID, TenantSlug: r.TenantSlug}, err
	})
}

// Role returns a user's role on a cluster; ErrNotFound when it has none.
func (c *Catalog) Role(ctx context.Context, user, cluster uuid.UUID) (string, error) {
	r, err := lookup(ctx, c, c.roles, user.String()+"/"+cluster.String(), func(ctx context.Context) (role, error) {
		name, err := c.q.ClusterRoleOf(ctx, pxdb.ClusterRoleOfParams{UserID: user, ClusterID: cluster})
		return role{name: name, cluster: cluster}, err
	})
	return r.name, err
}

// Revoked reports whether the session with this jti was revoked (logged
// out). ErrUnavailable means pxdb could not say: the caller chooses between
// failing open and closed (QUEEN_PROXY_REVOCATION_STRICT). An uncertain
// answer is never cached, and a revocation is never forgotten for a cached
// "not revoked".
func (c *Catalog) Revoked(ctx context.Context, jti string) (bool, error) {
	now := c.cfg.NowFunc()
	c.mu.Lock()
	e := c.revoked[jti]
	if e != nil && (e.val || (c.listening && e.epoch == c.epoch && now.Sub(e.at) < revokedTTL)) {
		c.mu.Unlock()
		return e.val, nil
	}
	epoch := c.epoch
	c.mu.Unlock()

	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	revoked, err := c.q.RevokedTokenExists(qctx, jti)
	cancel()
	if err != nil {
		c.cfg.Logger.Warn("pxdb revocation lookup failed", "err", err)
		return false, ErrUnavailable
	}
	c.mu.Lock()
	if cur := c.revoked[jti]; cur == nil || !cur.val {
		c.revoked[jti] = &entry[bool]{val: revoked, found: true, at: now, epoch: epoch}
	}
	c.mu.Unlock()
	return revoked, nil
}

// MarkRevoked records a revocation this process knows of (its own logout,
// or one announced by another process), effective for the next lookup.
func (c *Catalog) MarkRevoked(jti string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revoked[jti] = &entry[bool]{val: true, found: true, at: c.cfg.NowFunc(), epoch: c.epoch}
}

// forgetUser drops what is cached about one user.
func (c *Catalog) forgetUser(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.users, id.String())
}

// pruneRevoked forgets revocation answers past their lifetime, so the map
// holds the sessions of the last minute, not of every session ever seen. A
// forgotten revocation is asked of pxdb again.
func (c *Catalog) pruneRevoked() {
	now := c.cfg.NowFunc()
	c.mu.Lock()
	defer c.mu.Unlock()
	for jti, e := range c.revoked {
		if now.Sub(e.at) >= revokedTTL {
			delete(c.revoked, jti)
		}
	}
}

// sweepRevoked removes revocations of sessions that expired anyway.
func (c *Catalog) sweepRevoked(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	n, err := c.q.RevokedTokensSweep(sctx)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		c.cfg.Logger.Warn("pxdb: sweeping expired revocations failed; next sweep retries", "err", err)
	case n > 0:
		c.cfg.Logger.Info("expired session revocations swept", "count", n)
	}
}

// Membership is one cluster a user may act on, for /auth/me.
type Membership struct {
	ID         uuid.UUID
	Slug       string
	Role       string
	TenantSlug string
	TenantID   uuid.UUID
	Status     Status
	CellSlug   string
}

// Memberships lists the clusters a user has a role on; for an operator,
// every cluster, as admin. Not cached: it serves /auth/me only.
func (c *Catalog) Memberships(ctx context.Context, user uuid.UUID, operator bool) ([]Membership, error) {
	qctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	out := []Membership{}
	if operator {
		rows, err := c.q.ClustersAll(qctx)
		for _, r := range rows {
			out = append(out, Membership{ID: r.ID, Slug: r.Slug, Role: RoleAdmin, TenantSlug: r.TenantSlug, TenantID: r.TenantID,
				Status: MergeStatus(r.TenantStatus, r.Status), CellSlug: r.CellSlug})
		}
		return out, err
	}
	rows, err := c.q.ClustersOfUser(qctx, user)
	for _, r := range rows {
		out = append(out, Membership{ID: r.ID, Slug: r.Slug, Role: r.Role, TenantSlug: r.TenantSlug, TenantID: r.TenantID,
			Status: MergeStatus(r.TenantStatus, r.Status), CellSlug: r.CellSlug})
	}
	return out, err
}
