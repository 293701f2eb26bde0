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
	// started is lookStart of a long-poll's look in progress (zero
	// otherwise): an autoAck look that takes all it saw records the key
	// empty with it (claimAutoAck).
	started emptyState
	// hint is the partition the push that woke this pop filled for it
	// (pushed_hint.go), nil otherwise: claimed before any scan.
	hint *pushedPart
	// lookAt is when the look in progress started (popOnce): kept rows of
	// another group's read serve it only on conditions (read_share.go).
	lookAt time.Time
}

// Pop claims messages for a consumer: from one partition (Partition set),
// from any eligible partitions of a queue, or across the queues of a
// namespace and/or task. With Wait it parks until a QueuesReady
// announcement or the shared re-poll (repoll.go) makes it look again, up to
// the timeout. A nil result means nothing to deliver: unknown queue or
// partition, lease held by another consumer, window buffer active, nothing
// pending, timeout, pop maintenance, or this broker draining. It is
// PopStart, then the parked pop's Wait in the caller's goroutine.
func (b *Broker) Pop(ctx context.Context, req PopRequest) (*PopResult, error) {
	res, p, err := b.PopStart(ctx, req)
	if p == nil {
		return res, err
	}
	return p.Wait(ctx)
}

// PopStart is Pop up to the park: it answers at once (a result, nil for
// nothing, or an error), or returns the ParkedPop of a pop with Wait whose
// first look found nothing. The caller then waits on it in its goroutine
// (Wait), or holds it without one (Watch, Resume, Cancel).
func (b *Broker) PopStart(ctx context.Context, req PopRequest) (res *PopResult, p *ParkedPop, err error) {
	defer func() { err = pgerr.Translate(err) }()
	if req.Tenant, err = tenantOf(req.Tenant); err != nil {
		return nil, nil, err
	}
	if req.Queue == "" && req.Namespace == "" && req.Task == "" {
		return nil, nil, invalid("namespace or task is required")
	}
	pr := b.plan(req)
	if b.maint.pop.Load() {
		b.recordPop(pr.PopRequest, nil, nil)
		return nil, nil, nil // pop maintenance (MNT-2): empty at once, the log untouched
	}
	if !pr.Wait {
		res, err = b.popOnce(ctx, pr)
		b.recordPop(pr.PopRequest, res, err)
		return res, nil, err
	}
	p = b.park(pr)
	if b.knownEmpty(p.look) {
		b.repolled.skipped.Add(1)
	} else {
		start := b.lookStart(p.look)
		pr.started = start
		res, err = b.popOnce(ctx, pr)
		if err != nil || res != nil {
			p.finish(res, err)
			return res, nil, err
		}
		b.sawEmpty(p.look, start)
	}
	p.looking(false)
	if b.draining.Load() {
		p.finish(nil, nil)
		return nil, nil, nil
	}
	return nil, p, nil
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
