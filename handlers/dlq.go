package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
			return nil, err
		}
		if t != nil {
			*f.out = pgtype.Timestamptz{Time: *t, Valid: true}
		}
	}
	list := db.DeadLetterListParams{
		QueueName: deref(p.Queue, ""), ConsumerGroup: deref(p.ConsumerGroup, ""), PartitionName: deref(p.Partition, ""),
		FailedFrom: from, FailedTo: to, RowLimit: int32(limit), RowOffset: int32(offset),
	}
	rows, err := s.q.DeadLetterList(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	total, err := s.q.DeadLetterCount(ctx, db.DeadLetterCountParams{
		QueueName: list.QueueName, ConsumerGroup: list.ConsumerGroup, PartitionName: list.PartitionName,
		FailedFrom: from, FailedTo: to,
	})
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	resp := api.ListDeadLetters200JSONResponse{Messages: make([]api.DeadLetter, 0, len(rows)), Total: int(total)}
	resp.Pagination.Limit, resp.Pagination.Offset = limit, offset
	for _, r := range rows {
		data, err := s.openPayload(r.Payload, r.IsEncrypted)
		if err != nil {
			return nil, err
		}
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

// deadLetterSnapshot is a dead-letter row with what a replay pushes; both
// ways of finding one (by message, by row id) read these columns.
type deadLetterSnapshot db.DeadLetterGetByIDRow

// ReplayDeadLetter replays one dead-letter row, by its id, to its own queue
// and partition or to the ones the body names.
func (s *Server) ReplayDeadLetter(ctx context.Context, req api.ReplayDeadLetterRequestObject) (api.ReplayDeadLetterResponseObject, error) {
	id, err := uuid.Parse(req.Id)
	if err != nil {
		return nil, badRequest("id must be a UUID")
	}
	if s.maint != nil && s.maint.push.Load() {
		// A replay is a push, and pushes go to the spool now: refuse
		// rather than drop the dead-letter row for a spooled copy.
		return api.ReplayDeadLetter503JSONResponse(maintenanceRefusal("replay again when push maintenance is off")), nil
	}
	row, err := s.q.DeadLetterGetByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.ReplayDeadLetter404JSONResponse{Error: "Dead-letter entry not found"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %s: %w", id, err)
	}
	dl := deadLetterSnapshot(row)
	queue, partition := dl.QueueName, dl.PartitionName
	if req.Body != nil {
		queue, partition = deref(req.Body.Queue, queue), deref(req.Body.Partition, partition)
	}
	r, err := s.replayDeadLetter(ctx, dl, queue, partition)
	if err != nil {
		return nil, err
	}
	if !r.removed {
		return api.ReplayDeadLetter404JSONResponse{Error: "Dead-letter entry not found"}, nil
	}
	return api.ReplayDeadLetter200JSONResponse(r.response(dl)), nil
}

// maintenanceRefusal is the 503 of a DLQ retry or replay while push
// maintenance is on, in the newer reference's shape.
func maintenanceRefusal(msg string) api.DeadLetterReplayUnavailable {
	return api.DeadLetterReplayUnavailable{
		Success: ptr(false), Result: ptr(api.DeadLetterReplayUnavailableResult("maintenance")), Error: "push maintenance is on",
		DlqRowRemoved: ptr(false), Message: ptr(msg),
	}
}

// replayed is the outcome of replayDeadLetter. removed is false when the
// row was gone (replayed or purged concurrently): then nothing was pushed.
type replayed struct {
	removed bool
	item    pushItem
	out     pushOutcome
}

// replayDeadLetter pushes a dead letter's payload to queue and partition
// through the normal store path, with transaction id `dlq:<row id>`, and
// deletes the row, in one transaction. The row is deleted first: of two
// concurrent replays of one row only the one that deleted it pushes. The
// payload is opened and sealed again as the destination queue asks
// (ENC-4); one that cannot be opened (no key, another key) is stored as it
// is, never sealed twice.
func (s *Server) replayDeadLetter(ctx context.Context, dl deadLetterSnapshot, queue, partition string) (replayed, error) {
	payload, err := s.openPayload(dl.Payload, dl.IsEncrypted)
	if err != nil {
		return replayed{}, err
	}
	r := replayed{item: pushItem{
		Queue: queue, Partition: partition, TransactionID: "dlq:" + dl.DlqID.String(),
		Payload: json.RawMessage(payload), ProducerSub: deref(dl.ProducerSub, ""),
		Sealed: dl.IsEncrypted && bytes.Equal(payload, dl.Payload),
	}}
	if dl.TraceID != nil {
		r.item.TraceID = dl.TraceID.String()
	}
	for attempt := 0; ; attempt++ {
		queues, err := s.ensureQueues(ctx, []string{queue})
		if err != nil {
			return replayed{}, err
		}
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			n, err := s.q.WithTx(tx).DeadLetterDeleteByID(ctx, dl.DlqID)
			if err != nil || n == 0 {
				return err
			}
			out, err := s.storeMessages(ctx, tx, queues, []pushItem{r.item})
			if err != nil {
				return err
			}
			r.removed, r.out = true, out[0]
			return nil
		})
		if err != nil && attempt == 0 && isForeignKeyViolation(err) {
			// The cached destination queue was deleted by another broker;
			// everything rolled back: once more with a fresh queue row.
			s.queues.invalidate(queue)
			continue
		}
		if err != nil {
			return replayed{}, fmt.Errorf("replay dead letter %s: %w", dl.DlqID, err)
		}
		break
	}
	if r.removed && r.out.Status == "queued" {
		s.cfg.Metrics.Pushed(queue, 1)
		s.notifyQueues(ctx, []string{queue})
	}
	return r, nil
}

// response is the answer to a replay of dl.
func (r replayed) response(dl deadLetterSnapshot) api.RetryResponse {
	resp := api.RetryResponse{
		Success: true, Result: api.RetryResponseResultMoved, Queue: r.item.Queue, Partition: r.item.Partition,
		ConsumerGroup: dl.ConsumerGroup, DlqId: dl.DlqID.String(), OriginalTransactionId: dl.TransactionID,
		DlqRowRemoved: r.removed,
	}
	if r.out.Status != "queued" {
		resp.Result = api.RetryResponseResultDuplicate
	}
	ra := &resp.ReplayedAs
	ra.Index, ra.MessageId, ra.TransactionId, ra.QueueName = 0, r.out.MessageID.String(), r.item.TransactionID, r.item.Queue
	ra.PartitionId, ra.Status = ptr(r.out.PartitionID.String()), api.RetryResponseReplayedAsStatus(r.out.Status)
	return resp
}

// PurgeDeadLetters deletes the dead-letter rows of a queue, or of one group
// in it. The messages stay: every cursor concerned is already past them.
func (s *Server) PurgeDeadLetters(ctx context.Context, req api.PurgeDeadLettersRequestObject) (api.PurgeDeadLettersResponseObject, error) {
	p := req.Params
	n, err := s.q.DeadLetterDeleteByQueue(ctx, db.DeadLetterDeleteByQueueParams{
		QueueName: p.Queue, ConsumerGroup: deref(p.ConsumerGroup, ""),
	})
	if err != nil {
		return nil, fmt.Errorf("purge dead letters of %q: %w", p.Queue, err)
	}
	return api.PurgeDeadLetters200JSONResponse{Success: true, Deleted: int(n), Queue: p.Queue, ConsumerGroup: p.ConsumerGroup}, nil
}
