package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
)

// stat accumulates the samples of one gauge over a minute.
type stat struct {
	n                   int
	sum, min, max, last float64
}

func (s *stat) add(v float64) {
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
	s.sum += v
	s.last = v
}

func (s stat) avg() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// systemGauges are the paths of the system_metrics tree, in the shape the
// dashboard's System view reads. cpu.*_us hold percent x 100 (the names are
// the reference's).
var systemGauges = []string{
	"cpu.user_us", "cpu.system_us",
	"memory.rss_bytes", "memory.virtual_bytes",
	"database.pool_size", "database.pool_idle", "database.pool_active",
	"threadpool.db.pool_size", "threadpool.db.queue_size",
	"threadpool.system.pool_size", "threadpool.system.queue_size",
	"registries.response", "uptime_seconds",
}

// collector turns the registry's counters into per-minute rows. It samples
// the gauges every tick and writes a minute when the next one begins: the
// counters' growth since the last write (added to the rows) and the gauges'
// aggregates (replacing them).
type collector struct {
	cfg Config
	q   *db.Queries

	mu      sync.Mutex
	minute  time.Time // the minute being accumulated; zero before the first tick
	samples int
	// worker gauges
	schedLag, freeSlots, dbConns, jobQueue, parkedTotal stat
	system                                              map[string]*stat
	parked                                              map[string]float64 // queue -> sum of samples

	lastSampleAt time.Time
	lastProc     metrics.ProcessStats

	// counters as last written; what grew since goes into the next write
	baseQueues map[string]metrics.QueueCounters
	baseProc   metrics.ProcessCounters
	// largest lags taken from the registry but not yet written
	pendingMax     map[string]int64
	pendingMaxProc int64
}

func newCollector(cfg Config, q *db.Queries) *collector {
	c := &collector{cfg: cfg, q: q, baseQueues: map[string]metrics.QueueCounters{}, pendingMax: map[string]int64{}}
	c.resetGauges()
	return c
}

func (c *collector) resetGauges() {
	c.samples = 0
	c.schedLag, c.freeSlots, c.dbConns, c.jobQueue, c.parkedTotal = stat{}, stat{}, stat{}, stat{}, stat{}
	c.system = make(map[string]*stat, len(systemGauges))
	for _, p := range systemGauges {
		c.system[p] = &stat{}
	}
	c.parked = map[string]float64{}
}

// tick samples at now after writing the previous minute if now is past it.
// schedLag is how late the loop's timer was served.
func (c *collector) tick(ctx context.Context, now time.Time) error {
	return c.tickLagged(ctx, now, 0)
}

func (c *collector) tickLagged(ctx context.Context, now time.Time, schedLag time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.advance(ctx, now)
	c.sample(now, schedLag)
	return err
}

// flushNow writes the current minute so far; see Services.Flush.
func (c *collector) flushNow(ctx context.Context, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.advance(ctx, now)
	if c.samples == 0 {
		c.sample(now, 0)
	}
	if werr := c.write(ctx); werr != nil {
		return werr
	}
	return err
}

// advance starts the minute of now, writing the one being accumulated if
// now is past it. A failed write loses that minute's gauges; its counters
// go into the next write.
func (c *collector) advance(ctx context.Context, now time.Time) error {
	m := now.UTC().Truncate(time.Minute)
	if c.minute.IsZero() {
		c.minute = m
		return nil
	}
	if !m.After(c.minute) {
		return nil
	}
	var err error
	if c.samples > 0 || c.hasCounts() {
		err = c.write(ctx)
	}
	c.resetGauges()
	c.minute = m
	return err
}

func (c *collector) hasCounts() bool {
	p := c.cfg.Metrics.Process()
	return p != c.baseProc
}

func (c *collector) sample(now time.Time, schedLag time.Duration) {
	c.samples++
	c.schedLag.add(float64(schedLag) / float64(time.Millisecond))
	var total, idle, acquired, maxConns float64
	if c.cfg.Pool != nil {
		st := c.cfg.Pool.Stat()
		total, idle, acquired, maxConns = float64(st.TotalConns()), float64(st.IdleConns()), float64(st.AcquiredConns()), float64(st.MaxConns())
	}
	c.freeSlots.add(maxConns - acquired)
	c.dbConns.add(total)
	jobs := 0.0
	if c.cfg.JobQueueFunc != nil {
		jobs = float64(c.cfg.JobQueueFunc())
	}
	c.jobQueue.add(jobs)

	var parked int64
	for q, n := range c.cfg.Metrics.Parked() {
		c.parked[q] += float64(n)
		parked += n
	}
	c.parkedTotal.add(float64(parked))

	proc := metrics.ReadProcess()
	var userPct, sysPct float64
	if !c.lastSampleAt.IsZero() {
		if wall := now.Sub(c.lastSampleAt); wall > 0 {
			micros := float64(wall.Microseconds())
			userPct = float64(proc.CPUUserMicros-c.lastProc.CPUUserMicros) / micros * 100
			sysPct = float64(proc.CPUSystemMicros-c.lastProc.CPUSystemMicros) / micros * 100
		}
	}
	c.lastSampleAt, c.lastProc = now, proc
	for path, v := range map[string]float64{
		"cpu.user_us":                  math.Round(max(userPct, 0) * 100),
		"cpu.system_us":                math.Round(max(sysPct, 0) * 100),
		"memory.rss_bytes":             float64(proc.RSSBytes),
		"memory.virtual_bytes":         float64(proc.VirtualBytes),
		"database.pool_size":           total,
		"database.pool_idle":           idle,
		"database.pool_active":         acquired,
		"threadpool.db.pool_size":      maxConns,
		"threadpool.db.queue_size":     jobs,
		"threadpool.system.pool_size":  float64(runtime.GOMAXPROCS(0)),
		"threadpool.system.queue_size": float64(runtime.NumGoroutine()),
		"registries.response":          float64(parked),
		"uptime_seconds":               math.Floor(now.Sub(c.cfg.Metrics.Started()).Seconds()),
	} {
		c.system[path].add(v)
	}
}

// write adds the counters' growth since the last write to the rows of the
// current minute and replaces its gauges, in one transaction.
func (c *collector) write(ctx context.Context) error {
	queues := c.cfg.Metrics.Queues()
	proc := c.cfg.Metrics.Process()
	takenQ, takenP := c.cfg.Metrics.TakeMaxLag()
	for q, m := range takenQ {
		c.pendingMax[q] = max(c.pendingMax[q], m)
	}
	c.pendingMaxProc = max(c.pendingMaxProc, takenP)

	bucket := pgtype.Timestamptz{Time: c.minute, Valid: true}
	host, port, pid := c.cfg.Hostname, int32(c.cfg.Port), int32(c.cfg.PID)
	var ql db.QueueLagMetricsAddManyParams
	ql.Bucket, ql.Hostname, ql.Port, ql.Pid = bucket, host, port, pid
	var sum metrics.QueueCounters
	for _, q := range queues {
		d := q.Minus(c.baseQueues[q.Queue])
		sum = sum.Plus(d)
		parked := 0.0
		if c.samples > 0 {
			parked = c.parked[q.Queue] / float64(c.samples)
		}
		maxLag := c.pendingMax[q.Queue]
		if d.IsZero() && parked == 0 && maxLag == 0 {
			continue
		}
		ql.QueueNames = append(ql.QueueNames, q.Queue)
		ql.PushRequestCounts = append(ql.PushRequestCounts, d.PushRequests)
		ql.PushMessageCounts = append(ql.PushMessageCounts, d.PushMessages)
		ql.PopRequestCounts = append(ql.PopRequestCounts, d.PopRequests)
		ql.PopCounts = append(ql.PopCounts, d.PopMessages)
		ql.PopEmptyCounts = append(ql.PopEmptyCounts, d.PopEmpty)
		ql.AckRequestCounts = append(ql.AckRequestCounts, d.AckRequests)
		ql.AckMessageCounts = append(ql.AckMessageCounts, d.AckMessages)
		ql.AckSuccessCounts = append(ql.AckSuccessCounts, d.AckSuccess)
		ql.AckFailedCounts = append(ql.AckFailedCounts, d.AckFail)
		ql.DlqCounts = append(ql.DlqCounts, d.DeadLettered)
		ql.TransactionCounts = append(ql.TransactionCounts, d.Transactions)
		ql.LagCounts = append(ql.LagCounts, d.LagCount)
		ql.LagSumsMs = append(ql.LagSumsMs, d.LagSumMs)
		ql.MaxLagsMs = append(ql.MaxLagsMs, maxLag)
		ql.ParkedCounts = append(ql.ParkedCounts, parked)
	}
	dp := func(op metrics.Op) int64 { return proc.Of(op) - c.baseProc.Of(op) }
	dbErrors := proc.DBErrors - c.baseProc.DBErrors
	worker := db.WorkerMetricsAddParams{
		Bucket: bucket, Hostname: host, Port: port, Pid: pid,
		PushRequestCount: dp(metrics.OpPush), PushMessageCount: sum.PushMessages,
		PopRequestCount: dp(metrics.OpPop), PopMessageCount: sum.PopMessages, PopEmptyCount: sum.PopEmpty,
		AckRequestCount: dp(metrics.OpAck), AckMessageCount: sum.AckMessages,
		AckSuccessCount: sum.AckSuccess, AckFailedCount: sum.AckFail,
		TransactionCount: dp(metrics.OpTransaction), DlqCount: sum.DeadLettered, DbErrorCount: dbErrors,
		LagCount: sum.LagCount, LagSumMs: sum.LagSumMs, MaxLagMs: c.pendingMaxProc,
		SampleCount:       int32(c.samples),
		AvgEventLoopLagMs: c.schedLag.avg(), MaxEventLoopLagMs: c.schedLag.max,
		AvgFreeSlots: c.freeSlots.avg(), MinFreeSlots: c.freeSlots.min,
		DbConnections:   c.dbConns.avg(),
		AvgJobQueueSize: c.jobQueue.avg(), MaxJobQueueSize: c.jobQueue.max,
		BackoffSize: c.parkedTotal.avg(),
	}
	summary := db.WorkerMetricsSummaryAddParams{
		PushRequests: worker.PushRequestCount, PopRequests: worker.PopRequestCount,
		AckRequests: worker.AckRequestCount, Transactions: worker.TransactionCount,
		PushMessages: sum.PushMessages, PopMessages: sum.PopMessages, AckMessages: sum.AckMessages,
		AckSuccess: sum.AckSuccess, AckFailed: sum.AckFail, DbErrors: dbErrors, DlqCount: sum.DeadLettered,
	}
	var systemJSON []byte
	if c.samples > 0 {
		var err error
		if systemJSON, err = json.Marshal(c.systemTree()); err != nil {
			return fmt.Errorf("encode system metrics: %w", err)
		}
	}

	err := pgx.BeginFunc(ctx, c.cfg.Pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		if err := q.WorkerMetricsAdd(ctx, worker); err != nil {
			return fmt.Errorf("write worker metrics: %w", err)
		}
		if len(ql.QueueNames) > 0 {
			if err := q.QueueLagMetricsAddMany(ctx, ql); err != nil {
				return fmt.Errorf("write queue metrics: %w", err)
			}
		}
		if systemJSON != nil {
			if err := q.SystemMetricsUpsert(ctx, db.SystemMetricsUpsertParams{
				Bucket: bucket, Hostname: host, Port: port, Pid: pid, SampleCount: int32(c.samples), Metrics: systemJSON,
			}); err != nil {
				return fmt.Errorf("write system metrics: %w", err)
			}
		}
		if err := q.WorkerMetricsSummaryAdd(ctx, summary); err != nil {
			return fmt.Errorf("write metrics totals: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, q := range queues {
		c.baseQueues[q.Queue] = q.QueueCounters
	}
	c.baseProc = proc
	clear(c.pendingMax)
	c.pendingMaxProc = 0
	return nil
}

// systemTree nests the gauge paths into the JSON the System view reads,
// each leaf {avg, min, max, last}.
func (c *collector) systemTree() map[string]any {
	root := map[string]any{"shared_state": map[string]any{"enabled": false}}
	for _, path := range systemGauges {
		s := c.system[path]
		node := root
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			child, ok := node[p].(map[string]any)
			if !ok {
				child = map[string]any{}
				node[p] = child
			}
			node = child
		}
		node[parts[len(parts)-1]] = map[string]float64{"avg": s.avg(), "min": s.min, "max": s.max, "last": s.last}
	}
	return root
}
