package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// flowOutcome is what a push-and-consume run measured.
type flowOutcome struct {
	pushed, delivered int64
	pushElapsed       time.Duration // start -> last producer done
	deliverElapsed    time.Duration // start -> last ack
	push, cycle, e2e  latency
	errors            string
}

// flow pushes to queue for -duration (paced by -rate) while -consumers per
// group consume it. Consumers go on after the producers stop, until an
// empty long-poll or a grace period of min(-duration, 30s), so that the
// backlog left over is visible rather than cut off.
func (b *bench) flow(ctx context.Context, queue string, groups []string) flowOutcome {
	var pt, ct tally
	var producersDone atomic.Bool
	start := time.Now()
	deadline := start.Add(b.cfg.Duration)
	drainDeadline := deadline.Add(min(b.cfg.Duration, 30*time.Second))

	var (
		wg      sync.WaitGroup
		pushRec *recorder
		pushEnd time.Time
		cs      []*consumer
	)
	wg.Go(func() {
		pushRec = b.pushFor(ctx, queue, deadline, &pt, newPacer(b.cfg.Rate, b.cfg.Batch))
		pushEnd = time.Now()
		producersDone.Store(true)
	})
	wg.Go(func() {
		cs = b.consumeFor(ctx, queue, groups, drainDeadline, &ct, producersDone.Load)
	})
	wg.Wait()

	out := flowOutcome{
		pushed:         pt.msgs.Load(),
		delivered:      ct.msgs.Load(),
		pushElapsed:    pushEnd.Sub(start),
		deliverElapsed: ct.lastAt(start).Sub(start),
		push:           pushRec.summary(),
		cycle:          cycleRecorders(cs).summary(),
		e2e:            e2eRecorders(cs).summary(),
	}
	for _, note := range []string{pt.errorNote(), ct.errorNote()} {
		if note != "" {
			out.errors += note + "; "
		}
	}
	return out
}

// flowResult turns a flow into a row: msg/s counts deliveries, latency is
// end to end (push request built -> pop answered), the ratio column uses
// the push side.
func (b *bench) flowResult(name, command string, groups int, f flowOutcome) result {
	res := result{
		Scenario: name,
		Command:  command,
		Messages: f.delivered,
		Elapsed:  f.deliverElapsed,
		Latency:  f.e2e,
	}
	if f.pushElapsed > 0 {
		res.PushRate = float64(f.pushed) / f.pushElapsed.Seconds()
	}
	res.note(fmt.Sprintf("pushed %.0f msg/s (push p50 %s, p99 %s)", res.PushRate, fmtLatency(f.push.P50), fmtLatency(f.push.P99)))
	res.note(fmt.Sprintf("pop+ack p50 %s, p99 %s", fmtLatency(f.cycle.P50), fmtLatency(f.cycle.P99)))
	if left := f.pushed*int64(groups) - f.delivered; left > 0 {
		res.note(fmt.Sprintf("%d left unconsumed", left))
	}
	res.note(f.errors)
	return res
}

// mixedScenario: push and consume one queue at once, queue mode.
func (b *bench) mixedScenario(ctx context.Context) (result, error) {
	queue := b.queue("mixed")
	m := b.startMeasure(ctx)
	f := b.flow(ctx, queue, []string{""})
	res := b.flowResult("mixed", b.command("mixed", "duration", "producers", "consumers", "batch", "partitions", "payload-bytes", "rate", "auto-ack"), 1, f)
	m.finish(ctx, &res)
	return res, nil
}
