package handlers

import (
	"context"
	"fmt"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// ListTenants lists the tenants that own something on this cell, the
// default one always (the dashboard's tenant picker). Cell-wide: the
// request's own tenant plays no part.
func (s *Server) ListTenants(ctx context.Context, _ api.ListTenantsRequestObject) (api.ListTenantsResponseObject, error) {
	rows, err := s.rq().QueueListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	resp := api.ListTenants200JSONResponse{Tenancy: s.cfg.Tenancy, Default: broker.DefaultTenant}
	resp.Tenants = make([]api.TenantSummary, 0, len(rows)+1)
	seenDefault := false
	for _, r := range rows {
		id := r.TenantID.String()
		seenDefault = seenDefault || id == broker.DefaultTenant
		resp.Tenants = append(resp.Tenants, api.TenantSummary{Id: id, Queues: int(r.Queues), StreamQueries: int(r.StreamQueries)})
	}
	if !seenDefault {
		// Sorted by id, and the default tenant's id is lower than any
		// random (v4 or v7) UUID's: it goes first.
		resp.Tenants = append([]api.TenantSummary{{Id: broker.DefaultTenant}}, resp.Tenants...)
	}
	return resp, nil
}
