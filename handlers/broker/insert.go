package broker

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queenforgo/queen/gen/db"
)

// partKey is a partition of one insert: its queue and name.
type partKey struct {
	queueID uuid.UUID
	name    string
}

// dedupKey is a message's dedup key inside one insert: its partition (an
// index into insertScratch.parts) and transactionId.
type dedupKey struct {
	part int32
	txID string
}

// insertScratch is the bookkeeping of one insertMessages call, pooled: at
// batch 100 its maps and slices were a good part of what every push
// allocated.
type insertScratch struct {
	parts   []partKey // in first-seen order
	counts  []int64   // per part: its messages, then those sent so far
	byPart  map[partKey]int32
	perm    []int32 // parts in lock order
	rank    []int32 // per part: its 1-based place in lock order
	partOf  []int32 // per item: its part
	dupOf   []int32 // per item: the first item it repeats, or -1
	firstOf map[dedupKey]int32
	sent    []int32 // the item of each message sent, in order
	random  randomBytes
	arg     db.MessagePushParams
}

// randomBytes hands out random bytes read beforehand.
type randomBytes struct {
	buf  []byte // kept for the next fill
	rest []byte // not handed out yet
}

// fill reads n random bytes to hand out.
func (r *randomBytes) fill(n int) {
	r.buf = slices.Grow(r.buf[:0], n)[:n]
	_, _ = rand.Read(r.buf) // crypto/rand never fails
	r.rest = r.buf
}

func (r *randomBytes) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

var insertScratchPool = sync.Pool{New: func() any {
	return &insertScratch{byPart: map[partKey]int32{}, firstOf: map[dedupKey]int32{}}
}}

// partsLinear is how many partitions part looks up by a scan before it
// keeps a map.
const partsLinear = 8

// part returns the index of k in s.parts, adding it.
func (s *insertScratch) part(k partKey) int32 {
	if len(s.parts) < partsLinear {
		for i := range s.parts {
			if s.parts[i] == k {
				return int32(i)
			}
		}
	} else {
		if len(s.byPart) == 0 {
			for i, p := range s.parts {
				s.byPart[p] = int32(i)
			}
		}
		if i, ok := s.byPart[k]; ok {
			return i
		}
		s.byPart[k] = int32(len(s.parts))
	}
	s.parts = append(s.parts, k)
	s.counts = append(s.counts, 0)
	return int32(len(s.parts) - 1)
}

// scratchKeepMax is the most items whose bookkeeping goes back to the pool;
// a rare larger insert's is left to the collector.
const scratchKeepMax = 4096

// release empties s (dropping its references to names, ids and payloads)
// and puts it back in the pool.
func (s *insertScratch) release() {
	if len(s.partOf) > scratchKeepMax || len(s.parts) > scratchKeepMax {
		return
	}
	clear(s.parts)
	clear(s.byPart)
	clear(s.firstOf)
	a := &s.arg
	clear(a.Names)
	clear(a.TransactionIds)
	clear(a.TraceIds)
	clear(a.Payloads)
	clear(a.ProducerSubs)
	s.parts, s.counts, s.perm, s.rank = s.parts[:0], s.counts[:0], s.perm[:0], s.rank[:0]
	s.partOf, s.dupOf, s.sent = s.partOf[:0], s.dupOf[:0], s.sent[:0]
	*a = db.MessagePushParams{
		QueueIds: a.QueueIds[:0], Names: a.Names[:0], Counts: a.Counts[:0], PartIdx: a.PartIdx[:0],
		SeqOffs: a.SeqOffs[:0], Ids: a.Ids[:0], TransactionIds: a.TransactionIds[:0], TraceIds: a.TraceIds[:0],
		Payloads: a.Payloads[:0], IsEncrypted: a.IsEncrypted[:0], ProducerSubs: a.ProducerSubs[:0],
	}
	insertScratchPool.Put(s)
}

// dedupConstraint is the unique key on (partition, transactionId).
const dedupConstraint = "messages_partition_transaction_unique"

// insertMessages inserts items and reports, per item, whether it was
// queued or a duplicate of a stored transactionId. Queues must already
// exist (see ensureQueues). Every write path of messages comes here: push,
// transaction, stream sinks, spool and dead-letter replay. tx is a
// transaction, or with alone the pool, for a push on its own: the insert is
// one statement, so it commits alone.
//
// Cost: one statement, queen.push_messages (migration 0012). It creates
// missing partitions, locks them and reserves their numbers, and inserts
// the messages; only when some were duplicates does it do more, inside the
// same statement. The partition rows stay locked until the transaction
// commits: that lock is what makes sequence order equal commit order.
// Alone, the statement first runs without the per-row duplicate check and,
// only when a stored transactionId makes it fail, again with it (see the
// migration); inside a transaction a failed statement would abort it, so
// the check is always on.
func (b *Broker) insertMessages(ctx context.Context, tx db.DBTX, queues map[QueueKey]db.QueenQueue, items []PushItem, alone bool) ([]PushResult, error) {
	out := make([]PushResult, len(items))
	s := insertScratchPool.Get().(*insertScratch)
	defer s.release()
	// Repeats inside the call are folded here: the statement takes each
	// (partition, transactionId) once.
	for i, it := range items {
		q, ok := queues[key(it.tenant, it.Queue)]
		if !ok {
			return nil, fmt.Errorf("queue %q was not prepared", it.Queue)
		}
		p := s.part(partKey{q.ID, it.Partition})
		s.partOf = append(s.partOf, p)
		dk := dedupKey{p, it.TransactionID}
		if first, seen := s.firstOf[dk]; seen {
			s.dupOf = append(s.dupOf, first)
			continue
		}
		s.firstOf[dk] = int32(i)
		s.dupOf = append(s.dupOf, -1)
		s.counts[p]++
	}
	// One lock order for every pusher: (queue id, partition name). rank
	// maps a partition's index in s.parts to its 1-based place in it.
	for i := range s.parts {
		s.perm = append(s.perm, int32(i))
	}
	slices.SortFunc(s.perm, func(x, y int32) int {
		a, b := &s.parts[x], &s.parts[y]
		if c := slices.Compare(a.queueID[:], b.queueID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	s.rank = slices.Grow(s.rank, len(s.parts))[:len(s.parts)]
	arg := &s.arg
	for i, p := range s.perm {
		pk := &s.parts[p]
		arg.QueueIds, arg.Names, arg.Counts = append(arg.QueueIds, pk.queueID), append(arg.Names, pk.name), append(arg.Counts, s.counts[p])
		s.rank[p] = int32(i + 1)
		s.counts[p] = 0 // from here: messages of the partition sent so far
	}
	// The random bits of every message id at once: the ids are UUIDv7 as
	// uuid.NewV7 makes them (its clock and sequence), without a read of
	// the system's randomness per message.
	s.random.fill(16 * len(s.firstOf))
	for i, it := range items {
		if s.dupOf[i] >= 0 {
			continue
		}
		q := queues[key(it.tenant, it.Queue)]
		id, err := uuid.NewV7FromReader(&s.random)
		if err != nil {
			return nil, fmt.Errorf("new message id: %w", err)
		}
		payload, encrypted, err := b.storedPayload(q, it)
		if err != nil {
			return nil, err
		}
		s.sent = append(s.sent, int32(i))
		p := s.partOf[i]
		s.counts[p]++
		arg.PartIdx = append(arg.PartIdx, s.rank[p])
		arg.SeqOffs = append(arg.SeqOffs, s.counts[p])
		arg.Ids = append(arg.Ids, id)
		arg.TransactionIds = append(arg.TransactionIds, it.TransactionID)
		arg.TraceIds = append(arg.TraceIds, it.TraceID)
		arg.Payloads = append(arg.Payloads, payload)
		arg.IsEncrypted = append(arg.IsEncrypted, encrypted)
		arg.ProducerSubs = append(arg.ProducerSubs, it.ProducerSub)
	}
	sent := s.sent
	order := s.parts
	arg.CheckDups = !alone
	rows, err := db.New(tx).MessagePush(ctx, *arg)
	if pgErr := (*pgconn.PgError)(nil); alone && errors.As(err, &pgErr) &&
		pgErr.Code == "23505" && pgErr.ConstraintName == dedupConstraint {
		arg.CheckDups = true
		rows, err = db.New(tx).MessagePush(ctx, *arg)
	}
	if err != nil {
		return nil, fmt.Errorf("insert messages: %w", err)
	}
	// Every message sent was stored under its own id, except the
	// duplicates the result names.
	pids := make([]uuid.UUID, len(order))
	for _, r := range rows {
		if r.Part > 0 && int(r.Part) <= len(pids) {
			pids[r.Part-1] = r.ID
		}
	}
	if slices.Contains(pids, uuid.Nil) {
		return nil, fmt.Errorf("insert messages: a partition of %d missing from the result", len(pids))
	}
	for k, i := range sent {
		out[i] = PushResult{Status: Queued, MessageID: arg.Ids[k], PartitionID: pids[arg.PartIdx[k]-1]}
	}
	for _, r := range rows {
		if r.Part == 0 {
			if r.Ord < 1 || int(r.Ord) > len(sent) {
				return nil, fmt.Errorf("insert messages: duplicate at %d of %d messages", r.Ord, len(sent))
			}
			o := &out[sent[r.Ord-1]]
			o.Status, o.MessageID = Duplicate, r.ID
		}
	}
	for i := range out {
		if s.dupOf[i] >= 0 {
			first := out[s.dupOf[i]]
			out[i] = PushResult{Status: Duplicate, MessageID: first.MessageID, PartitionID: first.PartitionID}
		}
	}
	return out, nil
}
