package console

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/reply"
)

type keyView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	CreatedBy  *string  `json:"created_by"`
	LastUsedAt *string  `json:"last_used_at"`
	RevokedAt  *string  `json:"revoked_at"`
}

// listKeys is GET /api/console/keys: the cluster's keys, live first. Never
// a key itself: pxdb holds only hashes.
func (c *Console) listKeys(w http.ResponseWriter, r *http.Request, req Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	rows, err := c.q.ApiKeysOfCluster(ctx, req.Cluster.ID)
	if err != nil {
		c.dbError(w, err)
		return
	}
	out := make([]keyView, 0, len(rows))
	for _, k := range rows {
		out = append(out, keyView{ID: k.ID.String(), Name: k.Name, Scopes: k.Scopes, CreatedAt: ts(k.CreatedAt),
			CreatedBy: k.CreatedBy, LastUsedAt: tsPtr(k.LastUsedAt), RevokedAt: tsPtr(k.RevokedAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

// issueKey is POST /api/console/keys {name, scopes}: a new key, whose
// plaintext is in this answer and nowhere else, ever.
func (c *Console) issueKey(w http.ResponseWriter, r *http.Request, req Request) {
	var body struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	if !decode(w, r, &body) {
		return
	}
	if len(body.Scopes) == 0 {
		reply.Error(w, http.StatusBadRequest, reply.CodeInvalidRequest, "scopes must be a non-empty subset of produce, consume, admin, read")
		return
	}
	key, hash, err := apikey.Generate("live")
	if err != nil {
		c.cfg.Logger.Error("console: generating a key failed", "err", err)
		reply.Error(w, http.StatusInternalServerError, "internal", "could not generate a key")
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	id, err := c.q.ApiKeyConsoleIssue(ctx, pxdb.ApiKeyConsoleIssueParams{
		ClusterID: req.Cluster.ID, Actor: req.User.ID, Name: body.Name, KeyHash: hash, Scopes: body.Scopes,
	})
	if err != nil {
		c.dbError(w, err)
		return
	}
	c.cfg.Logger.Info("console: api key issued", "cluster", req.Cluster.Slug, "key_id", id, "user_id", req.User.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"id": id.String(), "key": key, "name": body.Name, "scopes": body.Scopes})
}

// revokeKey is DELETE /api/console/keys/{id}: only a live key of this
// cluster; any other id is 404 and changes nothing.
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, req Request, raw string) {
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		reply.Error(w, http.StatusNotFound, reply.CodeNotFound, "no live key "+raw+" on this cluster")
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.q.ApiKeyConsoleRevoke(ctx, pxdb.ApiKeyConsoleRevokeParams{ClusterID: req.Cluster.ID, Actor: req.User.ID, KeyID: id}); err != nil {
		c.dbError(w, err)
		return
	}
	c.cfg.Logger.Info("console: api key revoked", "cluster", req.Cluster.Slug, "key_id", id, "user_id", req.User.ID)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "id": id.String()})
}
