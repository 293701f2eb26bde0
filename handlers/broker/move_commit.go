package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// The autoAck claims served from kept rows (read_share.go) move their
// cursors through a group commit of their own (the coalescer of pushes and
// acks, group_commit.go): one flush in flight, and the next takes every
// move that waits, of any partition and group, in one
// PartitionConsumerAutoAckAdvance (one statement, one commit). Under load a
// commit then carries the moves of several pops: on this machine a commit's
// WAL flush and its queue are the largest piece of PostgreSQL's CPU per
// fan-out delivery left (docs/benchmarks.md, round 8). There is no timer: a
// move that finds no flush in flight goes at once.
//
// Every move stays conditional on its own: the statement locks each cursor
// row (SKIP LOCKED, lease free) only while it is still where this broker
// saw it, so a move that misses (the cursor moved, locked, leased) leaves
// the others in its flush to move, and its claim reads. A flush that fails
// is retried job by job (a claim's moves, or the moves of the claims that
// waited for one read), so a failure fails only its own claims. Once a move
// is queued its flush runs whatever its pop does (the coalescer's context):
// a claim cancelled after that still waits for the answer.

// moveMaxItems bounds the moves one flush sends; with one flush in flight
// at a time, the waiting moves never start a flush beside it.
const moveMaxItems = 512

// moveItem is a served claim's cursor move: group's cursor on part, from
// expected to last (its message lastID), past n messages.
type moveItem struct {
	part              uuid.UUID
	group             string
	expected, last, n int64
	lastID            uuid.UUID
}

// moveResult is what a flush did with a move: moved, and then the retry
// count the read would have delivered the batch with.
type moveResult struct {
	moved bool
	retry int32
}

func newMover(b *Broker) *coalescer[moveItem, moveResult] {
	c := newCoalescer(coalescerLimits{MaxItems: moveMaxItems, MaxFlushes: 1, ParallelMin: moveMaxItems}, b.moveDirect)
	c.flushed = func(items int, d time.Duration) { b.timed.Flush(FlushMove, items, d) }
	return c
}

// moveCursors moves the cursors of items in the group commit and returns
// each one's result. A broker not running (before Start, after Stop) sends
// them itself, as every claim did before the group commit.
func (b *Broker) moveCursors(ctx context.Context, items []moveItem) ([]moveResult, error) {
	out, err := b.mover.submit(ctx, items)
	if errors.Is(err, errStopped) {
		return b.moveDirect(ctx, items)
	}
	return out, err
}

// moveDirect sends items in one PartitionConsumerAutoAckAdvance. A second
// move of one cursor in the same statement is left out (not moved: its
// claim reads); none comes, as this broker runs one autoAck claim of a
// (partition, group) at a time (autoack_race.go), but the statement's
// answer names the cursor, not the move.
func (b *Broker) moveDirect(ctx context.Context, items []moveItem) ([]moveResult, error) {
	type cursor struct {
		part  uuid.UUID
		group string
	}
	at := make(map[cursor]int, len(items))
	p := db.PartitionConsumerAutoAckAdvanceParams{
		PartitionIds: make([]uuid.UUID, 0, len(items)), ConsumerGroups: make([]string, 0, len(items)),
		ExpectedSeqs: make([]int64, 0, len(items)), LastSeqs: make([]int64, 0, len(items)),
		LastConsumedIds: make([]uuid.UUID, 0, len(items)), Ns: make([]int64, 0, len(items)),
	}
	for i, it := range items {
		k := cursor{it.part, it.group}
		if _, dup := at[k]; dup {
			continue
		}
		at[k] = i
		p.PartitionIds = append(p.PartitionIds, it.part)
		p.ConsumerGroups = append(p.ConsumerGroups, it.group)
		p.ExpectedSeqs = append(p.ExpectedSeqs, it.expected)
		p.LastSeqs = append(p.LastSeqs, it.last)
		p.LastConsumedIds = append(p.LastConsumedIds, it.lastID)
		p.Ns = append(p.Ns, it.n)
	}
	b.shared.advances.Add(1)
	rows, err := b.q.PartitionConsumerAutoAckAdvance(ctx, p)
	if err = pgerr.Translate(err); err != nil {
		return nil, fmt.Errorf("move %d autoAck cursors: %w", len(p.PartitionIds), err)
	}
	out := make([]moveResult, len(items))
	for _, r := range rows {
		if i, ok := at[cursor{r.PartitionID, r.ConsumerGroup}]; ok {
			out[i] = moveResult{moved: true, retry: r.BatchRetryCount}
		}
	}
	return out, nil
}
