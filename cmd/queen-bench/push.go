package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// payloadOverhead is the size of a payload without padding:
// {"t":<19 digits>,"pad":""}. The send time lets consumers measure the
// end-to-end latency.
const payloadOverhead = len(`{"t":`) + 19 + len(`,"pad":""}`)

// requestTimeout bounds every request but the long-poll pops.
const requestTimeout = time.Minute

// producer pushes batches to one queue, each request to one partition.
type producer struct {
	b          *bench
	base       string // the broker this producer talks to
	queue      string
	id         int
	producers  int
	partitions int
	batch      int
	pad        string
	txPrefix   string
	seq        int64
	body       []byte
	resp       bytes.Buffer
	rec        recorder
}

func (b *bench) newProducers(queue string) []*producer {
	pad := strings.Repeat("x", max(b.cfg.PayloadBytes-payloadOverhead, 0))
	ps := make([]*producer, b.cfg.Producers)
	for i := range ps {
		ps[i] = &producer{
			b: b, base: b.baseFor(i), queue: queue, id: i, producers: b.cfg.Producers,
			partitions: b.cfg.Partitions, batch: b.cfg.Batch, pad: pad,
			txPrefix: queue + "-" + strconv.Itoa(i) + "-",
		}
	}
	return ps
}

// run pushes until the deadline, the budget or ctx ends it. Producer i
// sends its k-th request to partition (i + k*producers) mod partitions, so
// producers do not queue on each other's partition locks while there are at
// least as many partitions as producers.
func (p *producer) run(ctx context.Context, deadline time.Time, t *tally, bud *budget, pace *pacer) {
	for k := 0; ctx.Err() == nil && time.Now().Before(deadline); k++ {
		n := bud.take(p.batch)
		if n == 0 {
			return
		}
		if !pace.wait(deadline) {
			return
		}
		part := (p.id + k*p.producers) % p.partitions
		p.body = appendPushBody(p.body[:0], p.queue, "p"+strconv.Itoa(part), p.txPrefix, p.seq, n, p.pad, time.Now())
		p.seq += int64(n)
		start := time.Now()
		queued, err := p.b.push(ctx, p.base, p.body, &p.resp)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.fail(err)
			sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
			continue
		}
		end := time.Now()
		p.rec.add(end.Sub(start))
		t.count(queued, end)
	}
}

// appendPushBody appends a push request of n items to one partition, with
// transactionIds txPrefix+seq, txPrefix+seq+1, ... Names are validated
// against [A-Za-z0-9_.-] (see namePattern), so nothing needs escaping.
func appendPushBody(buf []byte, queue, partition, txPrefix string, seq int64, n int, pad string, now time.Time) []byte {
	buf = append(buf, `{"items":[`...)
	t := now.UnixNano()
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"queue":"`...)
		buf = append(buf, queue...)
		buf = append(buf, `","partition":"`...)
		buf = append(buf, partition...)
		buf = append(buf, `","transactionId":"`...)
		buf = append(buf, txPrefix...)
		buf = strconv.AppendInt(buf, seq+int64(i), 10)
		buf = append(buf, `","payload":`...)
		buf = appendPayload(buf, t, pad)
		buf = append(buf, '}')
	}
	return append(buf, "]}"...)
}

func appendPayload(buf []byte, t int64, pad string) []byte {
	buf = append(buf, `{"t":`...)
	buf = strconv.AppendInt(buf, t, 10) // 19 digits until the year 2286
	buf = append(buf, `,"pad":"`...)
	buf = append(buf, pad...)
	return append(buf, `"}`...)
}

// push sends one push request to a broker and returns how many items were
// queued.
//
// The request goes through the generated client, but the body is built by
// appendPushBody and the answer is counted, not decoded into
// []client.PushResult: decoding the generated types tripled the bench's own
// CPU per pushed message (docs/benchmarks.md, "queen-bench and the generated
// client"), CPU the broker under test shares on a small machine.
func (b *bench) push(ctx context.Context, base string, body []byte, resp *bytes.Buffer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	res, err := b.apiAt(base).PushMessagesWithBody(ctx, nil, "application/json", bytes.NewReader(body))
	status, err := readAnswer(res, err, resp)
	if err != nil {
		return 0, fmt.Errorf("push: %w", err)
	}
	if status != http.StatusCreated {
		return 0, fmt.Errorf("push: status %d: %s", status, excerpt(resp.Bytes()))
	}
	return int64(bytes.Count(resp.Bytes(), []byte(`"status":"queued"`))), nil
}

// readAnswer reads a raw answer of the generated client into resp.
func readAnswer(res *http.Response, err error, resp *bytes.Buffer) (int, error) {
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	resp.Reset()
	if _, err := resp.ReadFrom(res.Body); err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}

func excerpt(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// sleepUntil sleeps until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// pushFor runs the producers until the deadline and returns when all have
// stopped, with their merged push latencies.
func (b *bench) pushFor(ctx context.Context, queue string, deadline time.Time, t *tally, pace *pacer) *recorder {
	ps := b.newProducers(queue)
	bud := newBudget(b.cfg.MaxMessages)
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.run(ctx, deadline, t, bud, pace) })
	}
	wg.Wait()
	recs := make([]*recorder, len(ps))
	for i, p := range ps {
		recs[i] = &p.rec
	}
	return mergeRecorders(recs...)
}

// pushScenario: producers push as fast as they can; latency is the push
// request's round trip (the broker answers after the commit).
func (b *bench) pushScenario(ctx context.Context) (result, error) {
	queue := b.queue("push")
	m := b.startMeasure(ctx)
	var t tally
	start := time.Now()
	rec := b.pushFor(ctx, queue, start.Add(b.cfg.Duration), &t, nil)
	elapsed := time.Since(start)
	res := result{
		Scenario: "push",
		Command:  b.command("push", "duration", "producers", "batch", "partitions", "payload-bytes"),
		Messages: t.msgs.Load(),
		Elapsed:  elapsed,
		Latency:  rec.summary(),
	}
	res.PushRate = res.rate()
	res.note(fmt.Sprintf("%d pushes of %d", res.Latency.N, b.cfg.Batch))
	res.note(t.errorNote())
	m.finish(ctx, &res)
	return res, nil
}
