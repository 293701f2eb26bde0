package limit

import (
	"sync"
	"time"
)

// Limiter keeps the buckets and parked-slot counts of every cluster and
// cell this process has served. It is safe for concurrent use.
type Limiter struct {
	now func() time.Time

	mu       sync.Mutex
	clusters map[string]*clusterState
	cells    map[string]int64 // parked long-polls per cell
}

type clusterState struct {
	limits Limits // the limits the buckets were built for
	reqs   *bucket
	msgs   *bucket
	parked int64
}

// New returns an empty Limiter. now is the clock (time.Now when nil).
func New(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, clusters: map[string]*clusterState{}, cells: map[string]int64{}}
}

// state returns the cluster's state, rebuilding its buckets when its limits
// changed (a new plan or override). Callers hold mu.
func (l *Limiter) state(cluster string, lim Limits) *clusterState {
	s := l.clusters[cluster]
	if s != nil && s.limits.ReqPerSec == lim.ReqPerSec && s.limits.ReqBurst == lim.ReqBurst &&
		s.limits.MsgsPerSec == lim.MsgsPerSec && s.limits.MsgsBurst == lim.MsgsBurst {
		s.limits = lim
		return s
	}
	now := l.now()
	ns := &clusterState{limits: lim}
	if s != nil {
		ns.parked = s.parked
	}
	if lim.ReqPerSec > 0 {
		ns.reqs = newBucket(lim.ReqPerSec, lim.ReqBurst, now)
	}
	if lim.MsgsPerSec > 0 {
		ns.msgs = newBucket(lim.MsgsPerSec, lim.MsgsBurst, now)
	}
	l.clusters[cluster] = ns
	return ns
}

// Request takes one request token of the cluster. When it cannot, retry is
// how long until one is there.
func (l *Limiter) Request(cluster string, lim Limits) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(cluster, lim)
	if s.reqs == nil {
		return true, 0
	}
	return s.reqs.take(1, l.now())
}

// Messages takes n message tokens of the cluster (a push of n items).
func (l *Limiter) Messages(cluster string, lim Limits, n int) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(cluster, lim)
	if s.msgs == nil || n <= 0 {
		return true, 0
	}
	return s.msgs.take(float64(n), l.now())
}

// Scope says which cap refused a parked slot.
type Scope string

// The caps on parked long-polls.
const (
	ScopeNone    Scope = ""
	ScopeCluster Scope = "cluster"
	ScopeCell    Scope = "cell"
)

// Park takes a parked long-poll slot of the cluster (cap lim.MaxParkedPops)
// and of its cell (cap cellMax; 0 is unlimited). refused names the cap that
// is full, if one is. The slot is taken when both caps admit it, or anyway
// when force is set (shadow mode counts what it would have refused); then
// release gives it back once the upstream answered or the client left, and
// is safe to call more than once. Otherwise release is nil.
func (l *Limiter) Park(cluster, cell string, lim Limits, cellMax int64, force bool) (release func(), refused Scope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(cluster, lim)
	switch {
	case lim.MaxParkedPops > 0 && s.parked >= lim.MaxParkedPops:
		refused = ScopeCluster
	case cellMax > 0 && l.cells[cell] >= cellMax:
		refused = ScopeCell
	}
	if refused != ScopeNone && !force {
		return nil, refused
	}
	s.parked++
	l.cells[cell]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			// The state may have been rebuilt since; the count moved with it.
			l.clusters[cluster].parked--
			l.cells[cell]--
		})
	}, refused
}

// Parked returns the parked long-polls of a cell, for the metrics.
func (l *Limiter) Parked(cell string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cells[cell]
}
