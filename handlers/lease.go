package handlers

import (
	"context"
	"fmt"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// defaultExtendSeconds applies when the body names no `seconds`.
const defaultExtendSeconds = 60

// ExtendLease pushes back the expiry of every live claim held by a lease.
func (s *Server) ExtendLease(ctx context.Context, req api.ExtendLeaseRequestObject) (api.ExtendLeaseResponseObject, error) {
	seconds := defaultExtendSeconds
	if req.Body != nil && req.Body.Seconds != nil {
		seconds = *req.Body.Seconds
	}
	leaseID := req.LeaseId
	expiries, err := s.q.PartitionConsumerExtendLease(ctx, db.PartitionConsumerExtendLeaseParams{
		Seconds: int32(seconds), LeaseID: &leaseID,
	})
	if err != nil {
		return nil, fmt.Errorf("extend lease: %w", err)
	}
	resp := api.ExtendLease200JSONResponse{LeaseId: leaseID, Renewed: len(expiries), Success: len(expiries) > 0}
	if len(expiries) == 0 {
		exists, err := s.q.PartitionConsumerLeaseExists(ctx, &leaseID)
		if err != nil {
			return nil, fmt.Errorf("read lease: %w", err)
		}
		msg := "Lease not found"
		if exists {
			msg = "Lease already expired"
		}
		resp.Error = &msg
		return resp, nil
	}
	// The earliest new expiry is the one the consumer must beat.
	earliest := expiries[0].Time
	for _, e := range expiries[1:] {
		if e.Time.Before(earliest) {
			earliest = e.Time
		}
	}
	at := fmtMillis(earliest)
	resp.NewExpiresAt, resp.ExpiresAt, resp.LeaseExpiresAt = &at, &at, &at
	return resp, nil
}
