package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// The autoAck reads (claimPartAutoAck) go through a group commit of their
// own, as the cursor moves do (move_commit.go): the reads that wait while a
// flush is in flight go out together in one pgx batch
// (PartitionConsumerAutoAckRead), which PostgreSQL runs as one
// implicit transaction: one commit, one WAL flush, for the cursor moves of
// several claims, of any partitions and groups.
//
// Why a read in a batch delivers what it would alone, nothing twice and
// nothing skipped:
//
//   - each statement of the batch takes its own snapshot (READ COMMITTED)
//     and locks its cursor row with SKIP LOCKED: the rows it returns are
//     the visible messages past the cursor, in seq order, as alone, and
//     the completeness of kept rows (read_share.go) holds per statement;
//   - nothing a flush read is given to a claim before the batch committed
//     (its results are read to the end, Close answers the commit): a batch
//     that fails moved no cursor, and each job of it is then sent alone
//     (the coalescer), so a failure fails only its own claim;
//   - the statements wait for no row lock (SKIP LOCKED; a read locks only
//     its cursor row), so the cursor rows a batch holds until its commit
//     cannot close a cycle of waits: no deadlock. Another claim of one of
//     those cursors skips it meanwhile, as during a read alone; this broker
//     runs one autoAck claim of a (partition, group) at a time
//     (autoack_race.go);
//   - a read is sent after its claim took the epoch and the time
//     (claimPartAutoAck): kept rows are dated no later than their read.
//
// Once queued a read is made whatever its pop does, and its claim waits
// for the answer: a pop cancelled meanwhile delivers what its cursor moved
// past, as a pop whose read committed as its client went away.

// The reads' group commit: up to readMaxFlushes batches in flight; a
// further one starts beside them once readParallelMin reads wait. Two and
// eight gave fewer commits (2.4 reads a batch against 2.2) but a claim
// waited longer for its read: the fan-out's p99 delivery was about 50 ms
// above main's, about 25 ms with four and four, for as many deliveries
// (docs/benchmarks.md, round 9).
const (
	readMaxItems    = 64
	readMaxFlushes  = 4
	readParallelMin = 4
)

type readItem = db.PartitionConsumerAutoAckReadParams

func newReader(b *Broker) *coalescer[readItem, []db.PartitionConsumerAutoAckReadRow] {
	c := newCoalescer(coalescerLimits{MaxItems: readMaxItems, MaxFlushes: readMaxFlushes, ParallelMin: readParallelMin}, b.readDirect)
	c.flushed = func(items int, d time.Duration) { b.timed.Flush(FlushRead, items, d) }
	return c
}

// readAutoAck is one claim's PartitionConsumerAutoAckRead, made in the
// reads' group commit. A broker not running (before Start, after Stop)
// sends it itself.
func (b *Broker) readAutoAck(ctx context.Context, p readItem) ([]db.PartitionConsumerAutoAckReadRow, error) {
	out, err := b.reader.submit(ctx, []readItem{p})
	if errors.Is(err, errStopped) {
		out, err = b.readDirect(ctx, []readItem{p})
	}
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// readDirect sends items in one batch (one implicit transaction) and
// returns each one's rows once the batch committed.
func (b *Broker) readDirect(ctx context.Context, items []readItem) ([][]db.PartitionConsumerAutoAckReadRow, error) {
	out := make([][]db.PartitionConsumerAutoAckReadRow, len(items))
	var failed error
	b.shared.readBatches.Add(1)
	br := b.q.PartitionConsumerAutoAckRead(ctx, items)
	br.Query(func(i int, rows []db.PartitionConsumerAutoAckReadRow, err error) {
		if err != nil {
			failed = cmpErr(failed, err)
			return
		}
		out[i] = rows
	})
	// Query closed the batch without its error: Close answers it again
	// (the commit's, among others).
	failed = cmpErr(failed, br.Close())
	if failed != nil {
		return nil, fmt.Errorf("autoAck read of %d partitions: %w", len(items), pgerr.Translate(failed))
	}
	return out, nil
}

// cmpErr is the first of two errors that is not nil.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}
