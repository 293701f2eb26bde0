package handlers

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// PushMessages stores a push (broker.Push: group commit, or the spool). It
// serves the bodies the fast decoder leaves to the generated one
// (push_fast.go): refusals, and the shapes it does not handle.
func (s *Server) PushMessages(ctx context.Context, req api.PushMessagesRequestObject) (api.PushMessagesResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.PushMessages400JSONResponse]("Empty request body"), nil
	}
	var items []broker.PushItem
	if req.Body.Items != nil {
		items = make([]broker.PushItem, len(req.Body.Items))
		for i, it := range req.Body.Items {
			items[i] = broker.PushItem{
				Queue: it.Queue, Partition: deref(it.Partition, ""),
				TransactionID: deref(it.TransactionId, ""), TraceID: deref(it.TraceId, ""),
			}
			if it.Payload != nil {
				items[i].Payload = *it.Payload
			}
		}
	}
	return s.push(ctx, items)
}

// push checks decoded items (nil: the body had no items), applies their
// defaults and stores them.
func (s *Server) push(ctx context.Context, items []broker.PushItem) (api.PushMessagesResponseObject, error) {
	if err := s.validator.checkPushItems(items); err != nil {
		return badRequest[api.PushMessages400JSONResponse](err.Error()), nil
	}
	sub := producerSub(ctx)
	for i := range items {
		pushDefaults(&items[i], sub)
	}
	out, err := s.b.Push(ctx, tenant(ctx), items)
	switch msg, invalid := invalidMessage(err); {
	case invalid:
		return badRequest[api.PushMessages400JSONResponse](msg), nil
	case errors.Is(err, broker.ErrSpoolUnavailable):
		// Not logged per request: the spool logs why once per run of failures.
		return unavailable[api.PushMessages503JSONResponse](broker.SpoolReason(err)), nil
	case err != nil:
		return nil, err
	}
	return pushAnswer{items: items, out: out}, nil
}

// pushDefaults applies the defaults of a push item whose absent fields are
// empty: partition `Default`, a generated transactionId, JSON null for the
// payload; sub is the token's subject.
func pushDefaults(it *broker.PushItem, sub string) {
	if it.Partition == "" {
		it.Partition = "Default"
	}
	if it.TransactionID == "" {
		it.TransactionID = uuid.NewString()
	}
	if len(it.Payload) == 0 {
		it.Payload = []byte("null")
	}
	it.ProducerSub = sub
}

// pushItemFrom applies the defaults of a push item: partition `Default`, a
// generated transactionId when none is given, JSON null for a missing
// payload; sub is the token's subject.
func pushItemFrom(queue string, partition, txID, traceID *string, payload *api.AnyJSON, sub string) broker.PushItem {
	it := broker.PushItem{
		Queue:         queue,
		Partition:     deref(partition, ""),
		TransactionID: deref(txID, ""),
		TraceID:       deref(traceID, ""),
	}
	if payload != nil {
		it.Payload = *payload
	}
	pushDefaults(&it, sub)
	return it
}

// pushResult renders one push result.
func pushResult(i int, it broker.PushItem, o broker.PushResult) api.PushResult {
	r := api.PushResult{
		Index:              i,
		Status:             api.PushResultStatus(o.Status),
		TransactionIDSnake: ptr(it.TransactionID),
		TransactionId:      ptr(it.TransactionID),
		QueueName:          it.Queue,
		Queue:              ptr(it.Queue),
		Partition:          ptr(it.Partition),
	}
	if o.Status != broker.Buffered {
		// Ids are given when the spool's replay stores the message.
		mid := o.MessageID.String()
		r.MessageIDSnake, r.MessageId, r.PartitionId = &mid, &mid, ptr(o.PartitionID.String())
	}
	if it.TraceID != "" {
		r.TraceId = ptr(it.TraceID)
	}
	return r
}

// producerSub is the authenticated subject of the request, never a value
// from the body. Authentication fills it in; without it producers are anonymous.
func producerSub(ctx context.Context) string {
	if sub, ok := ctx.Value(subjectKey{}).(string); ok {
		return sub
	}
	return ""
}

// subjectKey is the context key under which authentication stores the
// token's `sub` claim.
type subjectKey struct{}

// WithSubject returns a context carrying the authenticated subject.
func WithSubject(ctx context.Context, sub string) context.Context {
	return context.WithValue(ctx, subjectKey{}, sub)
}
