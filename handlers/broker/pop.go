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
// announcement (or the re-poll interval) makes it look again, up to the
// timeout. A nil result means nothing to deliver: unknown queue or
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
	deadline := time.Now().Add(pr.timeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		// Register before looking, so an announcement between the look and
		// the park still wakes this request.
		w := b.wait.Register(pr.waitKeys...)
		res, err := b.popOnce(ctx, pr)
		if err != nil || res != nil {
			w.Cancel()
			return res, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			w.Cancel()
			return nil, nil
		}
		timer.Reset(min(remaining, b.cfg.RepollInterval))
		select {
		case <-w.C:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			w.Cancel()
			return nil, nil
		case <-b.drainCh:
			w.Cancel()
			return nil, nil
		}
		w.Cancel()
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
