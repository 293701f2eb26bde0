package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// LeaseExtendDefault applies when an extension names no duration.
const LeaseExtendDefault = 60 * time.Second

// Extended is the outcome of ExtendLease.
type Extended struct {
	Renewed   int       // claims extended
	ExpiresAt time.Time // the earliest new expiry: the one the consumer must beat
	// Expired: nothing renewed because the lease exists but expired; with
	// Renewed 0 and Expired false the lease is unknown.
	Expired bool
}

// ExtendLease pushes back the expiry of every live claim held by leaseID on
// the tenant's partitions to at least now + d (d <= 0: LeaseExtendDefault).
// Another tenant's lease is unknown here.
func (b *Broker) ExtendLease(ctx context.Context, tenant, leaseID string, d time.Duration) (Extended, error) {
	tid, err := tenantID(tenant)
	if err != nil {
		return Extended{}, err
	}
	if d <= 0 {
		d = LeaseExtendDefault
	}
	expiries, err := b.q.PartitionConsumerExtendLease(ctx, db.PartitionConsumerExtendLeaseParams{
		Seconds: int32(d / time.Second), LeaseID: &leaseID, TenantID: tid,
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
