package console

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/reply"
)

// minPassword is the shortest password an operator may set.
const minPassword = 8

// ServeOperator routes /api/operator/* for a live operator. Its scope is
// the cell of the cluster it is signed in to: the users of tenants with a
// cluster there, and those clusters. No route can make an operator:
// set_operator has no HTTP path.
//
//	GET    /api/operator/users
//	POST   /api/operator/users                              {email, password?, name?, cluster_id, role}
//	PATCH  /api/operator/users/{user_id}                    {name?, password?}
//	PUT    /api/operator/users/{user_id}/roles/{cluster_id} {role}
//	DELETE /api/operator/users/{user_id}/roles/{cluster_id}
func (c *Console) ServeOperator(w http.ResponseWriter, r *http.Request, req Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/operator/users")
	if !ok {
		reply.RouteBlocked(w)
		return
	}
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	ids := make([]uuid.UUID, 0, 2)
	for _, i := range []int{0, 2} {
		if i < len(parts) && parts[i] != "" {
			id, err := uuid.Parse(parts[i])
			if err != nil || len(parts[i]) != 36 {
				reply.Error(w, http.StatusNotFound, reply.CodeNotFound, "no such user or cluster")
				return
			}
			ids = append(ids, id)
		}
	}
	switch {
	case rest == "" && r.Method == http.MethodGet:
		c.listUsers(w, r, req)
	case rest == "" && r.Method == http.MethodPost:
		c.createUser(w, r, req)
	case len(parts) == 1 && len(ids) == 1 && r.Method == http.MethodPatch:
		c.updateUser(w, r, req, ids[0])
	case len(parts) == 3 && parts[1] == "roles" && len(ids) == 2 && r.Method == http.MethodPut:
		c.setRole(w, r, req, ids[0], ids[1])
	case len(parts) == 3 && parts[1] == "roles" && len(ids) == 2 && r.Method == http.MethodDelete:
		c.revokeRole(w, r, req, ids[0], ids[1])
	default:
		reply.RouteBlocked(w)
	}
}

type userView struct {
	ID          string          `json:"id"`
	Email       string          `json:"email"`
	Name        *string         `json:"name"`
	TenantSlug  string          `json:"tenant_slug"`
	IsOperator  bool            `json:"is_operator"`
	CreatedAt   string          `json:"created_at"`
	LastLoginAt *string         `json:"last_login_at"`
	Roles       json.RawMessage `json:"roles"`
}

func (c *Console) listUsers(w http.ResponseWriter, r *http.Request, req Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	rows, err := c.q.UsersOfCell(ctx, req.Cluster.CellID)
	if err != nil {
		c.dbError(w, err)
		return
	}
	out := make([]userView, 0, len(rows))
	for _, u := range rows {
		out = append(out, userView{ID: u.ID.String(), Email: u.Email, Name: u.Name, TenantSlug: u.TenantSlug,
			IsOperator: u.IsOperator, CreatedAt: ts(u.CreatedAt), LastLoginAt: tsPtr(u.LastLoginAt), Roles: u.Roles})
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

func (c *Console) createUser(w http.ResponseWriter, r *http.Request, req Request) {
	var body struct {
		Email     string    `json:"email"`
		Password  *string   `json:"password"`
		Name      *string   `json:"name"`
		ClusterID uuid.UUID `json:"cluster_id"`
		Role      string    `json:"role"`
	}
	if !decode(w, r, &body) {
		return
	}
	hash, ok := hashPassword(w, body.Password)
	if !ok {
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	id, err := c.q.UserOperatorCreate(ctx, pxdb.UserOperatorCreateParams{
		CellID: req.Cluster.CellID, Actor: req.User.ID, ClusterID: body.ClusterID, Email: body.Email,
		PasswordHash: hash, Name: body.Name, Role: body.Role,
	})
	if err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id.String()})
}

func (c *Console) updateUser(w http.ResponseWriter, r *http.Request, req Request, user uuid.UUID) {
	var body struct {
		Name     *string `json:"name"`
		Password *string `json:"password"`
	}
	if !decode(w, r, &body) {
		return
	}
	hash, ok := hashPassword(w, body.Password)
	if !ok {
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.q.UserOperatorUpdate(ctx, pxdb.UserOperatorUpdateParams{
		CellID: req.Cluster.CellID, Actor: req.User.ID, UserID: user, Name: body.Name, PasswordHash: hash,
	}); err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (c *Console) setRole(w http.ResponseWriter, r *http.Request, req Request, user, cluster uuid.UUID) {
	var body struct {
		Role string `json:"role"`
	}
	if !decode(w, r, &body) {
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.q.ClusterRoleOperatorSet(ctx, pxdb.ClusterRoleOperatorSetParams{
		CellID: req.Cluster.CellID, Actor: req.User.ID, UserID: user, ClusterID: cluster, Role: body.Role,
	}); err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (c *Console) revokeRole(w http.ResponseWriter, r *http.Request, req Request, user, cluster uuid.UUID) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.q.ClusterRoleOperatorRevoke(ctx, pxdb.ClusterRoleOperatorRevokeParams{
		CellID: req.Cluster.CellID, Actor: req.User.ID, UserID: user, ClusterID: cluster,
	}); err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// hashPassword bcrypts a password (nil stays nil); a refusal is written
// when ok is false.
func hashPassword(w http.ResponseWriter, pw *string) (*string, bool) {
	if pw == nil {
		return nil, true
	}
	if len(*pw) < minPassword || len(*pw) > 72 {
		reply.Error(w, http.StatusBadRequest, reply.CodeInvalidRequest, "a password has 8 to 72 bytes")
		return nil, false
	}
	h, err := bcrypt.GenerateFromPassword([]byte(*pw), bcrypt.DefaultCost)
	if err != nil {
		reply.Error(w, http.StatusInternalServerError, "internal", "could not hash the password")
		return nil, false
	}
	s := string(h)
	return &s, true
}
