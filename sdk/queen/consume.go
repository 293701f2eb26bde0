package queen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/queenforgo/queen/gen/client"
)

// ConsumerConfig says what Consume reads and how.
type ConsumerConfig struct {
	Queue     string
	Partition string // "" pops from any partition of the queue
	// Group is the consumer group; "" is queue mode (one cursor shared by
	// every consumer without a group).
	Group string
	// SubscriptionMode is where a new named group starts: "all" (the
	// beginning) or "new"; "" leaves it to the broker.
	SubscriptionMode string
	Batch            int           // messages per pop; default ConsumerBatchDefault
	Wait             time.Duration // long-poll time of one pop; default ConsumerWaitDefault
	// RenewEvery is how often the lease is extended while the handler runs;
	// default ConsumerRenewEveryDefault, negative turns renewal off.
	RenewEvery time.Duration
	// ExtendBy is what one renewal asks for: the lease then expires no
	// earlier than this long after the renewal. Whole seconds, at least 1 s;
	// default ConsumerExtendByDefault. Keep it well above RenewEvery.
	ExtendBy time.Duration
	// Logger receives what the loop cannot return: failed pops (retried
	// with a backoff), failed acks, lost leases. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of ConsumerConfig.
const (
	ConsumerBatchDefault      = 10
	ConsumerWaitDefault       = 10 * time.Second
	ConsumerRenewEveryDefault = 20 * time.Second
	ConsumerExtendByDefault   = 60 * time.Second
)

// backoff bounds of a failing pop.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// ackTimeout bounds the acks sent after the consumer's context ended: the
// work is done, so acking it saves a redelivery.
const ackTimeout = 10 * time.Second

// ErrLeaseLost is the cause of a handler context cancelled because the
// broker refused to extend the lease (it expired, or the queue was deleted
// or cleared): the messages may already be with another consumer.
var ErrLeaseLost = errors.New("lease lost")

// Handler processes one message. Returning nil acks it as completed; an
// error acks it as failed (redelivered until the queue's retryLimit, then
// dead-lettered) and releases the rest of its batch with "retry" (no retry
// counted) for a redelivery behind it, so the partition's order is kept. The context ends when Consume's context
// does or when the lease is lost (context.Cause is then ErrLeaseLost).
type Handler func(ctx context.Context, m client.PoppedMessage) error

// Consume pops from cfg.Queue with long-polls, hands each message to h in
// partition order and acks it, renewing the lease while h runs, until ctx
// ends; then it returns nil. Pop failures are logged and retried with a
// backoff; a bad configuration (queue name, status 400) returns an error.
//
// When ctx ends during a batch, the messages already handled are acked as
// completed and the others, a message whose handler then failed included,
// are released with "retry" (no retry is counted: the consumer stopped, the
// message did not fail), so the next consumer gets them at once.
func (c *Client) Consume(ctx context.Context, cfg ConsumerConfig, h Handler) error {
	cfg, params, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	delay := time.Duration(0)
	for {
		if err := sleepCtx(ctx, delay); err != nil {
			return nil
		}
		batch, err := c.pop(ctx, cfg, params)
		if ctx.Err() != nil {
			return nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status == 400 {
			return err
		}
		if err != nil {
			delay = min(max(2*delay, backoffMin), backoffMax)
			cfg.Logger.Warn("queen consumer pop failed", "queue", cfg.Queue, "retry_in", delay, "error", err)
			continue
		}
		delay = 0
		if batch != nil && len(batch.Messages) > 0 {
			c.handleBatch(ctx, cfg, batch, h)
		}
	}
}

func (cfg ConsumerConfig) withDefaults() (ConsumerConfig, *client.PopQueueParams, error) {
	if cfg.Queue == "" {
		return cfg, nil, errors.New("consume: ConsumerConfig.Queue is empty")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = ConsumerBatchDefault
	}
	if cfg.Wait <= 0 {
		cfg.Wait = ConsumerWaitDefault
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = ConsumerRenewEveryDefault
	}
	if cfg.ExtendBy == 0 {
		cfg.ExtendBy = ConsumerExtendByDefault
	}
	if cfg.ExtendBy < time.Second {
		return cfg, nil, fmt.Errorf("consume: ExtendBy %s is under one second", cfg.ExtendBy)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wait := true
	timeout := int(cfg.Wait.Milliseconds())
	p := &client.PopQueueParams{Batch: &cfg.Batch, Wait: &wait, Timeout: &timeout}
	if cfg.Group != "" {
		p.ConsumerGroup = &cfg.Group
	}
	if cfg.SubscriptionMode != "" {
		mode := client.PopQueueParamsSubscriptionMode(cfg.SubscriptionMode)
		p.SubscriptionMode = &mode
	}
	return cfg, p, nil
}

// pop long-polls once; nil means nothing arrived within cfg.Wait (204).
func (c *Client) pop(ctx context.Context, cfg ConsumerConfig, p *client.PopQueueParams) (*client.PopResponse, error) {
	if cfg.Partition == "" {
		resp, err := c.api.PopQueueWithResponse(ctx, cfg.Queue, p)
		if err != nil {
			return nil, err
		}
		return popAnswer(resp.StatusCode(), resp.JSON200, resp.Body)
	}
	pp := &client.PopPartitionParams{
		Batch: p.Batch, Wait: p.Wait, Timeout: p.Timeout, ConsumerGroup: p.ConsumerGroup,
	}
	if p.SubscriptionMode != nil {
		mode := client.PopPartitionParamsSubscriptionMode(*p.SubscriptionMode)
		pp.SubscriptionMode = &mode
	}
	resp, err := c.api.PopPartitionWithResponse(ctx, cfg.Queue, cfg.Partition, pp)
	if err != nil {
		return nil, err
	}
	return popAnswer(resp.StatusCode(), resp.JSON200, resp.Body)
}

func popAnswer(status int, ok *client.PopResponse, body []byte) (*client.PopResponse, error) {
	switch {
	case status == 204:
		return nil, nil
	case ok != nil:
		return ok, nil
	default:
		return nil, apiError("popMessages", status, body)
	}
}

// handleBatch runs h on each message in order while a renewer keeps the
// lease, then acks what was handled in one batch ack.
func (c *Client) handleBatch(ctx context.Context, cfg ConsumerConfig, batch *client.PopResponse, h Handler) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lease := batch.LeaseId
	if lease == "" && len(batch.Messages) > 0 {
		lease = batch.Messages[0].LeaseId
	}
	stopRenew := func() {}
	if lease != "" && cfg.RenewEvery > 0 {
		stopRenew = c.renew(hctx, cfg, lease, func() { cancel(ErrLeaseLost) })
	}

	acks := make([]client.AckBatchItem, 0, len(batch.Messages))
	handled := 0
	for _, m := range batch.Messages {
		if hctx.Err() != nil {
			break
		}
		err := h(hctx, m)
		handled++
		if err == nil {
			acks = append(acks, ackItem(m, "completed", ""))
			continue
		}
		if ctx.Err() != nil {
			acks = append(acks, ackItem(m, "retry", ""))
		} else {
			acks = append(acks, ackItem(m, "failed", err.Error()))
		}
		break
	}
	// Release what was not handled (after a failure, or when stopping) for
	// a redelivery now: a lease is only released early once its whole
	// batch is acked, and a failure that dead-letters does not release it.
	for _, m := range batch.Messages[handled:] {
		acks = append(acks, ackItem(m, "retry", ""))
	}
	stopRenew()
	if errors.Is(context.Cause(hctx), ErrLeaseLost) {
		cfg.Logger.Warn("queen consumer lease lost; not acking", "queue", cfg.Queue, "lease_id", lease, "handled", len(acks))
		return
	}
	c.ack(ctx, cfg, acks)
}

func ackItem(m client.PoppedMessage, status, reason string) client.AckBatchItem {
	st := client.AckStatus(status)
	it := client.AckBatchItem{TransactionId: m.TransactionId, PartitionId: m.PartitionId, Status: &st}
	if m.LeaseId != "" {
		lease := m.LeaseId
		it.LeaseId = &lease
	}
	if reason != "" {
		it.Error = &reason
	}
	return it
}

// ack sends one batch ack. It runs on a context detached from the
// consumer's, so a stop does not throw the handled work away.
func (c *Client) ack(ctx context.Context, cfg ConsumerConfig, items []client.AckBatchItem) {
	if len(items) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	body := client.AckBatchRequest{Acknowledgments: items}
	if cfg.Group != "" {
		body.ConsumerGroup = &cfg.Group
	}
	resp, err := c.api.AckBatchWithResponse(actx, nil, body)
	if err == nil && resp.JSON200 == nil {
		err = apiError("ackBatch", resp.StatusCode(), resp.Body)
	}
	if err != nil {
		cfg.Logger.Warn("queen consumer ack failed; the messages will be redelivered", "queue", cfg.Queue, "messages", len(items), "error", err)
		return
	}
	for _, r := range *resp.JSON200 {
		if !r.Success {
			reason := ""
			if r.Error != nil {
				reason = *r.Error
			}
			cfg.Logger.Warn("queen consumer ack refused", "queue", cfg.Queue, "transaction_id", r.TransactionId, "error", reason)
		}
	}
}

// renew extends the lease every cfg.RenewEvery until the returned stop is
// called; lost is called once if the broker refuses an extension. A failed
// request (network, 5xx) is only logged: the next tick tries again.
func (c *Client) renew(ctx context.Context, cfg ConsumerConfig, lease string, lost func()) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	seconds := int(cfg.ExtendBy / time.Second)
	go func() {
		defer close(stopped)
		t := time.NewTicker(cfg.RenewEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			resp, err := c.api.ExtendLeaseWithResponse(ctx, lease, nil, client.LeaseExtendRequest{Seconds: &seconds})
			if err == nil && resp.JSON200 == nil {
				err = apiError("extendLease", resp.StatusCode(), resp.Body)
			}
			switch {
			case err != nil:
				if ctx.Err() == nil {
					cfg.Logger.Warn("queen consumer lease extension failed", "queue", cfg.Queue, "lease_id", lease, "error", err)
				}
			case !resp.JSON200.Success:
				lost()
				return
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// sleepCtx waits d, or returns ctx's error when it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
