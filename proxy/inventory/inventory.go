// Package inventory keeps what the queue and partition caps and the
// retained-bytes quota need to know about each cluster's broker (PROXY.md
// §5.1): the queues of the cluster with the names of their partitions, and
// whether the cluster stores more than its plan allows.
//
// A reconcile loop (every QUEEN_PROXY_RECONCILE_MS, the first pass at
// Start) reads each capped cluster's inventory from its broker, through the
// broker's own read routes with the cell's bearer and the cluster's tenant,
// and replaces the queen_proxy.queues cache with it. A second loop, the
// push-block pump (every QUEEN_PROXY_STORAGE_REFRESH_MS, ten seconds by
// default), reads the retained bytes of each cluster that has a storage
// quota and sets or lifts its storage flag: one small request per such
// cluster, so a cluster that crosses its quota is stopped within seconds.
// Between passes, every queue and partition a request is admitted for
// counts at once, in this process.
//
// Counts are per process: N proxies each admit up to a cap between two
// reconciles. A cluster whose inventory no pass has read yet (the first
// seconds after boot, a broker that did not answer) is not checked; its
// admissions are still recorded. A cluster created since the last pass
// starts empty.
package inventory

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/limit"
)

// DefaultPartition is the partition a push without one goes to.
const DefaultPartition = "Default"

// IntervalDefault is QUEEN_PROXY_RECONCILE_MS's default and
// StorageIntervalDefault QUEEN_PROXY_STORAGE_REFRESH_MS's (PROXY.md §1.4).
const (
	IntervalDefault        = time.Minute
	StorageIntervalDefault = 10 * time.Second
)

// Pair is one (queue, partition) a request would write to.
type Pair struct{ Queue, Partition string }

// Config is what New needs.
type Config struct {
	Pool            *pgxpool.Pool
	Interval        time.Duration // QUEEN_PROXY_RECONCILE_MS
	StorageInterval time.Duration // QUEEN_PROXY_STORAGE_REFRESH_MS
	DBTimeout       time.Duration // PXDB_TIMEOUT_MS: each pxdb statement
	UpstreamTimeout time.Duration // QUEEN_PROXY_UPSTREAM_TIMEOUT_MS: each broker call
	ConnectTimeout  time.Duration // QUEEN_PROXY_UPSTREAM_CONNECT_TIMEOUT_MS
	TenantHeader    bool          // QUEEN_PROXY_TENANT_HEADER: ask as the cluster's tenant
	Logger          *slog.Logger
}

// Inventory is safe for concurrent use.
type Inventory struct {
	cfg    Config
	q      *pxdb.Queries
	client *http.Client

	mu       sync.Mutex
	clusters map[uuid.UUID]*clusterState
	seq      uint64 // admissions so far; also the clock a pass keeps them by
	// listed is the clusters the last complete pass found in pxdb (nil
	// before one). A cluster it did not list was created since: its broker
	// tenant is new, so it holds nothing yet, and it is checked from an
	// empty inventory rather than not at all.
	listed map[uuid.UUID]bool

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	loops               sync.WaitGroup
}

// clusterState is what this process knows of one cluster.
type clusterState struct {
	read        bool // a pass has read the broker's inventory
	queues      map[string]*queueState
	recent      []admission // admitted since the running pass began
	storageOver bool
	storageNext time.Time // the storage refresh reads it again from then on
}

// queueState is one queue: by is the admission that added it (0: the
// broker reported it), parts its partitions with the same.
type queueState struct {
	by    uint64
	parts map[string]uint64
}

type admission struct {
	id    uint64
	pairs []Pair
}

// New returns an Inventory; Start runs its loop.
func New(cfg Config) *Inventory {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.StorageInterval <= 0 {
		cfg.StorageInterval = StorageIntervalDefault
	}
	return &Inventory{
		cfg: cfg, q: pxdb.New(cfg.Pool), client: newClient(cfg),
		clusters: map[uuid.UUID]*clusterState{},
		stop:     make(chan struct{}),
	}
}

func (i *Inventory) state(cluster uuid.UUID) *clusterState {
	s := i.clusters[cluster]
	if s == nil {
		s = &clusterState{queues: map[string]*queueState{}}
		i.clusters[cluster] = s
	}
	return s
}

// Admit checks the (queue, partition) pairs of one request against the
// cluster's caps and records them. refusal is "" when they fit, else why
// not. A refused request records nothing unless force (shadow mode: it is
// forwarded anyway). undo forgets what this admission added, for a request
// the broker did not accept; it is never nil.
func (i *Inventory) Admit(cluster uuid.UUID, lim limit.Limits, pairs []Pair, force bool) (refusal string, undo func()) {
	undo = func() {}
	if i == nil || len(pairs) == 0 || (lim.MaxQueues == 0 && lim.MaxPartitionsPerQueue == 0) {
		return "", undo
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.state(cluster)
	if !s.read && i.listed != nil && !i.listed[cluster] {
		s.read = true
	}
	if s.read {
		refusal = s.check(lim, pairs)
	}
	if refusal != "" && !force {
		return refusal, undo
	}
	i.seq++
	id := i.seq
	if s.add(pairs, id) {
		s.recent = append(s.recent, admission{id: id, pairs: pairs})
		undo = func() { i.forget(cluster, id) }
	}
	return refusal, undo
}

// check finds the first pair that would take the cluster over a cap.
func (s *clusterState) check(lim limit.Limits, pairs []Pair) string {
	queues := int64(len(s.queues))
	parts := map[string]int64{}
	seen := map[Pair]bool{}
	for _, p := range pairs {
		if seen[p] {
			continue
		}
		seen[p] = true
		q, known := s.queues[p.Queue]
		if _, counted := parts[p.Queue]; !counted {
			if !known {
				queues++
				if lim.MaxQueues > 0 && queues > lim.MaxQueues {
					return fmt.Sprintf("queue %q would be queue %d of this cluster, over the limit of %d", p.Queue, queues, lim.MaxQueues)
				}
				parts[p.Queue] = 0
			} else {
				parts[p.Queue] = int64(len(q.parts))
			}
		}
		if known {
			if _, ok := q.parts[p.Partition]; ok {
				continue
			}
		}
		parts[p.Queue]++
		if n := parts[p.Queue]; lim.MaxPartitionsPerQueue > 0 && n > lim.MaxPartitionsPerQueue {
			return fmt.Sprintf("partition %q would be partition %d of queue %q, over the limit of %d", p.Partition, n, p.Queue, lim.MaxPartitionsPerQueue)
		}
	}
	return ""
}

// add records pairs as admission id; it reports whether anything was new.
func (s *clusterState) add(pairs []Pair, id uint64) bool {
	added := false
	for _, p := range pairs {
		q := s.queues[p.Queue]
		if q == nil {
			q = &queueState{by: id, parts: map[string]uint64{}}
			s.queues[p.Queue] = q
			added = true
		}
		if _, ok := q.parts[p.Partition]; !ok {
			q.parts[p.Partition] = id
			added = true
		}
	}
	return added
}

// forget removes what admission id added and nothing since confirmed.
func (i *Inventory) forget(cluster uuid.UUID, id uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.clusters[cluster]
	if s == nil {
		return
	}
	for name, q := range s.queues {
		for part, by := range q.parts {
			if by == id {
				delete(q.parts, part)
			}
		}
		if q.by == id && len(q.parts) == 0 {
			delete(s.queues, name)
		}
	}
	for k, a := range s.recent {
		if a.id == id {
			s.recent = append(s.recent[:k], s.recent[k+1:]...)
			break
		}
	}
}

// StorageBlocked reports whether the cluster's last reconcile found it
// storing more than its max_retained_bytes.
func (i *Inventory) StorageBlocked(cluster uuid.UUID) bool {
	if i == nil {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.clusters[cluster]
	return s != nil && s.storageOver
}

// Forget frees at once what a queue deletion (partition "", all false:
// the queue) or a clear (all: every partition; else the one named) took,
// rather than at the next pass.
func (i *Inventory) Forget(cluster uuid.UUID, queue, partition string, all bool) {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.clusters[cluster]
	if s == nil || s.queues[queue] == nil {
		return
	}
	switch q := s.queues[queue]; {
	case all:
		q.parts = map[string]uint64{}
	case partition != "":
		delete(q.parts, partition)
	default:
		delete(s.queues, queue)
	}
}
