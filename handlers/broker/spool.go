package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/sql/pgerr"
)

// pushOrSpool stores a push in the database, or appends it to the disk
// spool and answers Buffered (SP-1) when
//   - push maintenance is on (MNT-1);
//   - an older record of one of its partitions is still spooled and the
//     database does not take them within spoolWaitMax: storing this one
//     now would overtake them, so it queues behind (order per partition
//     holds across outages);
//   - the database is unreachable (the push's error is ErrUnavailable). A
//     commit whose answer was lost may have landed; the replay then finds
//     its transactionId and writes nothing.
//
// Buffered is answered only after the records are fsynced.
func (b *Broker) pushOrSpool(ctx context.Context, tenant string, items []PushItem) ([]PushResult, error) {
	if b.maint.push.Load() {
		return b.spoolPush(ctx, tenant, items, "push maintenance is on")
	}
	if b.spool == nil {
		return b.push(ctx, items)
	}
	if !b.spool.Empty() {
		if keys := spoolKeys(tenant, items); b.spool.HasPending(keys...) && !b.waitSpooled(ctx, keys) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return b.spoolPush(ctx, tenant, items, "older pushes to this partition wait in the spool")
		}
	}
	out, err := b.push(ctx, items)
	if err == nil {
		b.spool.SetDBHealthy(true)
		return out, nil
	}
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, errStopped) {
		return nil, err
	}
	b.spool.SetDBHealthy(false)
	return b.spoolPush(ctx, tenant, items, "database unavailable")
}

// spoolWaitMax bounds how long a push waits for the older spooled records
// of its partitions to be replayed before it is spooled behind them.
const spoolWaitMax = 5 * time.Second

// waitSpooled waits, while the database is up, until the spool holds
// nothing more for keys. Spooling behind them instead would keep a busy
// partition on the spool for as long as its producers outpace one drain
// cycle; waiting is back-pressure that lets the spool empty, and the push
// then commits directly, after them. It reports whether they cleared.
func (b *Broker) waitSpooled(ctx context.Context, keys []string) bool {
	if !b.spool.DBHealthy() {
		return false // the drain is not getting through either
	}
	wctx, cancel := context.WithTimeout(ctx, spoolWaitMax)
	defer cancel()
	return b.spool.WaitClear(wctx, keys...)
}

// spoolTenant is the tenant written in spool records: empty for the default
// one, so that files written before tenancy read the same.
func spoolTenant(tenant string) string {
	if tenant == DefaultTenant {
		return ""
	}
	return tenant
}

func spoolKeys(tenant string, items []PushItem) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = spool.Key(spoolTenant(tenant), it.Queue, it.Partition)
	}
	return keys
}

// spoolPush appends items to the spool, sealed as the insert would seal
// them (ENC-4: a flagged queue's payload never reaches the disk in clear).
func (b *Broker) spoolPush(ctx context.Context, tenant string, items []PushItem, reason string) ([]PushResult, error) {
	if b.spool == nil {
		return nil, spoolError{msg: reason + " and no spool is configured (FILE_BUFFER_DIR); retry later"}
	}
	recs := make([]spool.Record, len(items))
	for i, it := range items {
		payload, sealed := it.Payload, it.sealed
		if !sealed {
			var err error
			payload, sealed, err = b.seal.seal(b.spoolSealRow(key(tenant, it.Queue)), it.Payload)
			if err != nil {
				return nil, err
			}
		}
		recs[i] = spool.Record{
			Queue: it.Queue, Partition: it.Partition, Tenant: spoolTenant(tenant), TransactionID: it.TransactionID,
			TraceID: it.TraceID, ProducerSub: it.ProducerSub, Encrypted: sealed, Payload: payload,
		}
	}
	if err := b.spool.Append(ctx, recs); err != nil {
		return nil, spoolError{msg: reason + " and the spool cannot write; retry later", err: err}
	}
	out := make([]PushResult, len(items))
	for i := range out {
		out[i].Status = Buffered
	}
	// The request counts now, with no messages stored; the messages count
	// when the replay stores them (ReplaySpooled).
	b.rec.Request(metrics.OpPush)
	b.recordPushed(items, out)
	return out, nil
}

// spoolSealRow is the queue row that decides sealing of a spooled payload.
// The database may be down, so it is not asked: a fresh cache entry decides;
// otherwise the payload is sealed whenever a key is loaded, so that a queue
// flagged for encryption never has plaintext on disk. The cost is that an
// unflagged queue's spooled message may be stored sealed; reads open it by
// shape (ENC-3) and clients never see the difference.
func (b *Broker) spoolSealRow(k QueueKey) db.QueenQueue {
	if q, ok := b.queues.get(k); ok {
		return q
	}
	return db.QueenQueue{Name: k.Queue, EncryptionEnabled: b.seal.cipher != nil}
}

// ReplaySpooled is the spool's ReplayFunc: it stores records, with their
// original transactionIds, through the normal insert in one transaction.
// Dedup on (partition, transactionId) makes a replay of a stored record a
// no-op. Start hands it to the spool's drain.
func (b *Broker) ReplaySpooled(ctx context.Context, recs []spool.Record) error {
	if b.maint.push.Load() {
		return fmt.Errorf("%w: push maintenance is on", spool.ErrRetry)
	}
	items := make([]PushItem, len(recs))
	for i, r := range recs {
		// Records hold the tenant as the push had it ("" for the default
		// one); a hand-edited file's must still be one.
		tenant, err := tenantOf(r.Tenant)
		if err != nil {
			return fmt.Errorf("spooled record of %q: %w", r.Queue, err)
		}
		items[i] = PushItem{
			Queue: r.Queue, Partition: r.Partition, TransactionID: r.TransactionID, TraceID: r.TraceID,
			Payload: r.Payload, ProducerSub: r.ProducerSub, sealed: r.Encrypted, tenant: tenant,
		}
	}
	// A record from a hand-edited or foreign file must pass the same rules
	// as a push; one that does not is set aside by the spool.
	if b.cfg.ValidatePushFunc != nil {
		if err := b.cfg.ValidatePushFunc(items); err != nil {
			return err
		}
	}
	out, err := b.pushDirect(ctx, items)
	if err == nil {
		b.recordReplayed(items, out)
		b.spool.SetDBHealthy(true)
		return nil
	}
	if errors.Is(pgerr.Translate(err), ErrUnavailable) || ctx.Err() != nil {
		return fmt.Errorf("%w: %w", spool.ErrRetry, err)
	}
	return err
}

// SpoolStats is the disk spool's state; configured is false without
// FILE_BUFFER_DIR.
func (b *Broker) SpoolStats() (st spool.Stats, configured bool) {
	if b.spool == nil {
		return spool.Stats{DBHealthy: true}, false
	}
	return b.spool.Stats(), true
}
