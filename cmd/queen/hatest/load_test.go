package hatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// httpClient talks to the brokers: a short timeout so that a dead broker
// never hangs a test, and enough idle connections for the load.
var httpClient = &http.Client{
	Timeout:   15 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
}

// call sends a JSON request; a transport error (broker gone) is status 0.
func call(ctx context.Context, method, url string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, []byte(err.Error())
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, []byte(err.Error())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return resp.StatusCode, out
}

// router names the broker for attempt n of a request of client key: a
// client sticks to one broker and moves on when a request fails.
type router func(key, attempt int) string

// load is the producers and consumers of one test and everything they were
// told, checked at the end against what at-least-once delivery allows.
//
// Producers own one partition each and push batches of known
// transactionIds in sequence, retrying a batch that was not acknowledged
// with the same ids, as a client must; a batch is acknowledged when the
// broker answers 201 with every item queued, buffered or duplicate.
// Consumers long-poll the queue and ack each batch through the broker that
// delivered it.
type load struct {
	queue      string
	partitions int
	batch      int
	push, pop  router

	// credit bounds the messages pushed but not yet delivered, so that a
	// run's end does not wait on a long backlog. It is far above what the
	// paced producers have in flight when the consumers keep up, so that
	// producers go on pushing (into the spools) through an outage, while
	// the consumers cannot take anything.
	credit chan struct{}

	mu         sync.Mutex
	tried      map[string]bool   // every transactionId ever sent
	acked      map[string]string // transactionId -> first acknowledged status
	byStatus   map[string]int
	answers    []pushAnswer
	pushFails  int                  // push requests not acknowledged (retried)
	popFails   int                  // pop requests answered neither 200 nor 204
	ackFails   int                  // ack requests not answered 200
	delivered  map[string]int       // transactionId -> deliveries
	lastFirst  map[string]int       // partition -> sequence of its latest first delivery
	ackedAt    map[string]time.Time // transactionId -> when an ack of it was answered success
	afterAck   []string             // deliveries by a pop sent after the message's ack succeeded
	outOfOrder []string             // first deliveries that went backwards in their partition
	protocol   []string             // answers a client cannot make sense of
	ackRefused map[string]string    // transactionId -> error of its latest ack answered success: false
	ackErrors  []string             // the first failed ack requests, for a failing test's message
}

// pushAnswer is one push request as the producer saw it.
type pushAnswer struct {
	sent, at time.Time
	url      string // the broker asked
	kind     string // queued (all queued or duplicate), buffered (any buffered), failed
}

func newLoad(queue string, partitions int, push, pop router) *load {
	return &load{
		queue: queue, partitions: partitions, batch: 10, push: push, pop: pop, credit: make(chan struct{}, 30000),
		tried: map[string]bool{}, acked: map[string]string{}, byStatus: map[string]int{},
		delivered: map[string]int{}, lastFirst: map[string]int{}, ackedAt: map[string]time.Time{},
		ackRefused: map[string]string{},
	}
}

func txID(part string, seq int) string { return fmt.Sprintf("%s-%08d", part, seq) }

func seqOf(tx string) int {
	_, s, _ := strings.Cut(tx, "-")
	n, _ := strconv.Atoi(s)
	return n
}

// startProducers and startConsumers run one side only.
func (l *load) startProducers(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	for p := range l.partitions {
		wg.Go(func() { l.produce(ctx, p) })
	}
	return &wg
}

func (l *load) startConsumers(ctx context.Context, consumers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() { l.consume(ctx, c) })
	}
	return &wg
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// producerPace is the shortest time between a producer's batches: six
// producers push at most 1200 msg/s, which the consumers keep up with on a
// loaded two-core machine.
const producerPace = 50 * time.Millisecond

func (l *load) produce(ctx context.Context, p int) {
	part := fmt.Sprintf("p%d", p)
	pace := time.NewTicker(producerPace)
	defer pace.Stop()
	for seq := 0; ctx.Err() == nil; seq += l.batch {
		select {
		case <-pace.C:
		case <-ctx.Done():
			return
		}
		for range l.batch {
			select {
			case l.credit <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		items := make([]map[string]any, l.batch)
		for i := range items {
			id := txID(part, seq+i)
			items[i] = map[string]any{"queue": l.queue, "partition": part, "transactionId": id, "payload": map[string]any{"id": id}}
		}
		for attempt := 0; ctx.Err() == nil; attempt++ {
			if l.pushOnce(ctx, l.push(p, attempt), items) {
				break
			}
			pause(ctx, 50*time.Millisecond)
		}
	}
}

// pushOnce sends one batch and records the answer; it reports whether the
// batch was acknowledged.
func (l *load) pushOnce(ctx context.Context, url string, items []map[string]any) bool {
	l.mu.Lock()
	for _, it := range items {
		l.tried[it["transactionId"].(string)] = true
	}
	l.mu.Unlock()
	sent := time.Now()
	status, raw := call(ctx, "POST", url+"/api/v1/push", map[string]any{"items": items})
	at := time.Now()
	var res []struct {
		Status string `json:"status"`
	}
	ok := status == http.StatusCreated && json.Unmarshal(raw, &res) == nil && len(res) == len(items)
	kind := "queued"
	for _, r := range res {
		switch r.Status {
		case "queued", "duplicate":
		case "buffered":
			kind = "buffered"
		default:
			ok = false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		if ctx.Err() == nil {
			l.pushFails++
			l.answers = append(l.answers, pushAnswer{sent: sent, at: at, url: url, kind: "failed"})
			if status == http.StatusCreated {
				l.protocol = append(l.protocol, fmt.Sprintf("push answered 201 %s", raw))
			}
		}
		return false
	}
	l.answers = append(l.answers, pushAnswer{sent: sent, at: at, url: url, kind: kind})
	for i, r := range res {
		id := items[i]["transactionId"].(string)
		if _, seen := l.acked[id]; !seen {
			l.acked[id] = r.Status
		}
		l.byStatus[r.Status]++
	}
	return true
}

type popped struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Partition     string `json:"partition"`
	LeaseID       string `json:"leaseId"`
}

func (l *load) consume(ctx context.Context, c int) {
	attempt := 0
	for ctx.Err() == nil {
		url := l.pop(c, attempt)
		msgs, ok := l.popOnce(ctx, url)
		if !ok {
			attempt++
			pause(ctx, 50*time.Millisecond)
			continue
		}
		if len(msgs) > 0 && !l.ackOnce(ctx, url, msgs) {
			attempt++ // redelivered after the lease expires
		}
	}
}

// popOnce long-polls one batch and records its deliveries.
func (l *load) popOnce(ctx context.Context, url string) ([]popped, bool) {
	sent := time.Now()
	status, raw := call(ctx, "GET", url+"/api/v1/pop/queue/"+l.queue+"?batch=20&wait=true&timeout=1000", nil)
	switch status {
	case http.StatusNoContent:
		return nil, true
	case http.StatusOK:
	default:
		if ctx.Err() == nil {
			l.mu.Lock()
			l.popFails++
			l.mu.Unlock()
		}
		return nil, false
	}
	var p struct {
		Messages []popped `json:"messages"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := json.Unmarshal(raw, &p); err != nil {
		l.protocol = append(l.protocol, fmt.Sprintf("pop answered 200 %s", raw))
		return nil, false
	}
	for _, m := range p.Messages {
		first := l.delivered[m.TransactionID] == 0
		l.delivered[m.TransactionID]++
		if at, done := l.ackedAt[m.TransactionID]; done && at.Before(sent) {
			l.afterAck = append(l.afterAck, m.TransactionID)
		}
		if first {
			select {
			case <-l.credit:
			default: // a message whose push was never acknowledged
			}
			seq := seqOf(m.TransactionID)
			if last, ok := l.lastFirst[m.Partition]; ok && seq <= last {
				l.outOfOrder = append(l.outOfOrder, fmt.Sprintf("%s after %s-%08d", m.TransactionID, m.Partition, last))
			}
			l.lastFirst[m.Partition] = seq
		}
	}
	return p.Messages, true
}

// ackOnce acks a delivered batch through the broker that delivered it.
func (l *load) ackOnce(ctx context.Context, url string, msgs []popped) bool {
	acks := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "leaseId": m.LeaseID}
	}
	status, raw := call(ctx, "POST", url+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks})
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if status != http.StatusOK {
		if ctx.Err() == nil {
			l.ackFails++
			if len(l.ackErrors) < 5 {
				l.ackErrors = append(l.ackErrors, fmt.Sprintf("%s: %d %s", time.Now().Format("15:04:05.000"), status, raw))
			}
		}
		return false
	}
	var res []struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != len(msgs) {
		l.protocol = append(l.protocol, fmt.Sprintf("ack answered 200 %s", raw))
		return false
	}
	for i, r := range res {
		if _, done := l.ackedAt[msgs[i].TransactionID]; r.Success && !done {
			l.ackedAt[msgs[i].TransactionID] = at
		}
		if !r.Success && r.Error != nil {
			l.ackRefused[msgs[i].TransactionID] = *r.Error
		}
	}
	return true
}

// counts is a snapshot for the phases of a test.
type counts struct {
	queued, acked int
}

func (l *load) counts() counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return counts{queued: l.byStatus["queued"], acked: len(l.ackedAt)}
}

// waitProgress waits until the load made progress: n more pushed items
// answered queued and n more messages acked than at the call.
func (l *load) waitProgress(t testing.TB, what string, n int) {
	t.Helper()
	from := l.counts()
	waitFor(t, what, 2*time.Minute, func() bool {
		c := l.counts()
		return c.queued >= from.queued+n && c.acked >= from.acked+n
	})
}

// recovery measures one fault from the producers' answers: disrupted is
// the number of push requests answered other than queued after the fault
// began; recovered is how long after the fault a push first answered
// queued again, counting only requests sent after the first disrupted
// answer (so that a request committed just before the fault does not
// count). With a url, only that broker's queued answers count: the
// recovery of one broker rather than of the database. ok is false while
// no such push has been answered.
//
// A fault may disrupt no push at all (a switchover between two pushes of
// every producer, the brokers' sessions moved on before any request
// failed): then the load goes on when a push sent after the fault was
// injected (faultDone) answers queued, and recovered is measured to it.
func (l *load) recovery(fault, faultDone time.Time, url string) (disrupted int, recovered time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var firstBad time.Time
	for _, a := range l.answers {
		if a.at.After(fault) && a.kind != "queued" {
			disrupted++
			if firstBad.IsZero() || a.at.Before(firstBad) {
				firstBad = a.at
			}
		}
	}
	if disrupted == 0 {
		firstBad = faultDone
	}
	var best time.Time
	for _, a := range l.answers {
		if a.kind == "queued" && a.sent.After(firstBad) && (url == "" || a.url == url) && (best.IsZero() || a.at.Before(best)) {
			best = a.at
		}
	}
	if best.IsZero() {
		return disrupted, 0, false
	}
	return disrupted, best.Sub(fault), true
}

// missing is the acknowledged pushes not delivered yet.
func (l *load) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.acked {
		if l.delivered[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// waitDelivered waits until every acknowledged push has been delivered
// (the spools drain on the way); it reports whether that happened.
func (l *load) waitDelivered(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for len(l.missing()) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(20 * time.Millisecond)
	}
	return true
}

// summary is what a run measured.
type summary struct {
	acked, queued, buffered, duplicate int
	pushFails, popFails, ackFails      int
	deliveries, distinct, redelivered  int
	ackInDoubt                         int
}

// verify asserts what at-least-once delivery promises, once every
// acknowledged push was delivered and the consumers caught up (the
// database check is the caller's):
//   - every acknowledged push (queued, buffered, duplicate) was delivered:
//     nothing acknowledged is lost;
//   - nothing was delivered that was never pushed;
//   - no message was delivered by a pop sent after an ack of it was
//     answered success: a successful ack is durable, so redeliveries are
//     only of messages whose ack failed, was never sent, or was not yet
//     answered (the at-least-once window);
//   - in each partition, first deliveries follow the push order.
//
// A delivered message whose ack was not answered success and that was not
// delivered again had its ack applied with the answer lost (a commit in
// flight when the server went away): counted as "ack in doubt". That the
// consumers' cursors passed every message and nothing was dead-lettered
// is what shows these acks were applied.
func (l *load) verify(t testing.TB) summary {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []string
	for id := range l.acked {
		if l.delivered[id] == 0 {
			lost = append(lost, id)
		}
	}
	require.Empty(t, lost, "acknowledged pushes never delivered")
	s := summary{
		acked: len(l.acked), queued: l.byStatus["queued"], buffered: l.byStatus["buffered"], duplicate: l.byStatus["duplicate"],
		pushFails: l.pushFails, popFails: l.popFails, ackFails: l.ackFails, distinct: len(l.delivered),
	}
	for id, n := range l.delivered {
		require.True(t, l.tried[id], "delivered %q was never pushed", id)
		s.deliveries += n
		if _, ok := l.ackedAt[id]; !ok {
			s.ackInDoubt++
		}
	}
	require.Empty(t, l.afterAck, "delivered again after a successful ack")
	require.Empty(t, l.outOfOrder, "first deliveries out of push order")
	require.Empty(t, l.protocol, "answers a client cannot use")
	s.redelivered = s.deliveries - s.distinct
	return s
}

func (s summary) String() string {
	return fmt.Sprintf("pushes acknowledged %d (queued %d, buffered %d, duplicate on retry %d), lost 0; "+
		"push requests refused and retried %d; deliveries %d of %d messages (redeliveries %d), "+
		"pop failures %d, ack requests failed %d, acks applied with the answer lost %d, delivered after a successful ack 0",
		s.acked, s.queued, s.buffered, s.duplicate, s.pushFails, s.deliveries, s.distinct, s.redelivered,
		s.popFails, s.ackFails, s.ackInDoubt)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-end:
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
	}
}
