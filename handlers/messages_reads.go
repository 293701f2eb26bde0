package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// messageWindowDefault is how far back the message listing looks without a
// `from`, as in the reference broker.
const messageWindowDefault = time.Hour

// ListMessages pages through stored messages, newest first, with each
// message's status.
func (s *Server) ListMessages(ctx context.Context, req api.ListMessagesRequestObject) (api.ListMessagesResponseObject, error) {
	p := req.Params
	from, err := parseTimestampParam("from", p.From)
	if err != nil {
		return badRequest[api.ListMessages400JSONResponse](err.Error()), nil
	}
	to, err := parseTimestampParam("to", p.To)
	if err != nil {
		return badRequest[api.ListMessages400JSONResponse](err.Error()), nil
	}
	now := time.Now()
	if from == nil {
		from = ptr(now.Add(-messageWindowDefault))
	}
	if to == nil {
		to = &now
	}
	// `to` covers its whole minute, as in the reference broker: the
	// dashboard sends "now" rounded by the browser.
	before := to.UTC().Truncate(time.Minute).Add(time.Minute)
	ns := deref(p.Ns, "")
	if ns == "" {
		ns = deref(p.Namespace, "")
	}
	list := db.MessageListPageParams{
		TenantID:      tenantID(ctx),
		CreatedFrom:   pgtype.Timestamptz{Time: *from, Valid: true},
		CreatedBefore: pgtype.Timestamptz{Time: before, Valid: true},
		QueueName:     deref(p.Queue, ""), PartitionName: deref(p.Partition, ""),
		Namespace: ns, Task: deref(p.Task, ""),
		RowLimit: int32(deref(p.Limit, 200)), RowOffset: int32(deref(p.Offset, 0)),
	}
	if p.Status != nil {
		list.Status = string(*p.Status)
	}
	// One row more than the page tells whether a next page exists.
	limit := list.RowLimit
	list.RowLimit++
	rows, err := s.aq().MessageListPage(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	more := len(rows) > int(limit)
	if more {
		rows = rows[:limit]
	}
	mode, err := s.aq().MessageModeSummary(ctx, db.MessageModeSummaryParams{
		TenantID: list.TenantID, QueueName: list.QueueName, PartitionName: list.PartitionName, Namespace: list.Namespace, Task: list.Task,
	})
	if err != nil {
		return nil, fmt.Errorf("read consumer modes: %w", err)
	}
	resp := api.ListMessages200JSONResponse{
		Messages: make([]api.MessageSummary, 0, len(rows)),
		Mode:     messageMode(mode.HasQueueMode, int(mode.BusGroups)),
		Total:    len(rows),
	}
	resp.Pagination.Limit, resp.Pagination.Offset, resp.Pagination.HasMore = int(limit), int(list.RowOffset), more
	for _, r := range rows {
		m := api.MessageSummary{
			Id: r.ID.String(), TransactionId: r.TransactionID, PartitionId: r.PartitionID.String(),
			QueuePath: r.QueueName + "/" + r.PartitionName, Queue: r.QueueName, Partition: r.PartitionName,
			Namespace: r.Namespace, Task: r.Task,
			Status: api.MessageStatus(r.Status), QueueStatus: api.MessageStatus(r.Status),
			TraceId: uuidString(r.TraceID), ProducerSub: r.ProducerSub, QueuePriority: int(r.Priority),
			CreatedAt: fmtMillis(r.CreatedAt.Time), LeaseExpiresAt: fmtTimestamptz(r.LeaseExpiresAt),
		}
		m.BusStatus.ConsumedBy, m.BusStatus.TotalGroups = int(r.ConsumedBy), int(r.BusGroups)
		resp.Messages = append(resp.Messages, m)
	}
	return resp, nil
}

// GetMessage returns one message with its payload, status, queue options and
// the consumer groups of its partition.
func (s *Server) GetMessage(ctx context.Context, req api.GetMessageRequestObject) (api.GetMessageResponseObject, error) {
	notFound := api.GetMessage404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Message not found"}}
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return badRequest[api.GetMessage400JSONResponse]("partitionId must be a UUID"), nil
	}
	tid := tenantID(ctx)
	msg, err := s.rq().MessageGetByTransactionID(ctx, db.MessageGetByTransactionIDParams{
		PartitionID: pid, TransactionID: req.TransactionId, TenantID: tid,
	})
	if errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return notFound, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message: %w", err)
	}
	// The listing query is the one place that decides a message's status.
	st, err := s.aq().MessageListPage(ctx, db.MessageListPageParams{
		TenantID: tid, PartitionID: &pid, TransactionID: req.TransactionId, RowLimit: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("read message status: %w", err)
	}
	if len(st) == 0 {
		return notFound, nil // deleted meanwhile
	}
	q, err := s.rq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: msg.QueueName})
	if errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return notFound, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", msg.QueueName, err)
	}
	dl, err := s.rq().DeadLetterLatestByMessage(ctx, msg.ID)
	hasDL := err == nil
	if err != nil && !errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return nil, fmt.Errorf("read dead letter: %w", err)
	}
	consumers, err := s.rq().PartitionConsumerListByPartition(ctx, pid)
	if err != nil {
		return nil, fmt.Errorf("read consumers: %w", err)
	}
	payload := api.AnyJSON(s.b.OpenPayload(msg.Payload, msg.IsEncrypted))
	resp := api.GetMessage200JSONResponse{
		Id: msg.ID.String(), TransactionId: msg.TransactionID, PartitionId: pid.String(),
		QueuePath: msg.QueueName + "/" + msg.PartitionName, Queue: msg.QueueName, Partition: msg.PartitionName,
		Namespace: q.Namespace, Task: q.Task, Status: api.MessageStatus(st[0].Status),
		Payload: &payload, Data: &payload, IsEncrypted: msg.IsEncrypted,
		TraceId: uuidString(msg.TraceID), ProducerSub: msg.ProducerSub, CreatedAt: fmtMillis(msg.CreatedAt.Time),
		LeaseExpiresAt: fmtTimestamptz(st[0].LeaseExpiresAt),
	}
	if hasDL {
		resp.ErrorMessage, resp.RetryCount = dl.ErrorMessage, ptr(int(dl.RetryCount))
	}
	resp.QueueConfig.LeaseTime, resp.QueueConfig.RetryLimit = int(q.LeaseTime), int(q.RetryLimit)
	resp.QueueConfig.RetryDelay, resp.QueueConfig.Ttl, resp.QueueConfig.Priority = int(q.RetryDelay), int(q.Ttl), int(q.Priority)

	var hasQueueMode bool
	var busGroups, consumedBy int
	resp.ConsumerGroups = make([]struct {
		Consumed       bool    `json:"consumed"`
		LeaseExpiresAt *string `json:"leaseExpiresAt"`
		Name           string  `json:"name"`
	}, len(consumers))
	for i, c := range consumers {
		consumed := c.LastSeq >= msg.Seq
		if c.ConsumerGroup == queueModeGroup {
			hasQueueMode = true
		} else {
			busGroups++
			if consumed {
				consumedBy++
			}
		}
		g := &resp.ConsumerGroups[i]
		g.Name, g.Consumed, g.LeaseExpiresAt = c.ConsumerGroup, consumed, fmtTimestamptz(c.LeaseExpiresAt)
	}
	resp.Mode = messageMode(hasQueueMode, busGroups)
	resp.Mode.ConsumedByGroups = &consumedBy
	return resp, nil
}

// messageMode names how a set of partitions is consumed.
func messageMode(hasQueueMode bool, busGroups int) api.MessageMode {
	m := api.MessageMode{HasQueueMode: hasQueueMode, BusGroupsCount: busGroups, Type: api.None}
	switch {
	case hasQueueMode && busGroups > 0:
		m.Type = api.Hybrid
	case hasQueueMode:
		m.Type = api.Queue
	case busGroups > 0:
		m.Type = api.Bus
	}
	return m
}

func uuidString(id *uuid.UUID) *string {
	if id == nil {
		return nil
	}
	return ptr(id.String())
}
