package handlers

import (
	"context"
	"fmt"

	"github.com/queenforgo/queen/gen/api"
)

// GetStorage sums what the tenant's messages take in storage, live, for
// queen-proxy's retained-bytes quota (docs/proxy.md), which polls it once a
// reconcile interval. It reads every message row of the tenant.
func (s *Server) GetStorage(ctx context.Context, _ api.GetStorageRequestObject) (api.GetStorageResponseObject, error) {
	row, err := s.rq().TenantRetainedBytes(ctx, tenantID(ctx))
	if err != nil {
		return nil, fmt.Errorf("sum the tenant's payloads: %w", err)
	}
	return api.GetStorage200JSONResponse{RetainedBytes: row.RetainedBytes, Messages: row.Messages}, nil
}
