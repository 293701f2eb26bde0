package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/queenforgo/queen/gen/client"
)

// consumer pops a batch from a queue, then acks all of it in one request.
type consumer struct {
	b      *bench
	base   string // the broker it pops from and acks through
	queue  string
	params *client.PopQueueParams
	group  string // "" is queue mode
	resp   bytes.Buffer
	popped popResponse // the last answer, its Messages reused
	cycle  recorder    // pop request sent -> ack answered
	e2e    recorder    // push request built -> pop answered, from the payload's "t"
}

// newConsumer pops from queue in group ("" for queue mode) through the
// broker of client i; a named group starts at the beginning of every
// partition (subscriptionMode=all).
func (b *bench) newConsumer(queue, group string, i int) *consumer {
	return &consumer{
		b: b, base: b.baseFor(i), queue: queue, group: group,
		params: b.popParams(group, b.cfg.Batch, b.cfg.PollTimeout, b.cfg.AutoAck),
		// With autoAck nothing is acked: the count and the payloads'
		// times are all a delivery is read for.
		popped: popResponse{DataOnly: b.cfg.AutoAck},
	}
}

// popParams are the query of a long-poll pop; with autoAck the broker
// moves the cursor on delivery and the consumer sends no ack.
func (b *bench) popParams(group string, batch int, timeout time.Duration, autoAck bool) *client.PopQueueParams {
	wait := true
	ms := int(timeout.Milliseconds())
	p := &client.PopQueueParams{Batch: &batch, Wait: &wait, Timeout: &ms}
	if autoAck {
		p.AutoAck = &autoAck
	}
	if group != "" {
		mode := client.PopQueueParamsSubscriptionModeAll
		p.ConsumerGroup = &group
		p.SubscriptionMode = &mode
	}
	return p
}

// run pops and acks until the deadline, ctx, -max-messages, or an empty
// long-poll while stopOnEmpty says so.
func (c *consumer) run(ctx context.Context, deadline time.Time, t *tally, stopOnEmpty func() bool) {
	for ctx.Err() == nil && time.Now().Before(deadline) && t.msgs.Load() < c.b.cfg.MaxMessages {
		start := time.Now()
		p, err := c.b.popInto(ctx, c.base, c.queue, c.params, &c.resp, &c.popped)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.fail(err)
			sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
			continue
		}
		if p == nil || len(p.Messages) == 0 {
			if stopOnEmpty() {
				return
			}
			continue
		}
		popped := time.Now()
		for _, m := range p.Messages {
			if ns, ok := payloadTime(m.Data); ok {
				c.e2e.add(popped.Sub(time.Unix(0, ns)))
			}
		}
		acked := int64(len(p.Messages))
		if !c.b.cfg.AutoAck {
			acked, err = c.b.ack(ctx, c.base, c.group, p, &c.resp)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.fail(err)
			continue
		}
		end := time.Now()
		c.cycle.add(end.Sub(start))
		t.count(acked, end)
	}
}

// popResponse is the part of a pop answer the bench reads. The generated
// client builds the request, but the answer is decoded into this rather
// than client.PopResponse: the generated type's dozen strings per message
// cost the bench CPU that the broker under test needs (docs/benchmarks.md).
type popResponse struct {
	LeaseID  string          `json:"leaseId"`
	Messages []poppedMessage `json:"messages"`
	// DataOnly: decodePop leaves the messages' ids and leases empty.
	DataOnly bool `json:"-"`
}

type poppedMessage struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"` // decodePop: a slice of the answer's buffer
}

// pop long-polls a broker once; a nil answer is a 204.
func (b *bench) pop(ctx context.Context, base, queue string, params *client.PopQueueParams, resp *bytes.Buffer) (*popResponse, error) {
	return b.popInto(ctx, base, queue, params, resp, &popResponse{})
}

// popInto is pop decoding into p (popResponse.DataOnly, reused Messages);
// it returns p, or nil for a 204.
func (b *bench) popInto(ctx context.Context, base, queue string, params *client.PopQueueParams, resp *bytes.Buffer, p *popResponse) (*popResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(*params.Timeout)*time.Millisecond+requestTimeout)
	defer cancel()
	res, err := b.apiAt(base).PopQueue(ctx, queue, params)
	status, err := readAnswer(res, err, resp)
	if err != nil {
		return nil, fmt.Errorf("pop: %w", err)
	}
	switch status {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		if err := decodePop(resp.Bytes(), p); err != nil {
			return nil, fmt.Errorf("pop: decode answer: %w", err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("pop: status %d: %s", status, excerpt(resp.Bytes()))
	}
}

// ack completes every message of a pop in one batch ack (the generated
// request type), through the broker that delivered them, and returns how
// many succeeded, counted in the answer.
func (b *bench) ack(ctx context.Context, base, group string, p *popResponse, resp *bytes.Buffer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	completed := client.AckStatus("completed")
	body := client.AckBatchRequest{Acknowledgments: make([]client.AckBatchItem, len(p.Messages))}
	if group != "" {
		body.ConsumerGroup = &group
	}
	for i := range p.Messages {
		m := &p.Messages[i]
		var lease *string
		switch {
		case m.LeaseID != "":
			lease = &m.LeaseID
		case p.LeaseID != "":
			lease = &p.LeaseID
		}
		body.Acknowledgments[i] = client.AckBatchItem{TransactionId: m.TransactionID, PartitionId: m.PartitionID, LeaseId: lease, Status: &completed}
	}
	res, err := b.apiAt(base).AckBatch(ctx, nil, body)
	status, err := readAnswer(res, err, resp)
	if err != nil {
		return 0, fmt.Errorf("ack: %w", err)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("ack: status %d: %s", status, excerpt(resp.Bytes()))
	}
	ok := int64(bytes.Count(resp.Bytes(), []byte(`"success":true`)))
	if ok < int64(len(p.Messages)) {
		return ok, fmt.Errorf("ack: %d of %d failed: %s", int64(len(p.Messages))-ok, len(p.Messages), excerpt(resp.Bytes()))
	}
	return ok, nil
}

// payloadTime reads the "t" member (UnixNano) of a bench payload. jsonb
// may reorder members and add spaces, so it scans rather than assumes.
func payloadTime(data []byte) (int64, bool) {
	i := bytes.Index(data, []byte(`"t"`))
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(data[i+3:], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// consumeFor runs consumers per group until they stop and returns them.
func (b *bench) consumeFor(ctx context.Context, queue string, groups []string, deadline time.Time, t *tally, stopOnEmpty func() bool) []*consumer {
	var cs []*consumer
	for _, g := range groups {
		for i := range b.cfg.Consumers {
			cs = append(cs, b.newConsumer(queue, g, i))
		}
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { c.run(ctx, deadline, t, stopOnEmpty) })
	}
	wg.Wait()
	return cs
}

func cycleRecorders(cs []*consumer) *recorder {
	rs := make([]*recorder, len(cs))
	for i, c := range cs {
		rs[i] = &c.cycle
	}
	return mergeRecorders(rs...)
}

func e2eRecorders(cs []*consumer) *recorder {
	rs := make([]*recorder, len(cs))
	for i, c := range cs {
		rs[i] = &c.e2e
	}
	return mergeRecorders(rs...)
}

// consumeScenario drains a backlog in queue mode: the push run's queue in
// `all`, else one prefilled for -duration (not measured). Each consumer
// stops at its first empty long-poll; the rate counts up to the last ack.
// Latency is one pop + batch-ack cycle.
func (b *bench) consumeScenario(ctx context.Context, pushed string) (result, error) {
	queue, from := pushed, "the push run's backlog"
	if queue == "" {
		queue = b.queue("consume")
		fmt.Fprintf(b.log, "queen-bench: consume: prefilling %s for %s\n", queue, b.cfg.Duration)
		var pt tally
		b.pushFor(ctx, queue, time.Now().Add(b.cfg.Duration), &pt, nil)
		if pt.msgs.Load() == 0 {
			return result{}, fmt.Errorf("prefill pushed nothing: %s", pt.errorNote())
		}
		from = fmt.Sprintf("%d prefilled", pt.msgs.Load())
	}
	m := b.startMeasure(ctx)
	var t tally
	start := time.Now()
	cs := b.consumeFor(ctx, queue, []string{""}, start.Add(b.cfg.Duration), &t, func() bool { return true })
	res := result{
		Scenario: "consume",
		Command:  b.command("consume", "duration", "consumers", "batch", "poll-timeout", "auto-ack"),
		Messages: t.msgs.Load(),
		Elapsed:  t.lastAt(start).Sub(start),
		Latency:  cycleRecorders(cs).summary(),
	}
	res.note("from " + from)
	res.note(t.errorNote())
	m.finish(ctx, &res)
	return res, nil
}
