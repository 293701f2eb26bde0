package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenforgo/queen/gen/client"
)

// backlogFillBatch is the items of one fill request: the most a push
// accepts (openapi PushRequest.items maxItems), so that the fill costs the
// fewest requests and commits.
const backlogFillBatch = 1000

// backlogWarmup is how many pops of each shape run before the timed ones,
// so that connections and prepared statements exist on both sides.
const backlogWarmup = 5

// backlogEmptyPartitions is how many partitions the empty-then-fed queues
// rotate their feeds over.
const backlogEmptyPartitions = 16

// popShape is one kind of pop the scenario times: queue mode or a consumer
// group (subscriptionMode=all), batch 1 or 10, always without a partition
// (the wildcard pop that scans for a candidate) and always acked.
type popShape struct {
	name  string
	group string // "" is queue mode
	batch int
}

var backlogShapes = []popShape{
	{"queue b1", "", 1},
	{"queue b10", "", 10},
	{"group b1", "bench-backlog-g", 1},
	{"group b10", "bench-backlog-g", 10},
}

// backlogScenario measures a deep backlog: it fills one queue with
// -backlog-messages pending messages over -backlog-partitions partitions
// (pushes of 1,000 items through the broker, so the state is what pushes
// make), then times each pop shape against the same shape on an empty queue
// fed just before each pop, and then the admin routes the dashboard polls.
// One row for the fill, two per pop shape, one per route.
func (b *bench) backlogScenario(ctx context.Context) ([]result, error) {
	cfg := b.cfg
	queue := b.queue("backlog")
	var results []result
	// The empty queues are new on every run, also when the backlog is
	// reused: their feeds' transaction ids restart at 0.
	run := strconv.FormatInt(time.Now().Unix(), 36)
	if cfg.BacklogReuse {
		fmt.Fprintf(b.log, "queen-bench: backlog: reusing %s as an earlier run left it\n", queue)
	} else {
		fill, err := b.backlogFill(ctx, queue)
		if err != nil {
			return results, err
		}
		results = append(results, fill)
	}
	for _, shape := range backlogShapes {
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		empty, err := b.backlogPops(ctx, b.queue("backlog-empty-"+run+"-"+strings.ReplaceAll(shape.name, " ", "-")), shape, true)
		if err != nil {
			return results, err
		}
		var deep result
		if cfg.BacklogDrain {
			deep, err = b.backlogDrainedPops(ctx, queue, shape)
		} else {
			deep, err = b.backlogPops(ctx, queue, shape, false)
		}
		if err != nil {
			return results, err
		}
		ratio := float64(deep.Latency.P99) / float64(max(empty.Latency.P99, 1))
		met := "met"
		if ratio > 2 {
			met = "missed"
		}
		deep.note(fmt.Sprintf("p99 %.2f× the empty queue's (target ≤ 2×: %s)", ratio, met))
		results = append(results, empty, deep)
	}
	if cfg.BacklogDrain {
		return results, nil
	}
	admin, err := b.backlogAdmin(ctx, queue)
	return append(results, admin...), err
}

// backlogFill pushes the backlog: item n of the fill goes to partition
// n / per (per = messages / partitions, the first messages % partitions
// partitions one more), so each partition is created by one request and
// never updated again by the fill.
func (b *bench) backlogFill(ctx context.Context, queue string) (result, error) {
	cfg := b.cfg
	total, parts := int64(cfg.BacklogMessages), int64(cfg.BacklogPartitions)
	per, extra := total/parts, total%parts
	// partitionOf maps an item number to its partition and its place in it.
	partitionOf := func(n int64) (int64, int64) {
		big := extra * (per + 1) // items of the partitions that hold one more
		if n < big {
			return n / (per + 1), n % (per + 1)
		}
		n -= big
		return extra + n/per, n % per
	}
	fmt.Fprintf(b.log, "queen-bench: backlog: filling %s with %d messages over %d partitions\n", queue, total, parts)
	pad := strings.Repeat("x", max(cfg.PayloadBytes-payloadOverhead, 0))
	var (
		next atomic.Int64 // the next item number to push
		t    tally
		wg   sync.WaitGroup
		recs = make([]recorder, cfg.Producers)
	)
	m := b.startMeasure(ctx)
	start := time.Now()
	for i := range cfg.Producers {
		wg.Go(func() {
			var body []byte
			var resp bytes.Buffer
			base := b.baseFor(i)
			for ctx.Err() == nil {
				from := next.Add(backlogFillBatch) - backlogFillBatch
				if from >= total {
					return
				}
				to := min(from+backlogFillBatch, total)
				body = appendFillBody(body[:0], queue, from, to, partitionOf, pad, time.Now())
				sent := time.Now()
				queued, err := b.push(ctx, base, body, &resp)
				if err != nil {
					t.fail(err)
					continue
				}
				recs[i].add(time.Since(sent))
				if queued != to-from {
					t.fail(fmt.Errorf("push: %d of %d queued (an earlier run's backlog? use a new -queue)", queued, to-from))
				}
				t.count(queued, time.Now())
			}
		})
	}
	wg.Wait()
	rs := make([]*recorder, len(recs))
	for i := range recs {
		rs[i] = &recs[i]
	}
	res := result{
		Scenario: "backlog fill",
		Command:  b.command("backlog", "backlog-messages", "backlog-partitions", "producers", "payload-bytes"),
		Messages: t.msgs.Load(),
		Elapsed:  t.lastAt(start).Sub(start),
		Latency:  mergeRecorders(rs...).summary(),
	}
	res.note(fmt.Sprintf("%d pushes of up to %d items over %d partitions", res.Latency.N, backlogFillBatch, parts))
	res.note(t.errorNote())
	m.finishRSS(&res)
	if res.Messages != total {
		return res, fmt.Errorf("fill: %d of %d messages queued: %s", res.Messages, total, t.errorNote())
	}
	if err := b.settleTables(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// appendFillBody is a push request of the fill's items [from, to), each to
// its partition, with transaction ids that repeat if the same fill runs
// twice on the same queue (then the broker answers duplicates).
func appendFillBody(buf []byte, queue string, from, to int64, partitionOf func(int64) (int64, int64), pad string, now time.Time) []byte {
	buf = append(buf, `{"items":[`...)
	t := now.UnixNano()
	for n := from; n < to; n++ {
		if n > from {
			buf = append(buf, ',')
		}
		p, j := partitionOf(n)
		buf = append(buf, `{"queue":"`...)
		buf = append(buf, queue...)
		buf = append(buf, `","partition":"p`...)
		buf = strconv.AppendInt(buf, p, 10)
		buf = append(buf, `","transactionId":"p`...)
		buf = strconv.AppendInt(buf, p, 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, j, 10)
		buf = append(buf, `","payload":`...)
		buf = appendPayload(buf, t, pad)
		buf = append(buf, '}')
	}
	return append(buf, "]}"...)
}

// settleTables does, with -pg, what autovacuum does within a minute or two
// of a bulk insert (vacuum for the visibility map, analyze for the
// statistics), so that the measured plans do not depend on whether it woke
// up yet. Without -pg the tables are left as they are.
func (b *bench) settleTables(ctx context.Context) error {
	if b.pg == nil {
		fmt.Fprintln(b.log, "queen-bench: backlog: no -pg: not vacuuming after the fill (plans may change when autovacuum runs)")
		return nil
	}
	fmt.Fprintln(b.log, "queen-bench: backlog: VACUUM ANALYZE of queen.messages and queen.partitions")
	_, err := b.pg.Exec(ctx, `VACUUM (ANALYZE) queen.messages, queen.partitions, queen.partition_consumers`)
	if err != nil {
		return fmt.Errorf("vacuum after the fill: %w", err)
	}
	return nil
}

// backlogPops times -pop-samples pops of one shape, each followed by its
// ack. With feed, the queue starts empty and every pop is preceded by a
// push of exactly what it will take (the empty-queue figure); without, it
// pops the backlog. The pops do not wait (wait=false): the time is the
// scan and the claim, never a long-poll.
func (b *bench) backlogPops(ctx context.Context, queue string, shape popShape, feed bool) (result, error) {
	cfg := b.cfg
	batch, wait, ms := shape.batch, false, int(requestTimeout.Milliseconds())
	params := &client.PopQueueParams{Batch: &batch, Wait: &wait, Timeout: &ms}
	if shape.group != "" {
		group, mode := shape.group, client.PopQueueParamsSubscriptionModeAll
		params.ConsumerGroup, params.SubscriptionMode = &group, &mode
	}
	pad := strings.Repeat("x", max(cfg.PayloadBytes-payloadOverhead, 0))
	var (
		resp      bytes.Buffer
		body      []byte
		pops, ack recorder
		t         tally
	)
	for i := range backlogWarmup + cfg.PopSamples {
		if ctx.Err() != nil {
			return result{}, ctx.Err()
		}
		if feed {
			part := "p" + strconv.Itoa(i%backlogEmptyPartitions)
			body = appendPushBody(body[:0], queue, part, queue+"-", int64(i*batch), batch, pad, time.Now())
			if n, err := b.push(ctx, b.base, body, &resp); err != nil || n != int64(batch) {
				return result{}, fmt.Errorf("feed %s: %d of %d queued: %v", queue, n, batch, err)
			}
		}
		start := time.Now()
		p, err := b.pop(ctx, b.base, queue, params, &resp)
		popped := time.Now()
		if err != nil {
			t.fail(err)
			continue
		}
		if p == nil || len(p.Messages) == 0 {
			t.fail(fmt.Errorf("pop %s of %s found nothing", shape.name, queue))
			continue
		}
		if _, err := b.ack(ctx, b.base, shape.group, p, &resp); err != nil {
			t.fail(err)
			continue
		}
		if i < backlogWarmup {
			continue
		}
		pops.add(popped.Sub(start))
		ack.add(time.Since(popped))
		t.count(int64(len(p.Messages)), time.Now())
	}
	what := "backlog"
	if feed {
		what = "empty queue, fed before each pop"
	}
	res := result{
		Scenario: "backlog pop " + shape.name + ", " + what,
		Command:  b.command("backlog", "pop-samples", "backlog-messages", "backlog-partitions"),
		Messages: t.msgs.Load(),
		Latency:  pops.summary(),
		NoRate:   true,
		Commits:  -1, PeakRSS: -1,
	}
	a := ack.summary()
	res.note(fmt.Sprintf("%d pops of batch %d, max %s; their acks p50 %s, p99 %s",
		res.Latency.N, batch, fmtLatency(res.Latency.Max), fmtLatency(a.P50), fmtLatency(a.P99)))
	res.note(t.errorNote())
	if res.Latency.N == 0 {
		return res, fmt.Errorf("%s: no pop succeeded: %s", res.Scenario, t.errorNote())
	}
	return res, nil
}
