// Package metrics keeps the broker's data-plane counters in memory: per
// queue and per process, since boot. The request paths record into it
// through Recorder; the metrics collector (handlers/jobs) turns the counters
// into per-minute rows, and /metrics and /metrics/prometheus read them.
//
// Recording is cheap and lock-free: a queue's counters are found in a
// sync.Map (a read-mostly map: no lock once the queue has been seen) and
// updated with atomic adds. Counters only grow; readers take differences.
package metrics

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Recorder is what the request paths call. One call per queue per request,
// never per message.
type Recorder interface {
	// Pushed records one push request that stored messages in queue
	// (duplicates excluded).
	Pushed(queue string, messages int)
	// Replayed records messages the disk spool's replay stored in queue,
	// pushed earlier by requests answered `buffered` (counted by Pushed
	// with 0 messages then). Not a request.
	Replayed(queue string, messages int)
	// Popped records one pop that delivered messages from queue; lagSum and
	// lagMax are over the messages' ages at delivery.
	Popped(queue string, messages int, lagSum, lagMax time.Duration)
	// PopEmpty records a pop on queue that delivered nothing.
	PopEmpty(queue string)
	// Acked records the acknowledgements of one request for queue: applied
	// in total, completed, reporting a failure, and dead-lettered.
	Acked(queue string, applied, completed, failed, deadLettered int)
	// Transaction records one transaction touching queue.
	Transaction(queue string)
	// Request records one request of op, whatever the queues.
	Request(op Op)
	// Park records a long-poll parked on queue until the returned function
	// is called.
	Park(queue string) (unpark func())
	// DBError records a request that failed on the database.
	DBError()
}

// Op is a kind of data-plane request.
type Op int

// The data-plane operations counted per process.
const (
	OpPush Op = iota
	OpPop
	OpAck
	OpTransaction
	opCount
)

// QueueCounters are one queue's counters since boot (Parked is a gauge).
type QueueCounters struct {
	PushRequests, PushMessages                    int64
	PopRequests, PopMessages, PopEmpty            int64
	AckRequests, AckMessages, AckSuccess, AckFail int64
	DeadLettered, Transactions                    int64
	LagCount, LagSumMs                            int64
	Parked                                        int64
}

// ProcessCounters are the process-wide counters since boot.
type ProcessCounters struct {
	Requests [opCount]int64
	DBErrors int64
}

// Requests of one op.
func (p ProcessCounters) Of(op Op) int64 { return p.Requests[op] }

// queueCounters is the live, atomically updated form of QueueCounters.
// maxLagMs is the largest lag since the collector last took it (TakeMaxLag).
type queueCounters struct {
	pushRequests, pushMessages         atomic.Int64
	popRequests, popMessages, popEmpty atomic.Int64
	ackRequests, ackMessages           atomic.Int64
	ackSuccess, ackFail                atomic.Int64
	deadLettered, transactions         atomic.Int64
	lagCount, lagSumMs, maxLagMs       atomic.Int64
	parked                             atomic.Int64
}

// Registry implements Recorder. The zero value is not usable; call New.
type Registry struct {
	started time.Time
	queues  sync.Map // string -> *queueCounters
	ops     [opCount]atomic.Int64
	dbErrs  atomic.Int64
	maxLag  atomic.Int64 // process-wide, since the last TakeMaxLag
}

var _ Recorder = (*Registry)(nil)

// New returns an empty registry whose uptime starts now.
func New() *Registry { return &Registry{started: time.Now()} }

// Started is when the registry was created (the broker's boot).
func (r *Registry) Started() time.Time { return r.started }

func (r *Registry) queue(name string) *queueCounters {
	if c, ok := r.queues.Load(name); ok {
		return c.(*queueCounters)
	}
	c, _ := r.queues.LoadOrStore(name, &queueCounters{})
	return c.(*queueCounters)
}

// Pushed implements Recorder.
func (r *Registry) Pushed(queue string, messages int) {
	c := r.queue(queue)
	c.pushRequests.Add(1)
	c.pushMessages.Add(int64(messages))
}

// Replayed implements Recorder.
func (r *Registry) Replayed(queue string, messages int) {
	r.queue(queue).pushMessages.Add(int64(messages))
}

// Popped implements Recorder.
func (r *Registry) Popped(queue string, messages int, lagSum, lagMax time.Duration) {
	c := r.queue(queue)
	c.popRequests.Add(1)
	c.popMessages.Add(int64(messages))
	c.lagCount.Add(int64(messages))
	c.lagSumMs.Add(lagSum.Milliseconds())
	storeMax(&c.maxLagMs, lagMax.Milliseconds())
	storeMax(&r.maxLag, lagMax.Milliseconds())
}

// PopEmpty implements Recorder.
func (r *Registry) PopEmpty(queue string) {
	c := r.queue(queue)
	c.popRequests.Add(1)
	c.popEmpty.Add(1)
}

// Acked implements Recorder.
func (r *Registry) Acked(queue string, applied, completed, failed, deadLettered int) {
	c := r.queue(queue)
	c.ackRequests.Add(1)
	c.ackMessages.Add(int64(applied))
	c.ackSuccess.Add(int64(completed))
	c.ackFail.Add(int64(failed))
	c.deadLettered.Add(int64(deadLettered))
}

// Transaction implements Recorder.
func (r *Registry) Transaction(queue string) { r.queue(queue).transactions.Add(1) }

// Request implements Recorder.
func (r *Registry) Request(op Op) {
	if op >= 0 && op < opCount {
		r.ops[op].Add(1)
	}
}

// Park implements Recorder. An empty queue name (a namespace or task pop)
// is not counted.
func (r *Registry) Park(queue string) func() {
	if queue == "" {
		return func() {}
	}
	c := r.queue(queue)
	c.parked.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.parked.Add(-1) }) }
}

// DBError implements Recorder.
func (r *Registry) DBError() { r.dbErrs.Add(1) }

// Process returns the process-wide counters.
func (r *Registry) Process() ProcessCounters {
	var p ProcessCounters
	for i := range p.Requests {
		p.Requests[i] = r.ops[i].Load()
	}
	p.DBErrors = r.dbErrs.Load()
	return p
}

// QueueSnapshot is one queue's counters with its name.
type QueueSnapshot struct {
	Queue string
	QueueCounters
}

// Queues returns every queue's counters, by name.
func (r *Registry) Queues() []QueueSnapshot {
	var out []QueueSnapshot
	r.queues.Range(func(k, v any) bool {
		c := v.(*queueCounters)
		out = append(out, QueueSnapshot{Queue: k.(string), QueueCounters: QueueCounters{
			PushRequests: c.pushRequests.Load(), PushMessages: c.pushMessages.Load(),
			PopRequests: c.popRequests.Load(), PopMessages: c.popMessages.Load(), PopEmpty: c.popEmpty.Load(),
			AckRequests: c.ackRequests.Load(), AckMessages: c.ackMessages.Load(),
			AckSuccess: c.ackSuccess.Load(), AckFail: c.ackFail.Load(),
			DeadLettered: c.deadLettered.Load(), Transactions: c.transactions.Load(),
			LagCount: c.lagCount.Load(), LagSumMs: c.lagSumMs.Load(),
			Parked: c.parked.Load(),
		}})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// Parked returns the queues with parked long-polls and how many, without
// copying the other counters (the collector samples it every second).
func (r *Registry) Parked() map[string]int64 {
	var out map[string]int64
	r.queues.Range(func(k, v any) bool {
		if n := v.(*queueCounters).parked.Load(); n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[k.(string)] = n
		}
		return true
	})
	return out
}

// TakeMaxLag returns the largest pop lag per queue (and process-wide) since
// the last call, and starts new maxima. Only the metrics collector calls it.
func (r *Registry) TakeMaxLag() (perQueue map[string]int64, process int64) {
	perQueue = map[string]int64{}
	r.queues.Range(func(k, v any) bool {
		if m := v.(*queueCounters).maxLagMs.Swap(0); m > 0 {
			perQueue[k.(string)] = m
		}
		return true
	})
	return perQueue, r.maxLag.Swap(0)
}

// Totals adds up every queue's counters.
func Totals(qs []QueueSnapshot) QueueCounters {
	var t QueueCounters
	for _, q := range qs {
		t = t.Plus(q.QueueCounters)
	}
	return t
}

// Plus is the field-wise sum of two counter sets.
func (a QueueCounters) Plus(b QueueCounters) QueueCounters {
	return QueueCounters{
		PushRequests: a.PushRequests + b.PushRequests, PushMessages: a.PushMessages + b.PushMessages,
		PopRequests: a.PopRequests + b.PopRequests, PopMessages: a.PopMessages + b.PopMessages, PopEmpty: a.PopEmpty + b.PopEmpty,
		AckRequests: a.AckRequests + b.AckRequests, AckMessages: a.AckMessages + b.AckMessages,
		AckSuccess: a.AckSuccess + b.AckSuccess, AckFail: a.AckFail + b.AckFail,
		DeadLettered: a.DeadLettered + b.DeadLettered, Transactions: a.Transactions + b.Transactions,
		LagCount: a.LagCount + b.LagCount, LagSumMs: a.LagSumMs + b.LagSumMs,
		Parked: a.Parked + b.Parked,
	}
}

// Minus is the field-wise difference a - b of two counter sets; the Parked
// gauge is a's.
func (a QueueCounters) Minus(b QueueCounters) QueueCounters {
	return QueueCounters{
		PushRequests: a.PushRequests - b.PushRequests, PushMessages: a.PushMessages - b.PushMessages,
		PopRequests: a.PopRequests - b.PopRequests, PopMessages: a.PopMessages - b.PopMessages, PopEmpty: a.PopEmpty - b.PopEmpty,
		AckRequests: a.AckRequests - b.AckRequests, AckMessages: a.AckMessages - b.AckMessages,
		AckSuccess: a.AckSuccess - b.AckSuccess, AckFail: a.AckFail - b.AckFail,
		DeadLettered: a.DeadLettered - b.DeadLettered, Transactions: a.Transactions - b.Transactions,
		LagCount: a.LagCount - b.LagCount, LagSumMs: a.LagSumMs - b.LagSumMs,
		Parked: a.Parked,
	}
}

// IsZero reports whether no counter moved (the Parked gauge aside).
func (a QueueCounters) IsZero() bool {
	a.Parked = 0
	return a == QueueCounters{}
}

func storeMax(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
