package broker

import (
	"errors"
	"fmt"

	"github.com/queenforgo/queen/sql/pgerr"
)

// The broker's sentinel errors. Expected outcomes are returned as (or
// wrapped around) these; the HTTP adapter maps them to declared responses.
var (
	// ErrInvalid: the request cannot be applied as given; nothing changed.
	// Errors made with invalid carry the message to show the client.
	ErrInvalid = pgerr.ErrInvalidInput
	// ErrNotFound: the queue, partition, message, lease, dead letter or
	// stream query named does not exist.
	ErrNotFound = pgerr.ErrNotFound
	// ErrUnavailable: PostgreSQL is unreachable, or this broker is
	// stopping; the client should retry (elsewhere).
	ErrUnavailable = pgerr.ErrUnavailable
	// ErrLeaseLost: the lease named is not the group's live lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrBlocked: an earlier message of the partition failed in the same
	// batch and will be redelivered first.
	ErrBlocked = errors.New("blocked by an earlier failed message")
	// ErrStale: the cursor is already past the acknowledged message (a
	// replayed stream cycle).
	ErrStale = errors.New("already applied")
	// ErrNoCursor: the group holds no cursor on the partition.
	ErrNoCursor = errors.New("no cursor")
	// ErrConflict: the change contradicts the current state (a stream
	// query registered with another config hash, a message that is not
	// the group's next one).
	ErrConflict = errors.New("conflict")
	// ErrMaintenance: push maintenance is on and the operation cannot be
	// spooled (a dead-letter replay).
	ErrMaintenance = errors.New("push maintenance is on")
	// ErrSpoolUnavailable: the push needed the disk spool and could not
	// have it (none configured, or it cannot write); retry.
	ErrSpoolUnavailable = errors.New("spool unavailable")
)

// ErrQueueNotFound and ErrPartitionNotFound are ErrNotFound naming what is
// missing.
var (
	ErrQueueNotFound     = fmt.Errorf("queue %w", ErrNotFound)
	ErrPartitionNotFound = fmt.Errorf("partition %w", ErrNotFound)
)

// invalidError is an ErrInvalid with the message for the client.
type invalidError struct{ msg string }

func (e invalidError) Error() string { return e.msg }
func (e invalidError) Unwrap() error { return ErrInvalid }

// invalid returns an ErrInvalid whose Error is msg.
func invalid(msg string) error { return invalidError{msg} }

// spoolError is an ErrSpoolUnavailable with its reason.
type spoolError struct {
	msg string
	err error
}

func (e spoolError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e spoolError) Unwrap() []error { return []error{ErrSpoolUnavailable, e.err} }

// SpoolReason is the client-facing reason of an ErrSpoolUnavailable (the
// cause, a file system error, is for the log only).
func SpoolReason(err error) string {
	var se spoolError
	if errors.As(err, &se) {
		return se.msg
	}
	return err.Error()
}
