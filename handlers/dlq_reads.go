package handlers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// ListDeadLetters pages through dead-lettered messages, newest failure first.
func (s *Server) ListDeadLetters(ctx context.Context, req api.ListDeadLettersRequestObject) (api.ListDeadLettersResponseObject, error) {
	p := req.Params
	limit, offset := deref(p.Limit, 100), deref(p.Offset, 0)
	var from, to pgtype.Timestamptz
	for _, f := range []struct {
		name string
		in   *string
		out  *pgtype.Timestamptz
	}{{"from", p.From, &from}, {"to", p.To, &to}} {
		t, err := parseTimestampParam(f.name, f.in)
		if err != nil {
			return badRequest[api.ListDeadLetters400JSONResponse](err.Error()), nil
		}
		if t != nil {
			*f.out = pgtype.Timestamptz{Time: *t, Valid: true}
		}
	}
	list := db.DeadLetterListParams{
		TenantID:  tenantID(ctx),
		QueueName: deref(p.Queue, ""), ConsumerGroup: deref(p.ConsumerGroup, ""), PartitionName: deref(p.Partition, ""),
		FailedFrom: from, FailedTo: to, RowLimit: int32(limit), RowOffset: int32(offset),
	}
	rows, err := s.rq().DeadLetterList(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	total, err := s.rq().DeadLetterCount(ctx, db.DeadLetterCountParams{
		TenantID: list.TenantID, QueueName: list.QueueName, ConsumerGroup: list.ConsumerGroup, PartitionName: list.PartitionName,
		FailedFrom: from, FailedTo: to,
	})
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	resp := api.ListDeadLetters200JSONResponse{Messages: make([]api.DeadLetter, 0, len(rows)), Total: int(total)}
	resp.Pagination.Limit, resp.Pagination.Offset = limit, offset
	for _, r := range rows {
		data := api.AnyJSON(s.b.OpenPayload(r.Payload, r.IsEncrypted))
		var traceID *string
		if r.TraceID != nil {
			traceID = ptr(r.TraceID.String())
		}
		resp.Messages = append(resp.Messages, api.DeadLetter{
			Id: r.MessageID.String(), DlqId: r.DlqID.String(), TransactionId: r.TransactionID, PartitionId: r.PartitionID.String(),
			Queue: r.QueueName, Partition: r.PartitionName, ConsumerGroup: r.ConsumerGroup,
			ErrorMessage: r.ErrorMessage, RetryCount: int(r.RetryCount), Data: &data,
			ProducerSub: r.ProducerSub, TraceId: traceID,
			CreatedAt: fmtMillis(r.CreatedAt.Time), FailedAt: fmtMillis(r.FailedAt.Time),
		})
	}
	return resp, nil
}
