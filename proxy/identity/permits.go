package identity

import (
	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/catalog"
)

// Permits reports whether a user with role on a cluster may reach a route
// of class c there (PROXY.md §4.1): produce for admins and producers,
// consume for admins and consumers, queue administration for admins, reads
// for every role, gated writes for every role but viewer. Operator routes
// are decided elsewhere (a live operator only); blocked ones never.
func Permits(role string, c routes.ProxyClass) bool {
	switch c {
	case routes.ProxyProduce:
		return role == catalog.RoleAdmin || role == catalog.RoleProducer
	case routes.ProxyConsume:
		return role == catalog.RoleAdmin || role == catalog.RoleConsumer
	case routes.ProxyQueueAdmin:
		return role == catalog.RoleAdmin
	case routes.ProxyRead, routes.ProxyGatedRead:
		return isRole(role)
	case routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed:
		return isRole(role) && role != catalog.RoleViewer
	}
	return false
}

func isRole(r string) bool {
	switch r {
	case catalog.RoleAdmin, catalog.RoleProducer, catalog.RoleConsumer, catalog.RoleViewer:
		return true
	}
	return false
}

// Access is what a role passes in the broker's access levels, for the
// dashboard (it offers an action when /auth/me's access holds its level).
// Only admins pass read-write and admin: every dashboard action that needs
// them is queue administration at the proxy.
func Access(role string) []string {
	switch role {
	case catalog.RoleAdmin:
		return []string{string(routes.ReadOnly), string(routes.WriteOnly), string(routes.ReadWrite), string(routes.Admin)}
	case catalog.RoleProducer:
		return []string{string(routes.ReadOnly), string(routes.WriteOnly)}
	case catalog.RoleConsumer, catalog.RoleViewer:
		return []string{string(routes.ReadOnly)}
	}
	return []string{}
}
