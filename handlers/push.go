package handlers

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
)

// PushMessages stores a push in one transaction.
func (s *Server) PushMessages(ctx context.Context, req api.PushMessagesRequestObject) (api.PushMessagesResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	if err := s.validator.checkPushItems(req.Body.Items); err != nil {
		return nil, err
	}
	items := make([]pushItem, len(req.Body.Items))
	for i, it := range req.Body.Items {
		items[i] = pushItemFrom(it.Queue, it.Partition, it.TransactionId, it.TraceId, it.Payload)
		items[i].ProducerSub = producerSub(ctx)
	}
	if len(items) == 0 {
		return api.PushMessages201JSONResponse{}, nil
	}
	outcomes, err := s.pushOrSpool(ctx, items) // push_spool.go: database, or disk spool
	if err != nil {
		return nil, err
	}
	resp := make(api.PushMessages201JSONResponse, len(items))
	for i, o := range outcomes {
		resp[i] = pushResult(i, items[i], o)
	}
	return resp, nil
}

// push stores items, committed together with concurrent pushes (see
// coalescer), and wakes long-polls on commit.
func (s *Server) push(ctx context.Context, items []pushItem) ([]pushOutcome, error) {
	out, err := s.pusher.submit(ctx, items)
	if err == nil {
		s.recordPush(items, out) // metrics_record.go
	}
	return out, err
}

// pushDirect stores items in their own transaction. A queue deleted by
// another broker while cached is retried once fresh.
func (s *Server) pushDirect(ctx context.Context, items []pushItem) ([]pushOutcome, error) {
	for attempt := 0; ; attempt++ {
		out, err := s.pushOnce(ctx, items)
		if err != nil && attempt == 0 && isForeignKeyViolation(err) {
			s.queues.invalidateAll()
			continue
		}
		return out, err
	}
}

func (s *Server) pushOnce(ctx context.Context, items []pushItem) ([]pushOutcome, error) {
	names := distinctQueues(items)
	queues, err := s.ensureQueues(ctx, names)
	if err != nil {
		return nil, err
	}
	var out []pushOutcome
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, err = s.storeMessages(ctx, tx, queues, items)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	s.notifyQueues(ctx, names)
	return out, nil
}

func distinctQueues(items []pushItem) []string {
	seen := make(map[string]bool, 4)
	var names []string
	for _, it := range items {
		if !seen[it.Queue] {
			seen[it.Queue] = true
			names = append(names, it.Queue)
		}
	}
	return names
}

// pushItemFrom applies the defaults of a push item: partition `Default`, a
// generated transactionId when none is given, JSON null for a missing payload.
func pushItemFrom(queue string, partition, txID, traceID *string, payload *api.AnyJSON) pushItem {
	it := pushItem{
		Queue:         queue,
		Partition:     deref(partition, ""),
		TransactionID: deref(txID, ""),
		TraceID:       deref(traceID, ""),
	}
	if it.Partition == "" {
		it.Partition = "Default"
	}
	if it.TransactionID == "" {
		it.TransactionID = uuid.NewString()
	}
	if payload != nil && len(*payload) > 0 {
		it.Payload = *payload
	} else {
		it.Payload = []byte("null")
	}
	return it
}

func pushResult(i int, it pushItem, o pushOutcome) api.PushResult {
	r := api.PushResult{
		Index:              i,
		Status:             api.PushResultStatus(o.Status),
		TransactionIDSnake: ptr(it.TransactionID),
		TransactionId:      ptr(it.TransactionID),
		MessageIDSnake:     ptr(o.MessageID.String()),
		MessageId:          ptr(o.MessageID.String()),
		PartitionId:        ptr(o.PartitionID.String()),
		QueueName:          it.Queue,
		Queue:              ptr(it.Queue),
		Partition:          ptr(it.Partition),
	}
	if it.TraceID != "" {
		r.TraceId = ptr(it.TraceID)
	}
	if o.Status == "buffered" {
		// Ids are given when the spool's replay stores the message.
		r.MessageIDSnake, r.MessageId, r.PartitionId = nil, nil, nil
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
