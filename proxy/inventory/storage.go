package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/forward"
)

// storageSpacing bounds what the storage reads cost a broker: after a read
// that took d, the cluster is not read again for storageSpacing × d, so
// its reads keep at most one PostgreSQL backend busy 1/storageSpacing of
// the time however many messages it retains. The broker sums the stored
// size of every message of the tenant (about 0.2–0.3 µs each): a
// million-message cluster is read every 10 s, a 20-million one about every
// 2 minutes instead of keeping a backend 60 % busy. storageSpacingMax caps
// the wait, so a read that timed out is tried again within 5 minutes.
const (
	storageSpacing    = 20
	storageSpacingMax = 5 * time.Minute
)

// RefreshStorage is one pass of the push-block pump: it sets or lifts the
// storage flag of every cluster pxdb lists, reading the retained bytes of
// those with a quota whose next read is due. A broker that does not
// answer leaves its cluster's flag as it was, and is logged.
func (i *Inventory) RefreshStorage(ctx context.Context) error {
	qctx, cancel := i.dbContext(ctx)
	rows, err := i.q.ClustersToReconcile(qctx)
	cancel()
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	for _, r := range rows {
		lim, target, err := clusterTarget(r, i.cfg.TenantHeader)
		if err == nil {
			err = i.refreshStorage(ctx, r, target, lim.MaxRetainedBytes)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			i.cfg.Logger.Warn("storage refresh of a cluster failed", "cluster", r.Slug, "err", err)
		}
	}
	return nil
}

// refreshStorage sets or lifts one cluster's storage flag. Without a quota
// the flag is off and the broker is not asked.
func (i *Inventory) refreshStorage(ctx context.Context, r pxdb.ClustersToReconcileRow, target forward.Target, quota int64) error {
	var retained int64
	if quota > 0 {
		start := time.Now()
		if !i.storageDue(r.ID, start) {
			return nil
		}
		var usage struct {
			RetainedBytes int64 `json:"retainedBytes"`
		}
		err := i.get(ctx, target, "/api/v1/resources/storage", &usage)
		i.mu.Lock()
		i.state(r.ID).storageNext = nextStorageRead(start, time.Since(start))
		i.mu.Unlock()
		if err != nil {
			return err
		}
		retained = usage.RetainedBytes
	}
	over := quota > 0 && retained > quota
	i.mu.Lock()
	s := i.state(r.ID)
	was := s.storageOver
	s.storageOver = over
	i.mu.Unlock()
	switch {
	case over && !was:
		i.cfg.Logger.Warn("storage quota exceeded: pushes refused", "cluster", r.Slug, "retained_bytes", retained, "max_retained_bytes", quota)
	case !over && was:
		i.cfg.Logger.Info("storage quota lifted", "cluster", r.Slug, "retained_bytes", retained, "max_retained_bytes", quota)
	}
	return nil
}

func (i *Inventory) storageDue(cluster uuid.UUID, now time.Time) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return !now.Before(i.state(cluster).storageNext)
}

// nextStorageRead is when a cluster whose read started at start and took
// took may be read again.
func nextStorageRead(start time.Time, took time.Duration) time.Time {
	return start.Add(min(storageSpacing*took, storageSpacingMax))
}
