package handlers

import (
	"context"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
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
	pr, err := popRequest(ctx, popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, nil})
	if err != nil {
		return badRequest[api.PopPartition400JSONResponse](err.Error()), nil
	}
	pr.Queue, pr.Partition = req.Queue, req.Partition
	res, held, err := s.pop(ctx, pr, writePopPartition)
	if held {
		return heldResponse{}, nil
	}
	return answerPopPartition(res, err)
}

func answerPopPartition(res *broker.PopResult, err error) (api.PopPartitionResponseObject, error) {
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.PopPartition400JSONResponse](msg), nil
	}
	if err != nil || res == nil {
		return api.PopPartition204Response{}, err
	}
	return popAnswer{res}, nil
}

// PopQueue pops from any eligible partitions of a queue.
func (s *Server) PopQueue(ctx context.Context, req api.PopQueueRequestObject) (api.PopQueueResponseObject, error) {
	p := req.Params
	pr, err := popRequest(ctx, popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, p.Partitions})
	if err != nil {
		return badRequest[api.PopQueue400JSONResponse](err.Error()), nil
	}
	pr.Queue = req.Queue
	res, held, err := s.pop(ctx, pr, writePopQueue)
	if held {
		return heldResponse{}, nil
	}
	return answerPopQueue(res, err)
}

func answerPopQueue(res *broker.PopResult, err error) (api.PopQueueResponseObject, error) {
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.PopQueue400JSONResponse](msg), nil
	}
	if err != nil || res == nil {
		return api.PopQueue204Response{}, err
	}
	return popAnswer{res}, nil
}

// PopNamespaceTask pops across the queues of a namespace and/or task.
func (s *Server) PopNamespaceTask(ctx context.Context, req api.PopNamespaceTaskRequestObject) (api.PopNamespaceTaskResponseObject, error) {
	p := req.Params
	pr, err := popRequest(ctx, popParams{p.Batch, p.Wait, p.Timeout, p.ConsumerGroup, p.AutoAck, string(deref(p.SubscriptionMode, "")), p.SubscriptionFrom, p.Partitions})
	if err != nil {
		return badRequest[api.PopNamespaceTask400JSONResponse](err.Error()), nil
	}
	pr.Namespace, pr.Task = deref(p.Namespace, ""), deref(p.Task, "")
	res, held, err := s.pop(ctx, pr, writePopNamespaceTask)
	if held {
		return heldResponse{}, nil
	}
	return answerPopNamespaceTask(res, err)
}

func answerPopNamespaceTask(res *broker.PopResult, err error) (api.PopNamespaceTaskResponseObject, error) {
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.PopNamespaceTask400JSONResponse](msg), nil
	}
	if err != nil || res == nil {
		return api.PopNamespaceTask204Response{}, err
	}
	return popAnswer{res}, nil
}

// popRequest decodes the shared pop parameters; the broker applies the
// defaults of what is left out.
func popRequest(ctx context.Context, p popParams) (broker.PopRequest, error) {
	pr := broker.PopRequest{
		Tenant:        tenant(ctx),
		Batch:         deref(p.batch, 0),
		Wait:          deref(p.wait, false),
		Group:         deref(p.group, ""),
		AutoAck:       deref(p.autoAck, false),
		MaxPartitions: deref(p.maxPartitions, 0),
	}
	pr.SubscriptionMode = p.subMode
	if p.subMode == "from_beginning" {
		// The JS and Python clients' spelling of "all"; explicit, so it
		// also wins over a DEFAULT_SUBSCRIPTION_MODE of "new".
		pr.SubscriptionMode = "all"
	}
	if p.timeout != nil {
		d := time.Duration(*p.timeout) * time.Millisecond
		pr.Timeout = &d
	}
	switch from := deref(p.subFrom, ""); from {
	case "":
	case "now":
		pr.SubscriptionMode = "new"
	default:
		t, err := parseTimestamp(from)
		if err != nil {
			return pr, invalidf(`invalid query parameter "subscriptionFrom": want "now" or an RFC 3339 timestamp`)
		}
		pr.SubscriptionFrom = &t
	}
	return pr, nil
}
