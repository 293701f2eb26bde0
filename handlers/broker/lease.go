package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// Extended is the outcome of ExtendLease.
type Extended struct {
	Renewed   int       // claims extended
	ExpiresAt time.Time // the earliest new expiry: the one the consumer must beat
	// Expired: nothing renewed because the lease exists but expired; with
	// Renewed 0 and Expired false the lease is unknown.
	Expired bool
}

// ExtendLease pushes back the expiry of every live claim held by leaseID to
// now + d, never earlier than it was. d <= 0 extends each claim by its
// queue's lease time (defaultLeaseSeconds where that is 0), the time a pop
// leases for.
func (b *Broker) ExtendLease(ctx context.Context, tenant, leaseID string, d time.Duration) (Extended, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return Extended{}, err
	}
	var seconds *int32
	if d > 0 {
		seconds = new(int32(d / time.Second))
	}
	expiries, err := b.q.PartitionConsumerExtendLease(ctx, db.PartitionConsumerExtendLeaseParams{
		Seconds: seconds, DefaultSeconds: defaultLeaseSeconds, LeaseID: &leaseID, TenantID: tid,
	})
	if err != nil {
		return Extended{}, pgerr.Translate(fmt.Errorf("extend lease: %w", err))
	}
	if len(expiries) == 0 {
		exists, err := b.q.PartitionConsumerLeaseExists(ctx, db.PartitionConsumerLeaseExistsParams{LeaseID: &leaseID, TenantID: tid})
		if err != nil {
			return Extended{}, pgerr.Translate(fmt.Errorf("read lease: %w", err))
		}
		return Extended{Expired: exists}, nil
	}
	earliest := expiries[0].Time
	for _, e := range expiries[1:] {
		if e.Time.Before(earliest) {
			earliest = e.Time
		}
	}
	return Extended{Renewed: len(expiries), ExpiresAt: earliest}, nil
}
