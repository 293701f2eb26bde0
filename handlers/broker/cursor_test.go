package broker

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// heldCursor is a cursor at lastSeq whose live lease covers a batch of
// batchSize, with retryLimit retries.
func heldCursor(lastSeq int64, batchSize, retryLimit int32) *cursor {
	lease := "lease-1"
	row := db.PartitionConsumerLockManyRow{
		LastSeq: lastSeq, LeaseID: &lease, LeaseActive: true, BatchSize: batchSize, RetryLimit: retryLimit,
	}
	return &cursor{row: row, lastSeq: lastSeq, leaseHeld: true}
}

// The ack steps of one batch: a failed message is redelivered until its
// retries are used up, later messages of the batch wait behind it, and the
// cursor passes messages only forwards.
func TestCursorAckStateMachine(t *testing.T) {
	t.Parallel()
	c := heldCursor(10, 3, 1)
	require.ErrorIs(t, c.checkLease("other"), ErrLeaseLost)
	require.NoError(t, c.checkLease("lease-1"))
	require.NoError(t, c.checkLease(""), "no lease named: no check")

	// seq 11 fails with a retry left: redelivered, the cursor stays.
	step := c.ack(11, uuid.New(), AckFailed, ackNormal)
	require.True(t, step.released)
	require.False(t, step.deadLetter)
	require.Equal(t, int64(10), c.lastSeq)
	// seq 12 completed after it in the same batch waits for the redelivery.
	require.ErrorIs(t, c.ack(12, uuid.New(), AckCompleted, ackNormal).refused, ErrBlocked)

	// Redelivered, it fails again: retries used up, dead-lettered, passed.
	c = heldCursor(10, 3, 1)
	c.retries = 1
	id := uuid.New()
	step = c.ack(11, id, AckFailed, ackNormal)
	require.True(t, step.deadLetter)
	require.Equal(t, int32(1), step.deadRetries)
	require.Equal(t, int64(11), c.lastSeq)
	require.Equal(t, id, c.lastID)
	require.Zero(t, c.retries, "the next message starts with a fresh budget")

	// An ack behind the cursor never moves it back.
	c.ack(5, uuid.New(), AckCompleted, ackNormal)
	require.Equal(t, int64(11), c.lastSeq)
	// The third ack of the batch of 3 releases the lease.
	step = c.ack(12, uuid.New(), AckCompleted, ackNormal)
	require.True(t, step.released)
	require.True(t, c.release)
	require.Equal(t, int64(1), c.batches)

	// In a transaction a failure dead-letters at once.
	c = heldCursor(0, 1, 5)
	require.True(t, c.ack(1, uuid.New(), AckFailed, ackTransactional).deadLetter)
}

// A stream cycle passes everything up to its acked message, and its
// replay is recognised as stale.
func TestCursorPassTo(t *testing.T) {
	t.Parallel()
	c := heldCursor(10, 5, 3)
	c.row.AckedCount = 1
	require.False(t, c.passed(15))
	c.passTo(15, uuid.New(), 4, false)
	require.Equal(t, int64(15), c.lastSeq)
	require.Equal(t, int64(4), c.consumed)
	require.Equal(t, int32(5), c.acked)
	require.False(t, c.release)

	c = heldCursor(10, 5, 3)
	c.passTo(15, uuid.New(), 5, true)
	require.True(t, c.release)
	require.Equal(t, int64(1), c.batches)
	require.Zero(t, c.acked)

	c = heldCursor(15, 5, 3)
	require.True(t, c.passed(15), "an ack at the cursor was applied already")
}
