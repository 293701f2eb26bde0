package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/queenforgo/queen/gen/client"
)

// wakeupAcross is the wakeup scenario with several -url brokers on one
// database: the push goes to the first broker, and one long-poll is parked
// on each of the others, each in its own consumer group (so every one of
// them gets the message). What it times is the path between brokers: the
// commit on the first broker, its announcement (the mesh or PostgreSQL
// NOTIFY, docs/mesh.md), the wake-up and the pop on the other broker. Set
// QUEEN_POP_REPOLL_MS on the brokers far above the numbers measured, or a
// re-poll may answer instead of the wake-up.
func (b *bench) wakeupAcross(ctx context.Context) (result, error) {
	queue := b.queue("wakeup")
	remotes := b.bases[1:]
	popURLs := remotes
	params := make([]*client.PopQueueParams, len(remotes))
	for i := range remotes {
		// Each remote broker's own group, autoAck: every cycle is one
		// delivery per broker, nothing left leased.
		params[i] = b.popParams(fmt.Sprintf("wakeup-%d", i+1), 1, wakeupPollTimeout, true)
	}
	pad := strings.Repeat("x", max(b.cfg.PayloadBytes-payloadOverhead, 0))
	var pushResp bytes.Buffer
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
	// Warm up: create the queue, and let every broker's group consume the
	// first message, so that the cycles time only the wake-up path.
	if err := pushOne(); err != nil {
		return result{}, err
	}
	for i, u := range popURLs {
		var resp bytes.Buffer
		if p, err := b.pop(ctx, u, queue, params[i], &resp); err != nil || p == nil {
			return result{}, errors.Join(errors.New("warm-up pop found nothing"), err)
		}
	}

	m := b.startMeasure(ctx)
	var (
		t         tally
		fromReply recorder // push answered -> pop answered, every remote broker
		worst     recorder // the slowest remote broker of each cycle
		popFirst  int
	)
	start := time.Now()
	deadline := start.Add(b.cfg.Duration)
	popped := make(chan popOutcome, len(popURLs))
	for i := 0; i < b.cfg.Wakeups && ctx.Err() == nil && time.Now().Before(deadline); i++ {
		for i, u := range popURLs {
			go func() {
				var buf bytes.Buffer
				p, err := b.pop(ctx, u, queue, params[i], &buf)
				popped <- popOutcome{p, err, time.Now()}
			}()
		}
		sleepUntil(ctx, time.Now().Add(wakeupPark))
		err := pushOne()
		answered := time.Now()
		var slowest time.Duration
		ok := err == nil
		if err != nil {
			t.fail(err)
		}
		for range popURLs {
			o := <-popped
			switch {
			case o.err != nil:
				t.fail(o.err)
				ok = false
				continue
			case o.p == nil || len(o.p.Messages) == 0:
				t.fail(fmt.Errorf("parked pop slept through a push on another broker for %s", wakeupPollTimeout))
				ok = false
				continue
			}
			d := o.at.Sub(answered)
			if d < 0 {
				popFirst++
				d = 0
			}
			fromReply.add(d)
			slowest = max(slowest, d)
		}
		if ok {
			worst.add(slowest)
			t.count(1, time.Now())
		}
	}
	res := result{
		Scenario: "wakeup",
		Command:  b.command("wakeup", "duration", "wakeups"),
		Messages: t.msgs.Load(),
		Elapsed:  time.Since(start),
		Latency:  fromReply.summary(),
		NoRate:   true,
	}
	w := worst.summary()
	res.note(fmt.Sprintf("push on 1 broker, long-polls on %d others: %d wake-ups, max %s", len(remotes), res.Latency.N, fmtLatency(res.Latency.Max)))
	res.note(fmt.Sprintf("slowest broker per push p50 %s, p99 %s", fmtLatency(w.P50), fmtLatency(w.P99)))
	if popFirst > 0 {
		res.note(fmt.Sprintf("%d pops answered before their push (counted as 0)", popFirst))
	}
	res.note(t.errorNote())
	m.finish(ctx, &res)
	return res, nil
}
