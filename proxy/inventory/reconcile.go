package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/limit"
)

// partitionsPage is the page size of the partition listing (the route's
// maximum); maxPages bounds one cluster's listing.
const (
	partitionsPage = 1000
	maxPages       = 1000
	maxAnswer      = 64 << 20
)

func newClient(cfg Config) *http.Client {
	connect := cfg.ConnectTimeout
	if connect <= 0 {
		connect = 5 * time.Second
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil, // never an HTTP proxy from the environment
		DialContext:         (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// Start runs an inventory pass and a storage refresh now, then each at its
// own interval, until Stop. A second Start does nothing.
func (i *Inventory) Start() {
	i.startOnce.Do(i.start)
}

func (i *Inventory) start() {
	i.loop(i.cfg.Interval, i.Reconcile, "reconcile failed")
	i.loop(i.cfg.StorageInterval, i.RefreshStorage, "storage refresh failed")
}

// loop runs pass now and then every interval until Stop, cancelling a pass
// under way when Stop comes.
func (i *Inventory) loop(interval time.Duration, pass func(context.Context) error, failed string) {
	i.loops.Add(1)
	go func() {
		defer i.loops.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-i.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			if err := pass(ctx); err != nil && ctx.Err() == nil {
				i.cfg.Logger.Warn(failed, "err", err)
			}
			cancel()
			select {
			case <-i.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the loops, cancelling the passes under way, and waits for them.
// It may be called more than once, and without Start.
func (i *Inventory) Stop() {
	i.startOnce.Do(func() {}) // no Start after a Stop
	i.stopOnce.Do(func() { close(i.stop) })
	i.loops.Wait()
}

// Reconcile runs one inventory pass over every cluster pxdb lists: a
// cluster whose broker does not answer keeps what it had, and is logged.
func (i *Inventory) Reconcile(ctx context.Context) error {
	qctx, cancel := i.dbContext(ctx)
	rows, err := i.q.ClustersToReconcile(qctx)
	cancel()
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	listed := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		listed[r.ID] = true
		if err := i.reconcileCluster(ctx, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			i.cfg.Logger.Warn("reconcile of a cluster failed", "cluster", r.Slug, "err", err)
		}
	}
	i.mu.Lock()
	for id := range i.clusters {
		if !listed[id] {
			delete(i.clusters, id) // deleted, or being deleted: nothing to admit
		}
	}
	i.listed = listed
	i.mu.Unlock()
	return nil
}

func (i *Inventory) dbContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if i.cfg.DBTimeout > 0 {
		return context.WithTimeout(ctx, i.cfg.DBTimeout)
	}
	return context.WithCancel(ctx)
}

// reconcileCluster reads one cluster's inventory when it has a queue or
// partition cap. Its retained bytes are the storage refresh's.
func (i *Inventory) reconcileCluster(ctx context.Context, r pxdb.ClustersToReconcileRow) error {
	lim, target, err := clusterTarget(r, i.cfg.TenantHeader)
	if err != nil {
		return err
	}
	if lim.MaxQueues > 0 || lim.MaxPartitionsPerQueue > 0 {
		return i.reconcileQueues(ctx, r, target, lim.MaxPartitionsPerQueue > 0)
	}
	i.mu.Lock()
	if s := i.clusters[r.ID]; s != nil {
		s.queues, s.recent, s.read = map[string]*queueState{}, nil, false
	}
	i.mu.Unlock()
	return nil
}

// clusterTarget is a cluster's limits (plan merged with its overrides) and
// where and as whom its broker is asked.
func clusterTarget(r pxdb.ClustersToReconcileRow, tenantHeader bool) (limit.Limits, forward.Target, error) {
	n := func(v *int32) int64 {
		if v == nil {
			return 0
		}
		return int64(*v)
	}
	plan := limit.Limits{MaxQueues: n(r.MaxQueues), MaxPartitionsPerQueue: n(r.MaxPartitionsPerQueue)}
	if r.MaxRetainedBytes != nil {
		plan.MaxRetainedBytes = *r.MaxRetainedBytes
	}
	lim := limit.Merge(plan, r.LimitOverrides)
	base, err := url.Parse(r.BaseUrl)
	if err != nil {
		return lim, forward.Target{}, fmt.Errorf("cell base_url: %w", err)
	}
	target := forward.Target{BaseURL: base, Secret: r.CellSecret}
	if tenantHeader {
		target.Tenant = r.BrokerTenantUuid.String()
	}
	return lim, target, nil
}

// reconcileQueues replaces the cluster's inventory with the broker's, keeping
// the admissions made while it was being read.
func (i *Inventory) reconcileQueues(ctx context.Context, r pxdb.ClustersToReconcileRow, target forward.Target, names bool) error {
	i.mu.Lock()
	mark := i.seq
	i.mu.Unlock()

	var listing struct {
		Queues []struct {
			Name       string `json:"name"`
			Partitions int32  `json:"partitions"`
		} `json:"queues"`
	}
	if err := i.get(ctx, target, "/api/v1/resources/queues", &listing); err != nil {
		return err
	}
	queues := map[string]*queueState{}
	counts := map[string]int32{}
	for _, q := range listing.Queues {
		queues[q.Name] = &queueState{parts: map[string]uint64{}}
		counts[q.Name] = q.Partitions
	}
	if names {
		for page := 0; page < maxPages; page++ {
			var p struct {
				Partitions []struct {
					Queue     string `json:"queue"`
					Partition string `json:"partition"`
				} `json:"partitions"`
				Truncated bool `json:"truncated"`
			}
			path := "/api/v1/resources/partitions?limit=" + strconv.Itoa(partitionsPage) + "&offset=" + strconv.Itoa(page*partitionsPage)
			if err := i.get(ctx, target, path, &p); err != nil {
				return err
			}
			for _, row := range p.Partitions {
				q := queues[row.Queue]
				if q == nil { // created between the two listings
					q = &queueState{parts: map[string]uint64{}}
					queues[row.Queue] = q
				}
				q.parts[row.Partition] = 0
			}
			if !p.Truncated || len(p.Partitions) == 0 {
				break
			}
		}
	}

	i.mu.Lock()
	s := i.state(r.ID)
	s.queues, s.read = queues, true
	var kept []admission
	for _, a := range s.recent {
		if a.id > mark { // admitted while the broker was being read
			s.add(a.pairs, a.id)
			kept = append(kept, a)
		}
	}
	s.recent = kept
	i.mu.Unlock()

	list := make([]string, 0, len(queues))
	parts := make([]int32, 0, len(queues))
	for name, q := range queues {
		list = append(list, name)
		parts = append(parts, max(counts[name], int32(len(q.parts))))
	}
	qctx, cancel := i.dbContext(ctx)
	defer cancel()
	if _, err := i.q.QueuesReplace(qctx, pxdb.QueuesReplaceParams{ClusterID: r.ID, Names: list, Partitions: parts}); err != nil {
		return fmt.Errorf("write the queues cache: %w", err)
	}
	return nil
}

// get reads one JSON answer of the broker.
func (i *Inventory) get(ctx context.Context, target forward.Target, path string, into any) error {
	if i.cfg.UpstreamTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, i.cfg.UpstreamTimeout)
		defer cancel()
	}
	req, err := forward.NewRequest(ctx, target, http.MethodGet, path)
	if err != nil {
		return err
	}
	resp, err := i.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: broker answered %d", path, resp.StatusCode)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
