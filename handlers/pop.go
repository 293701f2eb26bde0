package handlers

import (
	"context"
	"time"

	"github.com/queenforgo/queen/gen/api"
)

// popParams are the query parameters shared by the three pop routes.
type popParams struct {
	batch         *int
	wait          *bool
	timeout       *int
	group         *string
	autoAck       *bool
	subMode       string
	subFrom       *string
	maxPartitions *int
}

// PopPartition pops from one named partition.
func (s *Server) PopPartition(ctx context.Context, req api.PopPartitionRequestObject) (api.PopPartitionResponseObject, error) {
	p := req.Params
	pr, err := s.newPopRequest(popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, nil})
	if err != nil {
		return nil, err
	}
	pr.queueName = req.Queue
	pr.partition = req.Partition
	pr.waitKeys = []string{queueKey(req.Queue)}
	resp, err := s.pop(ctx, pr)
	if err != nil || resp == nil {
		return api.PopPartition204Response{}, err
	}
	return api.PopPartition200JSONResponse{PopOKJSONResponse: api.PopOKJSONResponse(*resp)}, nil
}

// PopQueue pops from any eligible partitions of a queue.
func (s *Server) PopQueue(ctx context.Context, req api.PopQueueRequestObject) (api.PopQueueResponseObject, error) {
	p := req.Params
	pr, err := s.newPopRequest(popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, p.Partitions})
	if err != nil {
		return nil, err
	}
	pr.queueName = req.Queue
	pr.waitKeys = []string{queueKey(req.Queue)}
	resp, err := s.pop(ctx, pr)
	if err != nil || resp == nil {
		return api.PopQueue204Response{}, err
	}
	return api.PopQueue200JSONResponse{PopOKJSONResponse: api.PopOKJSONResponse(*resp)}, nil
}

// PopNamespaceTask pops across the queues of a namespace and/or task.
func (s *Server) PopNamespaceTask(ctx context.Context, req api.PopNamespaceTaskRequestObject) (api.PopNamespaceTaskResponseObject, error) {
	p := req.Params
	ns, task := deref(p.Namespace, ""), deref(p.Task, "")
	if ns == "" && task == "" {
		return nil, badRequest("namespace or task is required")
	}
	pr, err := s.newPopRequest(popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, p.Partitions})
	if err != nil {
		return nil, err
	}
	pr.namespace, pr.task = ns, task
	if ns != "" {
		pr.waitKeys = append(pr.waitKeys, namespaceKey(ns))
	}
	if task != "" {
		pr.waitKeys = append(pr.waitKeys, taskKey(task))
	}
	resp, err := s.pop(ctx, pr)
	if err != nil || resp == nil {
		return api.PopNamespaceTask204Response{}, err
	}
	return api.PopNamespaceTask200JSONResponse{PopOKJSONResponse: api.PopOKJSONResponse(*resp)}, nil
}

func (s *Server) newPopRequest(p popParams) (popRequest, error) {
	pr := popRequest{
		batch:         deref(p.batch, s.cfg.DefaultBatch),
		wait:          deref(p.wait, false),
		timeout:       s.cfg.DefaultTimeout,
		group:         deref(p.group, ""),
		autoAck:       deref(p.autoAck, false),
		maxPartitions: deref(p.maxPartitions, 1),
	}
	if p.timeout != nil {
		pr.timeout = time.Duration(*p.timeout) * time.Millisecond
	}
	if pr.group == "" {
		pr.group = queueModeGroup
	}
	mode := p.subMode
	if mode == "" {
		mode = s.cfg.DefaultSubscriptionMode
	}
	from := deref(p.subFrom, "")
	switch {
	case from == "now":
		pr.subscribeNew = true
	case from != "":
		t, err := parseTimestamp(from)
		if err != nil {
			return pr, badRequest(`invalid query parameter "subscriptionFrom": want "now" or an RFC 3339 timestamp`)
		}
		pr.subscribeFrom = &t
	case mode == "new" || mode == "new-only":
		pr.subscribeNew = true
	}
	return pr, nil
}

// pop runs one pop, parking it when asked to wait. A nil response means
// nothing to deliver (204).
func (s *Server) pop(ctx context.Context, pr popRequest) (resp *api.PopResponse, err error) {
	defer func() { s.recordPop(pr, resp, err) }() // metrics_record.go
	if s.maint.pop.Load() {
		return nil, nil // pop maintenance (MNT-2): empty at once, the log untouched
	}
	if !pr.wait {
		return s.popOnce(ctx, pr)
	}
	defer s.parked(pr.queueName)() // metrics_record.go
	deadline := time.Now().Add(pr.timeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		// Register before looking, so a commit between the look and the
		// park still wakes this request.
		w := s.waiters.Register(pr.waitKeys...)
		resp, err := s.popOnce(ctx, pr)
		if err != nil || resp != nil {
			w.Cancel()
			return resp, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			w.Cancel()
			return nil, nil
		}
		timer.Reset(min(remaining, s.cfg.RepollInterval))
		select {
		case <-w.C:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			w.Cancel()
			return nil, nil
		case <-s.drainCh:
			w.Cancel()
			return nil, nil
		}
		w.Cancel()
	}
}
