package console

import (
	"net/http"

	"github.com/queenforgo/queen/gen/pxdb"
)

type memberView struct {
	UserID      string  `json:"user_id"`
	Email       string  `json:"email"`
	Name        *string `json:"name"`
	Role        string  `json:"role"`
	Since       string  `json:"since"`
	LastLoginAt *string `json:"last_login_at"`
}

// listMembers is GET /api/console/members: who has which role on the
// cluster.
func (c *Console) listMembers(w http.ResponseWriter, r *http.Request, req Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	rows, err := c.q.ClusterMembers(ctx, req.Cluster.ID)
	if err != nil {
		c.dbError(w, err)
		return
	}
	out := make([]memberView, 0, len(rows))
	for _, m := range rows {
		out = append(out, memberView{UserID: m.ID.String(), Email: m.Email, Name: m.Name, Role: m.Role,
			Since: ts(m.CreatedAt), LastLoginAt: tsPtr(m.LastLoginAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": out})
}

// grantMember is POST /api/console/members {email, role}: gives a user of
// the cluster's tenant a role, or changes it. A user of another tenant is
// the same 404 as no user; demoting the last admin is 400.
func (c *Console) grantMember(w http.ResponseWriter, r *http.Request, req Request) {
	var body struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if !decode(w, r, &body) {
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	user, err := c.q.ClusterRoleConsoleGrant(ctx, pxdb.ClusterRoleConsoleGrantParams{
		ClusterID: req.Cluster.ID, Actor: req.User.ID, Email: body.Email, Role: body.Role,
	})
	if err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "user_id": user.String(), "role": body.Role})
}

// revokeMember is DELETE /api/console/members {email}: removes a user's
// role on the cluster; removing the last admin is 400.
func (c *Console) revokeMember(w http.ResponseWriter, r *http.Request, req Request) {
	var body struct {
		Email string `json:"email"`
	}
	if !decode(w, r, &body) {
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	user, err := c.q.ClusterRoleConsoleRevoke(ctx, pxdb.ClusterRoleConsoleRevokeParams{
		ClusterID: req.Cluster.ID, Actor: req.User.ID, Email: body.Email,
	})
	if err != nil {
		c.dbError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "user_id": user.String()})
}
