package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// insertMessages inserts items inside the caller's transaction and reports,
// per item, whether it was queued or a duplicate of a stored transactionId.
// Queues must already exist (see ensureQueues). Every write path of
// messages comes here: push, transaction, stream sinks, spool and
// dead-letter replay.
//
// Cost: one statement creates missing partitions and reserves sequence
// numbers for all of them, one inserts every message, and only when a
// duplicate was found one more reads the original ids and gives back the
// numbers reserved for the duplicates. The partition rows stay locked until
// the caller commits: that lock is what makes sequence order equal commit
// order, and what lets the push lower last_seq again.
func (b *Broker) insertMessages(ctx context.Context, tx db.DBTX, queues map[QueueKey]db.QueenQueue, items []PushItem) ([]PushResult, error) {
	out := make([]PushResult, len(items))
	type partKey struct {
		queueID uuid.UUID
		name    string
	}
	type dedupKey struct {
		part partKey
		txID string
	}
	firstOf := make(map[dedupKey]int, len(items))
	counts := make(map[partKey]int64)
	var order []partKey
	dupOf := make([]int, len(items)) // -1: not a duplicate inside this call
	for i, it := range items {
		q, ok := queues[key(it.tenant, it.Queue)]
		if !ok {
			return nil, fmt.Errorf("queue %q was not prepared", it.Queue)
		}
		pk := partKey{q.ID, it.Partition}
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
	alloc := db.PartitionAllocateManyParams{
		QueueIds: make([]uuid.UUID, len(order)),
		Names:    make([]string, len(order)),
		Counts:   make([]int64, len(order)),
	}
	for i, pk := range order {
		alloc.QueueIds[i], alloc.Names[i], alloc.Counts[i] = pk.queueID, pk.name, counts[pk]
	}
	q := db.New(tx)
	parts, err := q.PartitionAllocateMany(ctx, alloc)
	if err != nil {
		return nil, fmt.Errorf("allocate sequence numbers: %w", err)
	}
	type partAlloc struct {
		id         uuid.UUID
		nextSeq    int64
		base, last int64 // last_seq before and after the reservation
	}
	allocated := make(map[partKey]*partAlloc, len(parts))
	for _, p := range parts {
		pk := partKey{p.QueueID, p.Name}
		base := p.LastSeq - counts[pk]
		allocated[pk] = &partAlloc{id: p.ID, nextSeq: base + 1, base: base, last: p.LastSeq}
	}

	n := len(firstOf)
	ins := db.MessageInsertManyParams{
		Ids:            make([]uuid.UUID, 0, n),
		PartitionIds:   make([]uuid.UUID, 0, n),
		Seqs:           make([]int64, 0, n),
		TransactionIds: make([]string, 0, n),
		TraceIds:       make([]string, 0, n),
		Payloads:       make([]json.RawMessage, 0, n),
		IsEncrypted:    make([]bool, 0, n),
		ProducerSubs:   make([]string, 0, n),
	}
	for i, it := range items {
		if dupOf[i] >= 0 {
			continue
		}
		q := queues[key(it.tenant, it.Queue)]
		pa := allocated[partKey{q.ID, it.Partition}]
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new message id: %w", err)
		}
		payload, encrypted, err := b.storedPayload(q, it)
		if err != nil {
			return nil, err
		}
		out[i] = PushResult{Status: Queued, MessageID: id, PartitionID: pa.id}
		ins.Ids = append(ins.Ids, id)
		ins.PartitionIds = append(ins.PartitionIds, pa.id)
		ins.Seqs = append(ins.Seqs, pa.nextSeq)
		pa.nextSeq++
		ins.TransactionIds = append(ins.TransactionIds, it.TransactionID)
		ins.TraceIds = append(ins.TraceIds, it.TraceID)
		ins.Payloads = append(ins.Payloads, payload)
		ins.IsEncrypted = append(ins.IsEncrypted, encrypted)
		ins.ProducerSubs = append(ins.ProducerSubs, it.ProducerSub)
	}
	inserted, err := q.MessageInsertMany(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("insert messages: %w", err)
	}
	if len(inserted) < len(ins.Ids) {
		// Some transactionIds were already stored: report the originals.
		stored := make(map[uuid.UUID]bool, len(inserted))
		for _, r := range inserted {
			stored[r.ID] = true
		}
		var look db.MessageListDuplicatesParams
		for i := range out {
			if dupOf[i] < 0 && !stored[out[i].MessageID] {
				look.PartitionIds = append(look.PartitionIds, out[i].PartitionID)
				look.TransactionIds = append(look.TransactionIds, items[i].TransactionID)
			}
		}
		// Give back the numbers reserved for the duplicates: last_seq drops
		// to the newest message stored now, so no number past it is left
		// empty (that would look pending forever and keep the partition a
		// pop candidate), and the empty ones below it count as vacant.
		type kept struct{ n, newest int64 }
		keptIn := make(map[uuid.UUID]*kept, len(allocated))
		for j, id := range ins.Ids {
			if stored[id] {
				k := keptIn[ins.PartitionIds[j]]
				if k == nil {
					k = &kept{}
					keptIn[ins.PartitionIds[j]] = k
				}
				k.n++
				k.newest = max(k.newest, ins.Seqs[j])
			}
		}
		for _, pa := range allocated {
			k := keptIn[pa.id]
			if k == nil {
				k = &kept{}
			}
			last := max(pa.base, k.newest)
			if vacant := last - pa.base - k.n; last < pa.last || vacant > 0 {
				look.ReleaseIds = append(look.ReleaseIds, pa.id)
				look.ReleaseLastSeqs = append(look.ReleaseLastSeqs, last)
				look.ReleaseVacant = append(look.ReleaseVacant, vacant)
			}
		}
		rows, err := q.MessageListDuplicates(ctx, look)
		if err != nil {
			return nil, fmt.Errorf("read duplicate messages: %w", err)
		}
		type key struct {
			pid  uuid.UUID
			txID string
		}
		orig := make(map[key]uuid.UUID, len(rows))
		for _, r := range rows {
			orig[key{r.PartitionID, r.TransactionID}] = r.ID
		}
		for i := range out {
			if dupOf[i] < 0 && !stored[out[i].MessageID] {
				id, ok := orig[key{out[i].PartitionID, items[i].TransactionID}]
				if !ok {
					return nil, fmt.Errorf("message %q in partition %s neither inserted nor found", items[i].TransactionID, out[i].PartitionID)
				}
				out[i] = PushResult{Status: Duplicate, MessageID: id, PartitionID: out[i].PartitionID}
			}
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
