package handlers

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// ackItem is one acknowledgement after validation and defaults.
type ackItem struct {
	TransactionID string
	PartitionID   uuid.UUID
	Status        string // completed | failed | dlq | retry (success is mapped to completed)
	Group         string
	LeaseID       string // "" skips the lease check
	Error         string
}

// Ack item errors reported in the 200 body.
const (
	errMessageNotFound = "Message not found"
	errInvalidLease    = "Invalid or expired lease"
	errBlockedByFailed = "Not applied: an earlier message of this partition failed in the same batch and will be redelivered"
)

// ackMode selects the retry rules: transactions dead-letter failed acks at
// once, as the reference broker does.
type ackMode int

const (
	ackNormal ackMode = iota
	ackTransactional
)

// cursorState is a (partition, group) cursor row being updated by a batch.
type cursorState struct {
	row        db.PartitionConsumerLockManyRow
	lastSeq    int64
	lastID     uuid.UUID
	consumed   int64
	batches    int64
	acked      int32
	retries    int32
	leaseHeld  bool
	release    bool
	blockedSeq int64 // > 0: a failed ack at this seq; later seqs wait for redelivery
	touched    bool
}

// applyAcks applies items inside the caller's transaction and returns one
// result per item in input order. Items are applied per (partition, group),
// oldest message first, so that a failed ack is never skipped by a later
// completed one. Lease validity is judged on the state before the batch.
func (s *Server) applyAcks(ctx context.Context, tx dbtx, items []ackItem, mode ackMode) ([]api.AckResult, error) {
	q := db.New(tx)
	results := make([]api.AckResult, len(items))
	for i, it := range items {
		results[i] = api.AckResult{Index: i, TransactionId: it.TransactionID}
	}
	if len(items) == 0 {
		return results, nil
	}
	look := db.MessageListByTransactionIDsParams{
		PartitionIds:   make([]uuid.UUID, len(items)),
		TransactionIds: make([]string, len(items)),
	}
	for i, it := range items {
		look.PartitionIds[i], look.TransactionIds[i] = it.PartitionID, it.TransactionID
	}
	msgs, err := q.MessageListByTransactionIDs(ctx, look)
	if err != nil {
		return nil, fmt.Errorf("read acked messages: %w", err)
	}
	type msgKey struct {
		pid  uuid.UUID
		txID string
	}
	byKey := make(map[msgKey]db.MessageListByTransactionIDsRow, len(msgs))
	for _, m := range msgs {
		byKey[msgKey{m.PartitionID, m.TransactionID}] = m
	}

	type cursorKey struct {
		pid   uuid.UUID
		group string
	}
	var lock db.PartitionConsumerLockManyParams
	seen := map[cursorKey]bool{}
	var order []int
	for i, it := range items {
		m, ok := byKey[msgKey{it.PartitionID, it.TransactionID}]
		if !ok {
			results[i].Error = ptr(errMessageNotFound)
			continue
		}
		results[i].QueueName, results[i].PartitionName = ptr(m.QueueName), ptr(m.PartitionName)
		order = append(order, i)
		ck := cursorKey{it.PartitionID, it.Group}
		if !seen[ck] {
			seen[ck] = true
			lock.PartitionIds = append(lock.PartitionIds, ck.pid)
			lock.ConsumerGroups = append(lock.ConsumerGroups, ck.group)
		}
	}
	rows, err := q.PartitionConsumerLockMany(ctx, lock)
	if err != nil {
		return nil, fmt.Errorf("lock cursors: %w", err)
	}
	states := make(map[cursorKey]*cursorState, len(rows))
	for _, r := range rows {
		st := &cursorState{
			row: r, lastSeq: r.LastSeq, acked: r.AckedCount, retries: r.BatchRetryCount,
			leaseHeld: r.LeaseID != nil && r.LeaseActive,
		}
		states[cursorKey{r.PartitionID, r.ConsumerGroup}] = st
	}

	slices.SortStableFunc(order, func(a, b int) int {
		ia, ib := items[a], items[b]
		if c := slices.Compare(ia.PartitionID[:], ib.PartitionID[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(ia.Group, ib.Group); c != 0 {
			return c
		}
		return cmp.Compare(byKey[msgKey{ia.PartitionID, ia.TransactionID}].Seq, byKey[msgKey{ib.PartitionID, ib.TransactionID}].Seq)
	})

	var dlq db.DeadLetterInsertManyParams
	for _, i := range order {
		it := items[i]
		m := byKey[msgKey{it.PartitionID, it.TransactionID}]
		st := states[cursorKey{it.PartitionID, it.Group}]
		res := &results[i]
		if st == nil {
			// The group never claimed this partition: nothing to move, as
			// in the reference broker.
			res.Success = true
			res.LeaseReleased = true
			continue
		}
		if it.LeaseID != "" && (st.row.LeaseID == nil || *st.row.LeaseID != it.LeaseID || !st.row.LeaseActive) {
			res.Error = ptr(errInvalidLease)
			continue
		}
		if st.blockedSeq > 0 && m.Seq > st.blockedSeq && it.Status != "retry" {
			res.Error = ptr(errBlockedByFailed)
			continue
		}
		st.touched = true
		res.Success = true
		status := it.Status
		if status == "failed" && mode == ackNormal && st.retries < st.row.RetryLimit {
			// Redeliver from the unchanged cursor.
			st.retries++
			st.release = true
			st.blockedSeq = m.Seq
			res.LeaseReleased = true
			continue
		}
		switch status {
		case "retry":
			st.release = true
			res.LeaseReleased = true
			continue
		case "failed", "dlq":
			reason := it.Error
			if reason == "" {
				if status == "failed" {
					reason = "Retries exhausted"
				} else {
					reason = "Moved to dead-letter queue"
				}
			}
			dlq.MessageIds = append(dlq.MessageIds, m.ID)
			dlq.PartitionIds = append(dlq.PartitionIds, m.PartitionID)
			dlq.ConsumerGroups = append(dlq.ConsumerGroups, it.Group)
			dlq.ErrorMessages = append(dlq.ErrorMessages, reason)
			dlq.RetryCounts = append(dlq.RetryCounts, st.retries)
			dlq.OriginalCreatedAts = append(dlq.OriginalCreatedAts, m.CreatedAt)
			res.Dlq = true
			// The next message starts with a fresh retry budget (the
			// reference forgets this and dead-letters it early).
			st.retries = 0
		}
		// completed, or dead-lettered: the cursor passes the message,
		// never moving backwards.
		if m.Seq > st.lastSeq {
			st.lastSeq, st.lastID = m.Seq, m.ID
			st.consumed++
		}
		st.acked++
		if st.leaseHeld && st.row.BatchSize > 0 && st.acked >= st.row.BatchSize {
			st.release = true
			st.retries = 0
			st.batches++
		}
		res.LeaseReleased = st.release || !st.leaseHeld
	}

	var apply db.PartitionConsumerApplyManyParams
	for _, st := range states {
		if !st.touched {
			continue
		}
		apply.PartitionIds = append(apply.PartitionIds, st.row.PartitionID)
		apply.ConsumerGroups = append(apply.ConsumerGroups, st.row.ConsumerGroup)
		apply.LastSeqs = append(apply.LastSeqs, st.lastSeq)
		apply.LastIds = append(apply.LastIds, st.lastID)
		apply.Consumed = append(apply.Consumed, st.consumed)
		apply.Batches = append(apply.Batches, st.batches)
		apply.AckedCounts = append(apply.AckedCounts, st.acked)
		apply.RetryCounts = append(apply.RetryCounts, st.retries)
		apply.Releases = append(apply.Releases, st.release)
	}
	if len(apply.PartitionIds) > 0 {
		if err := q.PartitionConsumerApplyMany(ctx, apply); err != nil {
			return nil, fmt.Errorf("move cursors: %w", err)
		}
	}
	if len(dlq.MessageIds) > 0 {
		if err := q.DeadLetterInsertMany(ctx, dlq); err != nil {
			return nil, fmt.Errorf("insert dead letters: %w", err)
		}
	}
	return results, nil
}

// ackItemFrom maps the wire fields of an acknowledgement to an ackItem.
func ackItemFrom(txID string, partitionID string, status *api.AckStatus, group *string, leaseID, errMsg *string) (ackItem, error) {
	pid, err := uuid.Parse(partitionID)
	if err != nil {
		return ackItem{}, badRequest("partitionId must be a UUID")
	}
	it := ackItem{
		TransactionID: txID,
		PartitionID:   pid,
		Status:        string(deref(status, api.AckStatusCompleted)),
		Group:         deref(group, ""),
		LeaseID:       deref(leaseID, ""),
		Error:         deref(errMsg, ""),
	}
	if it.Status == "success" || it.Status == "" {
		it.Status = "completed"
	}
	if it.Group == "" {
		it.Group = queueModeGroup
	}
	return it, nil
}
