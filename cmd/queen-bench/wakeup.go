package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// wakeupPark is how long a cycle lets its pop reach the broker and park
// before it pushes. A pop that has not parked yet finds the message at once,
// which can only make the measured latency smaller, never hide a slow wake.
const wakeupPark = 50 * time.Millisecond

// wakeupPollTimeout bounds each parked pop; a pop that sleeps through it
// is a missed wake-up and counts as an error.
const wakeupPollTimeout = 5 * time.Second

type popOutcome struct {
	p   *popResponse
	err error
	at  time.Time
}

// wakeupScenario measures, on an otherwise idle broker, the time from a
// push's answer (the commit is done) to the answer of a long-poll that was
// parked on the queue before the push. One consumer, one message per cycle,
// -wakeups cycles or -duration, whichever ends first.
// With several -url brokers it measures across them instead
// (wakeup_across.go).
func (b *bench) wakeupScenario(ctx context.Context) (result, error) {
	if len(b.bases) > 1 {
		return b.wakeupAcross(ctx)
	}
	queue := b.queue("wakeup")
	params := b.popParams("", 1, wakeupPollTimeout, false)
	pad := strings.Repeat("x", max(b.cfg.PayloadBytes-payloadOverhead, 0))
	var pushResp, popResp, ackResp bytes.Buffer
	var body []byte
	seq := int64(0)
	pushOne := func() error {
		body = appendPushBody(body[:0], queue, "p0", queue+"-", seq, 1, pad, time.Now())
		seq++
		n, err := b.push(ctx, b.base, body, &pushResp)
		if err == nil && n != 1 {
			err = fmt.Errorf("push: %d of 1 queued", n)
		}
		return err
	}
	// Warm up: create the queue and partition and consume the message, so
	// that the cycles below time only the wake-up path.
	if err := pushOne(); err != nil {
		return result{}, err
	}
	if p, err := b.pop(ctx, b.base, queue, params, &popResp); err != nil || p == nil {
		return result{}, errors.Join(errors.New("warm-up pop found nothing"), err)
	} else if _, err := b.ack(ctx, b.base, "", p, &ackResp); err != nil {
		return result{}, err
	}

	m := b.startMeasure(ctx)
	var (
		t         tally
		fromReply recorder // push answered -> pop answered
		fromSend  recorder // push sent -> pop answered
		popFirst  int
	)
	start := time.Now()
	deadline := start.Add(b.cfg.Duration)
	for i := 0; i < b.cfg.Wakeups && ctx.Err() == nil && time.Now().Before(deadline); i++ {
		popped := make(chan popOutcome, 1)
		go func() {
			var buf bytes.Buffer
			p, err := b.pop(ctx, b.base, queue, params, &buf)
			popped <- popOutcome{p, err, time.Now()}
		}()
		sleepUntil(ctx, time.Now().Add(wakeupPark))
		sent := time.Now()
		err := pushOne()
		answered := time.Now()
		o := <-popped
		switch {
		case err != nil:
			t.fail(err)
			continue
		case o.err != nil:
			t.fail(o.err)
			continue
		case o.p == nil || len(o.p.Messages) == 0:
			t.fail(fmt.Errorf("parked pop slept through a push for %s", wakeupPollTimeout))
			continue
		}
		d := o.at.Sub(answered)
		if d < 0 {
			// The pop's answer overtook the push's own answer.
			popFirst++
			d = 0
		}
		fromReply.add(d)
		fromSend.add(o.at.Sub(sent))
		if _, err := b.ack(ctx, b.base, "", o.p, &ackResp); err != nil {
			t.fail(err)
		}
		t.count(1, time.Now())
	}
	res := result{
		Scenario: "wakeup",
		Command:  b.command("wakeup", "duration", "wakeups"),
		Messages: t.msgs.Load(),
		Elapsed:  time.Since(start),
		Latency:  fromReply.summary(),
		NoRate:   true,
	}
	send := fromSend.summary()
	res.note(fmt.Sprintf("%d wake-ups, max %s", res.Latency.N, fmtLatency(res.Latency.Max)))
	res.note(fmt.Sprintf("push sent -> pop answered p50 %s, p99 %s", fmtLatency(send.P50), fmtLatency(send.P99)))
	if popFirst > 0 {
		res.note(fmt.Sprintf("%d pops answered before their push (counted as 0)", popFirst))
	}
	res.note(t.errorNote())
	m.finish(ctx, &res)
	return res, nil
}
