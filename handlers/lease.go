package handlers

import (
	"context"
	"time"

	"github.com/queenforgo/queen/gen/api"
)

// ExtendLease pushes back the expiry of every live claim held by a lease
// (broker.ExtendLease).
func (s *Server) ExtendLease(ctx context.Context, req api.ExtendLeaseRequestObject) (api.ExtendLeaseResponseObject, error) {
	var d time.Duration
	if req.Body != nil && req.Body.Seconds != nil {
		d = time.Duration(*req.Body.Seconds) * time.Second
	}
	ext, err := s.b.ExtendLease(ctx, tenant(ctx), req.LeaseId, d)
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.ExtendLease400JSONResponse](msg), nil
	}
	if err != nil {
		return nil, err
	}
	resp := api.ExtendLease200JSONResponse{LeaseId: req.LeaseId, Renewed: ext.Renewed, Success: ext.Renewed > 0}
	if ext.Renewed == 0 {
		msg := "Lease not found"
		if ext.Expired {
			msg = "Lease already expired"
		}
		resp.Error = &msg
		return resp, nil
	}
	at := fmtMillis(ext.ExpiresAt)
	resp.NewExpiresAt, resp.ExpiresAt, resp.LeaseExpiresAt = &at, &at, &at
	return resp, nil
}
