package broker

import (
	"context"
	"time"

	"github.com/queenforgo/queen/sql/pgerr"
)

// popPlan is a PopRequest with the defaults applied and its wait keys.
type popPlan struct {
	PopRequest
	timeout       time.Duration
	subscribeNew  bool       // start new cursors of a named group at now
	subscribeFrom *time.Time // start new cursors of a named group here
	waitKeys      []waitKey
}

// Pop claims messages for a consumer: from one partition (Partition set),
// from any eligible partitions of a queue, or across the queues of a
// namespace and/or task. With Wait it parks until a QueuesReady
// announcement or the shared re-poll (repoll.go) makes it look again, up to
// the timeout. A nil result means nothing to deliver: unknown queue or
// partition, lease held by another consumer, window buffer active, nothing
// pending, timeout, pop maintenance, or this broker draining.
func (b *Broker) Pop(ctx context.Context, req PopRequest) (res *PopResult, err error) {
	defer func() { err = pgerr.Translate(err) }()
	if req.Tenant, err = tenantOf(req.Tenant); err != nil {
		return nil, err
	}
	if req.Queue == "" && req.Namespace == "" && req.Task == "" {
		return nil, invalid("namespace or task is required")
	}
	pr := b.plan(req)
	defer func() { b.recordPop(pr.PopRequest, res, err) }()
	if b.maint.pop.Load() {
		return nil, nil // pop maintenance (MNT-2): empty at once, the log untouched
	}
	if !pr.Wait {
		return b.popOnce(ctx, pr)
	}
	defer b.parked(key(pr.Tenant, pr.Queue))()
	deadline := time.NewTimer(pr.timeout)
	defer deadline.Stop()
	look := pr.lookKey()
	for first := true; ; first = false {
		// Register before looking, so a wake-up between the look and the
		// park still wakes this request. w hears the announcements of
		// commits (notifier.go), lw the shared re-poll (repoll.go): a
		// parked pop never looks again on its own.
		w := b.wait.Register(pr.waitKeys...)
		lw := b.looks.Register(look)
		if first && b.knownEmpty(look) {
			b.repolled.skipped.Add(1)
		} else {
			gen, at := b.genOf(look), time.Now()
			res, err := b.popOnce(ctx, pr)
			if err != nil || res != nil {
				w.Cancel()
				lw.Cancel()
				return res, err
			}
			b.sawEmpty(look, gen, at)
		}
		woken := false
		select {
		case <-w.C:
			woken = true
		case <-lw.C:
			woken = true
		case <-deadline.C:
		case <-ctx.Done():
		case <-b.drainCh:
		}
		w.Cancel()
		lw.Cancel()
		if !woken {
			return nil, nil
		}
	}
}

// plan applies the defaults of a pop.
func (b *Broker) plan(req PopRequest) popPlan {
	pr := popPlan{PopRequest: req, timeout: b.cfg.DefaultTimeout}
	if pr.Batch <= 0 {
		pr.Batch = b.cfg.DefaultBatch
	}
	if pr.MaxPartitions <= 0 {
		pr.MaxPartitions = 1
	}
	if req.Timeout != nil {
		pr.timeout = *req.Timeout
	}
	if pr.Group == "" {
		pr.Group = QueueModeGroup
	}
	mode := req.SubscriptionMode
	if mode == "" {
		mode = b.cfg.DefaultSubscriptionMode
	}
	switch {
	case req.SubscriptionFrom != nil:
		pr.subscribeFrom = req.SubscriptionFrom
	case mode == "new" || mode == "new-only":
		pr.subscribeNew = true
	}
	switch {
	case req.Queue != "":
		pr.waitKeys = []waitKey{queueWait(key(req.Tenant, req.Queue))}
	default:
		if req.Namespace != "" {
			pr.waitKeys = append(pr.waitKeys, waitKey{req.Tenant, 'n', req.Namespace})
		}
		if req.Task != "" {
			pr.waitKeys = append(pr.waitKeys, waitKey{req.Tenant, 't', req.Task})
		}
	}
	return pr
}
