package handlers

import (
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/metrics"
)

// The data plane reports to the metrics registry once per request and
// queue, after the work committed; these helpers turn a request's outcome
// into those calls (see handlers/metrics).

// recordPush counts one push request and what it stored per queue.
func (s *Server) recordPush(items []pushItem, out []pushOutcome) {
	s.cfg.Metrics.Request(metrics.OpPush)
	s.recordPushed(items, out)
}

// recordPushed counts what a push stored, per queue.
func (s *Server) recordPushed(items []pushItem, out []pushOutcome) {
	rec := s.cfg.Metrics
	if len(items) == 1 { // the common case, without a map
		if out[0].Status == "queued" {
			rec.Pushed(items[0].Queue, 1)
		} else {
			rec.Pushed(items[0].Queue, 0)
		}
		return
	}
	stored := make(map[string]int, 2)
	for i, it := range items {
		n := stored[it.Queue]
		if i < len(out) && out[i].Status == "queued" {
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
// `buffered`. Duplicates (a push whose commit landed before the outage hid
// its answer) are not counted.
func (s *Server) recordReplayed(items []pushItem, out []pushOutcome) {
	stored := make(map[string]int, 2)
	for i, it := range items {
		if i < len(out) && out[i].Status == "queued" {
			stored[it.Queue]++
		}
	}
	for q, n := range stored {
		s.cfg.Metrics.Replayed(q, n)
	}
}

// recordPop counts one pop: the messages per queue with their ages, or an
// empty answer on the queue asked for. A failed pop is counted as a
// database error by responseError.
func (s *Server) recordPop(pr popRequest, resp *api.PopResponse, err error) {
	if err != nil {
		return
	}
	rec := s.cfg.Metrics
	rec.Request(metrics.OpPop)
	if resp == nil || len(resp.Messages) == 0 {
		if s.knownQueue(pr.queueName) {
			rec.PopEmpty(pr.queueName)
		}
		return
	}
	type agg struct {
		n        int
		sum, max time.Duration
	}
	now := time.Now()
	byQueue := make(map[string]*agg, 1)
	for _, m := range resp.Messages {
		a := byQueue[m.Queue]
		if a == nil {
			a = &agg{}
			byQueue[m.Queue] = a
		}
		a.n++
		if t, err := time.Parse(timeMicros, m.CreatedAt); err == nil {
			lag := max(now.Sub(t), 0)
			a.sum += lag
			a.max = max(a.max, lag)
		}
	}
	for q, a := range byQueue {
		rec.Popped(q, a.n, a.sum, a.max)
	}
}

// knownQueue reports a queue this broker has seen exist. Per-queue counters
// are kept only for those, so pops on made-up names cannot grow the registry.
func (s *Server) knownQueue(name string) bool {
	if name == "" {
		return false
	}
	_, ok := s.queues.peek(name)
	return ok
}

// parked counts a long-poll parked on a known queue until the returned
// function is called.
func (s *Server) parked(queue string) func() {
	if !s.knownQueue(queue) {
		return func() {}
	}
	return s.cfg.Metrics.Park(queue)
}

// recordAcks counts one ack request per queue: the acknowledgements that
// applied, those that completed a message, those that reported a failure
// (failed or dlq), and the messages dead-lettered.
func (s *Server) recordAcks(items []ackItem, res []api.AckResult) {
	s.cfg.Metrics.Request(metrics.OpAck)
	s.recordAcked(items, res)
}

// recordAcked counts acknowledgements per queue.
func (s *Server) recordAcked(items []ackItem, res []api.AckResult) {
	rec := s.cfg.Metrics
	type agg struct{ applied, completed, failed, dlq int }
	byQueue := make(map[string]*agg, 1)
	for i, r := range res {
		if r.QueueName == nil || i >= len(items) {
			continue
		}
		a := byQueue[*r.QueueName]
		if a == nil {
			a = &agg{}
			byQueue[*r.QueueName] = a
		}
		if !r.Success {
			continue
		}
		a.applied++
		switch items[i].Status {
		case "completed":
			a.completed++
		case "failed", "dlq":
			a.failed++
		}
		if r.Dlq {
			a.dlq++
		}
	}
	for q, a := range byQueue {
		rec.Acked(q, a.applied, a.completed, a.failed, a.dlq)
	}
}

// recordTransaction counts a committed transaction once, and once per queue
// it touched, with its pushes and acks (not as push or ack requests).
func (s *Server) recordTransaction(pushes []pushItem, pushOut []pushOutcome, acks []ackItem, ackOut []api.AckResult) {
	rec := s.cfg.Metrics
	rec.Request(metrics.OpTransaction)
	touched := map[string]bool{}
	if len(pushes) > 0 {
		s.recordPushed(pushes, pushOut)
		for _, p := range pushes {
			touched[p.Queue] = true
		}
	}
	if len(acks) > 0 {
		s.recordAcked(acks, ackOut)
		for _, r := range ackOut {
			if r.QueueName != nil {
				touched[*r.QueueName] = true
			}
		}
	}
	for q := range touched {
		rec.Transaction(q)
	}
}
