package broker

import (
	"time"

	"github.com/queenforgo/queen/handlers/metrics"
)

// The data plane reports to the metrics registry once per request and
// queue, after the work committed; these helpers turn a request's outcome
// into those calls (see handlers/metrics).

// Timings receives how long the data plane's operations take: the latency
// histograms of /metrics/prometheus (handlers/metrics/exposition implements
// it). The broker records through this interface rather than a metrics
// library so that it keeps its imports (no client_golang, and through it no
// net/http). Calls are made on the request paths: they must be cheap and
// safe for concurrent use.
type Timings interface {
	// Push: one Push call, stored, spooled or failed, group commit included.
	Push(d time.Duration)
	// Pop: one look at the database by a pop (the claim and the read);
	// the time a long-poll spends parked between looks is not included.
	Pop(d time.Duration, delivered bool)
	// Ack: one Ack call, group commit included.
	Ack(d time.Duration)
	// Flush: one group-commit flush of kind FlushPush, FlushAck, FlushMove or FlushRead, with
	// the items it committed (or failed to), retries one by one included.
	Flush(kind string, items int, d time.Duration)
}

// The kinds of group-commit flushes.
const (
	FlushPush = "push"
	FlushAck  = "ack"
	// FlushMove: the cursor moves of autoAck claims served from kept rows
	// (move_commit.go).
	FlushMove = "autoack_move"
	// FlushRead: the autoAck reads (read_commit.go).
	FlushRead = "autoack_read"
)

type noTimings struct{}

func (noTimings) Push(time.Duration)               {}
func (noTimings) Pop(time.Duration, bool)          {}
func (noTimings) Ack(time.Duration)                {}
func (noTimings) Flush(string, int, time.Duration) {}

// recordPushed counts what a push stored, per queue.
func (b *Broker) recordPushed(items []PushItem, out []PushResult) {
	rec := b.rec
	if len(items) == 1 { // the common case, without a map
		if out[0].Status == Queued {
			rec.Pushed(items[0].Queue, 1)
		} else {
			rec.Pushed(items[0].Queue, 0)
		}
		return
	}
	stored := make(map[string]int, 2)
	for i, it := range items {
		n := stored[it.Queue]
		if i < len(out) && out[i].Status == Queued {
			n++
		}
		stored[it.Queue] = n
	}
	for q, n := range stored {
		rec.Pushed(q, n)
	}
}

// recordReplayed counts what a replay of spooled pushes stored, per queue:
// messages only, the requests were counted when they were answered
// Buffered. Duplicates (a push whose commit landed before the outage hid
// its answer) are not counted.
func (b *Broker) recordReplayed(items []PushItem, out []PushResult) {
	stored := make(map[string]int, 2)
	for i, it := range items {
		if i < len(out) && out[i].Status == Queued {
			stored[it.Queue]++
		}
	}
	for q, n := range stored {
		b.rec.Replayed(q, n)
	}
}

// recordPop counts one pop: the messages per queue with their ages, or an
// empty answer on the queue asked for. A failed pop is counted as a
// database error by the adapter.
func (b *Broker) recordPop(pr PopRequest, res *PopResult, err error) {
	if err != nil {
		return
	}
	rec := b.rec
	rec.Request(metrics.OpPop)
	if res == nil || len(res.Messages) == 0 {
		if b.KnownQueue(key(pr.Tenant, pr.Queue)) {
			rec.PopEmpty(pr.Queue)
		}
		return
	}
	type agg struct {
		n        int
		sum, max time.Duration
	}
	now := time.Now()
	byQueue := make(map[string]*agg, 1)
	for _, m := range res.Messages {
		a := byQueue[m.Queue]
		if a == nil {
			a = &agg{}
			byQueue[m.Queue] = a
		}
		a.n++
		// The age as the wire shows it: microseconds.
		lag := max(now.Sub(m.CreatedAt.Truncate(time.Microsecond)), 0)
		a.sum += lag
		a.max = max(a.max, lag)
	}
	for q, a := range byQueue {
		rec.Popped(q, a.n, a.sum, a.max)
	}
}

// parked counts a long-poll parked on a known queue until the returned
// function is called.
func (b *Broker) parked(k QueueKey) func() {
	if !b.KnownQueue(k) {
		return func() {}
	}
	return b.rec.Park(k.Queue)
}

// recordAcked counts acknowledgements per queue: those that applied, those
// that completed a message, those that reported a failure (failed or dlq),
// and the messages dead-lettered.
func (b *Broker) recordAcked(items []AckItem, res []AckResult) {
	type agg struct{ applied, completed, failed, dlq int }
	byQueue := make(map[string]*agg, 1)
	for i, r := range res {
		if r.Queue == "" || i >= len(items) {
			continue
		}
		a := byQueue[r.Queue]
		if a == nil {
			a = &agg{}
			byQueue[r.Queue] = a
		}
		if !r.Applied() {
			continue
		}
		a.applied++
		switch items[i].Status {
		case AckCompleted:
			a.completed++
		case AckFailed, AckDLQ:
			a.failed++
		}
		if r.DeadLettered {
			a.dlq++
		}
	}
	for q, a := range byQueue {
		b.rec.Acked(q, a.applied, a.completed, a.failed, a.dlq)
	}
}

// recordTransaction counts a committed transaction once, and once per queue
// it touched, with its pushes and acks (not as push or ack requests).
func (b *Broker) recordTransaction(pushes []PushItem, pushOut []PushResult, acks []AckItem, ackOut []AckResult) {
	b.rec.Request(metrics.OpTransaction)
	touched := map[string]bool{}
	if len(pushes) > 0 {
		b.recordPushed(pushes, pushOut)
		for _, p := range pushes {
			touched[p.Queue] = true
		}
	}
	if len(acks) > 0 {
		b.recordAcked(acks, ackOut)
		for _, r := range ackOut {
			if r.Queue != "" {
				touched[r.Queue] = true
			}
		}
	}
	for q := range touched {
		b.rec.Transaction(q)
	}
}
