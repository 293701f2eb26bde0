package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/spool"
)

// errSpoolUnavailable is a push that needed the spool (database down, push
// maintenance on, older records of its partition still spooled) and could
// not have it: 503, so the client retries, never `buffered`.
type errSpoolUnavailable struct {
	msg string
	err error
}

func (e errSpoolUnavailable) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e errSpoolUnavailable) Unwrap() error { return e.err }

// pushOrSpool stores a push in the database, or appends it to the disk
// spool and answers `buffered` (SP-1) when
//   - push maintenance is on (MNT-1);
//   - an older record of one of its partitions is still spooled and the
//     database does not take them within spoolWaitMax: storing this one
//     now would overtake them, so it queues behind (order per partition
//     holds across outages);
//   - the database is unreachable (the push's error classifies as
//     ErrUnavailable). A commit whose answer was lost may have landed; the
//     replay then finds its transactionId and writes nothing.
//
// `buffered` is answered only after the records are fsynced.
func (s *Server) pushOrSpool(ctx context.Context, items []pushItem) ([]pushOutcome, error) {
	if s.maint.push.Load() {
		return s.spoolPush(ctx, items, "push maintenance is on")
	}
	if s.spool == nil {
		return s.push(ctx, items)
	}
	if !s.spool.Empty() {
		if keys := spoolKeys(items); s.spool.HasPending(keys...) && !s.waitSpooled(ctx, keys) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return s.spoolPush(ctx, items, "older pushes to this partition wait in the spool")
		}
	}
	out, err := s.push(ctx, items)
	if err == nil {
		s.spool.SetDBHealthy(true)
		return out, nil
	}
	if !errors.Is(classifyDB(err), ErrUnavailable) {
		return nil, err
	}
	s.spool.SetDBHealthy(false)
	return s.spoolPush(ctx, items, "database unavailable")
}

// spoolWaitMax bounds how long a push waits for the older spooled records
// of its partitions to be replayed before it is spooled behind them.
const spoolWaitMax = 5 * time.Second

// waitSpooled waits, while the database is up, until the spool holds
// nothing more for keys. Spooling behind them instead would keep a busy
// partition on the spool for as long as its producers outpace one drain
// cycle; waiting is back-pressure that lets the spool empty, and the push
// then commits directly, after them. It reports whether they cleared.
func (s *Server) waitSpooled(ctx context.Context, keys []string) bool {
	if !s.spool.DBHealthy() {
		return false // the drain is not getting through either
	}
	wctx, cancel := context.WithTimeout(ctx, spoolWaitMax)
	defer cancel()
	return s.spool.WaitClear(wctx, keys...)
}

func spoolKeys(items []pushItem) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = spool.Key("", it.Queue, it.Partition)
	}
	return keys
}

// spoolPush appends items to the spool, sealed as the store would seal them
// (ENC-4: a flagged queue's payload never reaches the disk in clear).
func (s *Server) spoolPush(ctx context.Context, items []pushItem, reason string) ([]pushOutcome, error) {
	if s.spool == nil {
		return nil, errSpoolUnavailable{msg: reason + " and no spool is configured (FILE_BUFFER_DIR); retry later"}
	}
	recs := make([]spool.Record, len(items))
	for i, it := range items {
		payload, sealed := it.Payload, it.Sealed
		if !sealed {
			var err error
			payload, sealed, err = s.sealPayload(s.spoolSealRow(it.Queue), it.Payload)
			if err != nil {
				return nil, err
			}
		}
		recs[i] = spool.Record{
			Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, TraceID: it.TraceID,
			ProducerSub: it.ProducerSub, Encrypted: sealed, Payload: payload,
		}
	}
	if err := s.spool.Append(ctx, recs); err != nil {
		return nil, errSpoolUnavailable{msg: reason + " and the spool cannot write; retry later", err: err}
	}
	out := make([]pushOutcome, len(items))
	for i := range out {
		out[i].Status = "buffered"
	}
	// The request counts now, with no messages stored; the messages count
	// when the replay stores them (replaySpooled).
	s.recordPush(items, out)
	return out, nil
}

// spoolSealRow is the queue row that decides sealing of a spooled payload.
// The database may be down, so it is not asked: a fresh cache entry decides;
// otherwise the payload is sealed whenever a key is loaded, so that a queue
// flagged for encryption never has plaintext on disk. The cost is that an
// unflagged queue's spooled message may be stored sealed; reads open it by
// shape (ENC-3) and clients never see the difference.
func (s *Server) spoolSealRow(name string) db.QueenQueue {
	if q, ok := s.queues.get(name); ok {
		return q
	}
	return db.QueenQueue{Name: name, EncryptionEnabled: s.payloads != nil && s.payloads.cipher != nil}
}

// storedPayload is the payload to insert for it and whether it is sealed:
// a payload replayed from the spool sealed stays as it is (sealing it again
// would lock it in two envelopes), everything else goes through sealPayload.
func (s *Server) storedPayload(q db.QueenQueue, it pushItem) (json.RawMessage, bool, error) {
	if it.Sealed {
		return it.Payload, true, nil
	}
	return s.sealPayload(q, it.Payload)
}

// spoolReplayer is the spool's ReplayFunc (replaySpooled) with its own
// request validator: the drain starts in New, before Handler builds the
// server's.
func (s *Server) spoolReplayer() spool.ReplayFunc {
	v, err := newRequestValidator()
	if err != nil {
		s.log.Error("spool replay runs without the spec's name checks", "err", err)
		v = nil
	}
	return func(ctx context.Context, recs []spool.Record) error { return s.replaySpooled(ctx, v, recs) }
}

// replaySpooled stores records, with their original transactionIds,
// through the normal store path in one transaction. Dedup on (partition,
// transactionId) makes a replay of a stored record a no-op.
func (s *Server) replaySpooled(ctx context.Context, v *requestValidator, recs []spool.Record) error {
	if s.maint.push.Load() {
		return fmt.Errorf("%w: push maintenance is on", spool.ErrRetry)
	}
	items := make([]pushItem, len(recs))
	check := make([]api.PushItem, len(recs))
	for i, r := range recs {
		items[i] = pushItem{
			Queue: r.Queue, Partition: r.Partition, TransactionID: r.TransactionID, TraceID: r.TraceID,
			Payload: r.Payload, ProducerSub: r.ProducerSub, Sealed: r.Encrypted,
		}
		check[i] = api.PushItem{Queue: r.Queue, Partition: &items[i].Partition, TransactionId: &items[i].TransactionID, TraceId: &items[i].TraceID}
	}
	// A record from a hand-edited or foreign file must pass the same rules
	// as a push; one that does not is set aside by the spool.
	if v != nil {
		if err := v.checkPushItems(check); err != nil {
			return err
		}
	}
	out, err := s.pushDirect(ctx, items)
	if err == nil {
		s.recordReplayed(items, out) // metrics_record.go
		s.spool.SetDBHealthy(true)
		return nil
	}
	if errors.Is(classifyDB(err), ErrUnavailable) || ctx.Err() != nil {
		return fmt.Errorf("%w: %w", spool.ErrRetry, err)
	}
	return err
}
