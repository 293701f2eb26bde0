package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queenforgo/queen/gen/db"
)

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
	type partKey struct {
		queueID uuid.UUID
		name    string
	}
	type dedupKey struct {
		part partKey
		txID string
	}
	// Repeats inside the call are folded here: the statement takes each
	// (partition, transactionId) once.
	firstOf := make(map[dedupKey]int, len(items))
	partOf := make([]partKey, len(items))
	partIdx := make(map[partKey]int32, 4)
	counts := make(map[partKey]int64, 4)
	var order []partKey
	dupOf := make([]int, len(items)) // -1: not a duplicate inside this call
	for i, it := range items {
		q, ok := queues[key(it.tenant, it.Queue)]
		if !ok {
			return nil, fmt.Errorf("queue %q was not prepared", it.Queue)
		}
		pk := partKey{q.ID, it.Partition}
		partOf[i] = pk
		dk := dedupKey{pk, it.TransactionID}
		if first, seen := firstOf[dk]; seen {
			dupOf[i] = first
			continue
		}
		firstOf[dk] = i
		dupOf[i] = -1
		if counts[pk] == 0 {
			order = append(order, pk)
		}
		counts[pk]++
	}
	// One lock order for every pusher: (queue id, partition name).
	slices.SortFunc(order, func(a, b partKey) int {
		if c := slices.Compare(a.queueID[:], b.queueID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	n := len(firstOf)
	arg := db.MessagePushParams{
		QueueIds:       make([]uuid.UUID, len(order)),
		Names:          make([]string, len(order)),
		Counts:         make([]int64, len(order)),
		PartIdx:        make([]int32, 0, n),
		SeqOffs:        make([]int64, 0, n),
		Ids:            make([]uuid.UUID, 0, n),
		TransactionIds: make([]string, 0, n),
		TraceIds:       make([]string, 0, n),
		Payloads:       make([]json.RawMessage, 0, n),
		IsEncrypted:    make([]bool, 0, n),
		ProducerSubs:   make([]string, 0, n),
	}
	for i, pk := range order {
		arg.QueueIds[i], arg.Names[i], arg.Counts[i] = pk.queueID, pk.name, counts[pk]
		partIdx[pk] = int32(i + 1)
		counts[pk] = 0 // from here: messages of pk sent so far
	}
	sent := make([]int, 0, n) // the item of each message sent, in order
	for i, it := range items {
		if dupOf[i] >= 0 {
			continue
		}
		q := queues[key(it.tenant, it.Queue)]
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new message id: %w", err)
		}
		payload, encrypted, err := b.storedPayload(q, it)
		if err != nil {
			return nil, err
		}
		sent = append(sent, i)
		pk := partOf[i]
		counts[pk]++
		arg.PartIdx = append(arg.PartIdx, partIdx[pk])
		arg.SeqOffs = append(arg.SeqOffs, counts[pk])
		arg.Ids = append(arg.Ids, id)
		arg.TransactionIds = append(arg.TransactionIds, it.TransactionID)
		arg.TraceIds = append(arg.TraceIds, it.TraceID)
		arg.Payloads = append(arg.Payloads, payload)
		arg.IsEncrypted = append(arg.IsEncrypted, encrypted)
		arg.ProducerSubs = append(arg.ProducerSubs, it.ProducerSub)
	}
	arg.CheckDups = !alone
	rows, err := db.New(tx).MessagePush(ctx, arg)
	if pgErr := (*pgconn.PgError)(nil); alone && errors.As(err, &pgErr) &&
		pgErr.Code == "23505" && pgErr.ConstraintName == dedupConstraint {
		arg.CheckDups = true
		rows, err = db.New(tx).MessagePush(ctx, arg)
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
		if dupOf[i] >= 0 {
			first := out[dupOf[i]]
			out[i] = PushResult{Status: Duplicate, MessageID: first.MessageID, PartitionID: first.PartitionID}
		}
	}
	return out, nil
}
