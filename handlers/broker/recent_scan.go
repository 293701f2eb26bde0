package broker

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// A queue-wide pop scans for candidate partitions (PartitionListPopCandidates),
// then claims one: two round trips, and the scan was the pop's second
// largest statement (docs/benchmarks.md, "Round 4: pop and ack"). Under a
// backlog every scan of a (queue, group) lists the same partitions, and a
// pop claims only one of them. So the candidates a scan listed and its pop
// did not try are kept for a moment, and the next pops of the same (queue,
// group) on this broker each take one of them and claim it without
// scanning.
//
// Only partitions that had more than a batch past the group's cursor are
// kept, so that a claim of one finds messages unless another broker's
// consumers drained it meanwhile; where consumers keep up with the pushes,
// partitions hold less than that and every pop scans as before. Each kept
// partition is given to one pop only, and a list older than recentScanTTL
// is not used. The claim decides on the rows as always: a kept partition
// that was leased or drained since only costs its claim, after which the
// pop takes another, then scans. A pop that finds nothing has always
// scanned: what it reports empty (known_empty.go) is a scan's finding.
// Queues with a window buffer keep nothing: the window is the scan's test,
// not the claim's, and a push may reopen it within the list's moment.

// recentScanTTL is how long the partitions a scan listed are kept for the
// next pops.
const recentScanTTL = 100 * time.Millisecond

// recentScanTries is how many kept partitions a pop claims, at most,
// before it scans.
const recentScanTries = 2

type recentScans struct {
	mu sync.Mutex
	m  map[watermarkKey]*recentScan
	// claimed is when a pop of this broker last started a claim of each
	// partition, for recentScanTTL: pops that scan at the same time list
	// the same partitions, and what one of them claims (or is claiming)
	// must not be kept, or tried first, by another.
	claimed map[uuid.UUID]claimTimes
}

// claimTimes is when a claim of a partition by a pop of this broker started,
// and when it returned (zero while in flight).
type claimTimes struct{ started, done time.Time }

// recentScan is what one scan of a (queue, group) left for later pops.
type recentScan struct {
	queueID uuid.UUID // a queue deleted and created again starts afresh
	at      time.Time
	parts   []partRef
}

// keep stores, for the next pops of (queue, group), the candidates of a
// scan sent at scanned that its pop did not try, that had more than batch
// messages past the group's cursor, and that no pop of this broker started
// to claim since the scan was sent; it replaces what an older scan left.
func (r *recentScans) keep(k watermarkKey, queueID uuid.UUID, untried []db.PartitionListPopCandidatesRow, batch int, scanned, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(now)
	var parts []partRef
	for _, c := range untried {
		if r.claimedSince(c.ID, scanned) == 1 {
			continue
		}
		if c.CursorSeq >= 0 && c.LastSeq-c.CursorSeq > int64(batch) {
			parts = append(parts, partRef{id: c.ID, name: c.Name})
		}
	}
	if len(parts) == 0 {
		delete(r.m, k)
		return
	}
	if r.m == nil {
		r.m = make(map[watermarkKey]*recentScan)
	}
	r.m[k] = &recentScan{queueID: queueID, at: now, parts: parts}
}

// take gives one kept partition of (queue, group) to one pop at now,
// chosen at random, passing over those a pop of this broker started to
// claim since the list was kept; false when none is left, or the list is too old or of
// another queue.
func (r *recentScans) take(k watermarkKey, queueID uuid.UUID, now time.Time) (partRef, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.m[k]
	if s == nil {
		return partRef{}, false
	}
	if s.queueID != queueID || now.Sub(s.at) > recentScanTTL {
		delete(r.m, k)
		return partRef{}, false
	}
	for len(s.parts) > 0 {
		i := rand.IntN(len(s.parts))
		p := s.parts[i]
		s.parts[i] = s.parts[len(s.parts)-1]
		s.parts = s.parts[:len(s.parts)-1]
		if r.claimedSince(p.id, s.at) == 0 {
			return p, true
		}
	}
	delete(r.m, k)
	return partRef{}, false
}

// claimedLast moves to the end of cands the partitions a pop of this broker
// started to claim since the scan that listed them was sent: their listing
// is stale, and their claim would most likely find them leased.
func (r *recentScans) claimedLast(cands []db.PartitionListPopCandidatesRow, scanned time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.claimed) == 0 {
		return
	}
	slices.SortStableFunc(cands, func(a, b db.PartitionListPopCandidatesRow) int {
		return cmp.Compare(r.claimedSince(a.ID, scanned), r.claimedSince(b.ID, scanned))
	})
}

// claimedSince is 1 when a claim of id by a pop of this broker is in
// flight, or returned at or after t: a scan sent at t may have listed the
// partition free before that claim committed.
func (r *recentScans) claimedSince(id uuid.UUID, t time.Time) int {
	if c, ok := r.claimed[id]; ok && (c.done.IsZero() || !c.done.Before(t)) {
		return 1
	}
	return 0
}

// claiming records that a pop of this broker starts a claim of partition
// id, before it is sent: a claim in flight holds the partition's gate.
func (r *recentScans) claiming(id uuid.UUID, now time.Time) {
	r.mu.Lock()
	if r.claimed == nil {
		r.claimed = make(map[uuid.UUID]claimTimes)
	}
	if len(r.claimed) >= claimedSweepAt {
		r.sweepLocked(now) // pops that never keep a list (several partitions each)
	}
	r.claimed[id] = claimTimes{started: now}
	r.mu.Unlock()
}

// claimedSweepAt is the size of claimed at which a claim sweeps it.
const claimedSweepAt = 1024

// sweepLocked forgets the claims that started more than recentScanTTL ago.
func (r *recentScans) sweepLocked(now time.Time) {
	for id, c := range r.claimed {
		if now.Sub(c.started) > recentScanTTL {
			delete(r.claimed, id)
		}
	}
}

// claimReturned records that the claim of partition id started at started
// returned (committed, whatever it found).
func (r *recentScans) claimReturned(id uuid.UUID, started, now time.Time) {
	r.mu.Lock()
	if c, ok := r.claimed[id]; ok && c.started.Equal(started) {
		r.claimed[id] = claimTimes{started: started, done: now}
	}
	r.mu.Unlock()
}

// claimTracked is b.claim of partition p, recorded as claiming and
// returned (recentScans.claimed).
func (b *Broker) claimTracked(ctx context.Context, pr popPlan, q db.QueenQueue, p partRef, leaseID string, budget int) (*claimed, error) {
	started := time.Now()
	b.recent.claiming(p.id, started)
	defer func() { b.recent.claimReturned(p.id, started, time.Now()) }()
	return b.claim(ctx, pr, q, p.id, p.name, leaseID, budget, false)
}

// claimRecent claims one of the partitions a recent scan of q kept for the
// pop's group; nil when none of its tries gave messages, and the pop scans.
func (b *Broker) claimRecent(ctx context.Context, pr popPlan, q db.QueenQueue, leaseID string, budget int) (*claimed, error) {
	k := watermarkKey{key(pr.Tenant, q.Name), pr.Group}
	for range recentScanTries {
		p, ok := b.recent.take(k, q.ID, time.Now())
		if !ok {
			return nil, nil
		}
		c, err := b.claimTracked(ctx, pr, q, p, leaseID, budget)
		if err != nil || (c != nil && c.count() > 0) {
			return c, err
		}
	}
	return nil, nil
}
