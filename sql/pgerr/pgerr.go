// Package pgerr is the one translator of PostgreSQL errors into the
// project's sentinels. Nothing else inspects pgx or pgconn errors: the broker
// (handlers/broker), the dashboard's read routes and the jobs call Translate
// and test the result with errors.Is.
package pgerr

import (
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The sentinels Translate joins to an error. The original error stays in the
// chain, so logs keep PostgreSQL's own message.
var (
	// ErrUnavailable: PostgreSQL could not be reached, or is shutting down.
	// Answered 503 so that clients retry and fail over.
	ErrUnavailable = errors.New("database unavailable")
	// ErrNotFound: a query that returns one row found none.
	ErrNotFound = errors.New("not found")
	// ErrForeignKey: a row points at a parent deleted meanwhile (a queue
	// deleted by another broker while this one had it cached).
	ErrForeignKey = errors.New("foreign key violation")
	// ErrLockNotAvailable: a NOWAIT lock is held by another transaction.
	ErrLockNotAvailable = errors.New("lock not available")
	// ErrInvalidInput: PostgreSQL refused a value the client sent (a data
	// exception, e.g. \u0000 inside jsonb); nothing was committed.
	ErrInvalidInput = errors.New("invalid input")
)

// Translate joins the matching sentinel to err, or returns err unchanged
// (nil for nil). Translating twice is harmless.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrUnavailable, ErrNotFound, ErrForeignKey, ErrLockNotAvailable, ErrInvalidInput} {
		if errors.Is(err, s) {
			return err
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &translated{ErrNotFound, err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23503":
			return &translated{ErrForeignKey, err}
		case pgErr.Code == "55P03":
			return &translated{ErrLockNotAvailable, err}
		case pgErr.Code[:2] == "22":
			return &invalidInput{msg: pgErr.Message, err: err}
		case pgErr.Code[:2] == "08", pgErr.Code[:2] == "57": // connection exception, operator intervention (shutdown)
			return &translated{ErrUnavailable, err}
		case pgErr.Code == "25006":
			// read_only_sql_transaction: the server was a primary and is a
			// standby now (a failover demoted it). The pool drops that
			// connection (cmd/queen/pgpool.go); the request is answered as
			// if PostgreSQL were down, so a push goes to the spool.
			return &translated{ErrUnavailable, err}
		}
		return err
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	// pgconn reports a server socket that died mid-statement (a killed
	// postmaster) as io.ErrUnexpectedEOF or io.EOF.
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || errors.Is(err, pgx.ErrTxClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &translated{ErrUnavailable, err}
	}
	return err
}

// translated is err with its sentinel; it reads as err.
type translated struct {
	sentinel, err error
}

func (e *translated) Error() string   { return e.err.Error() }
func (e *translated) Unwrap() []error { return []error{e.sentinel, e.err} }

// invalidInput keeps PostgreSQL's reason, which names what was refused.
type invalidInput struct {
	msg string
	err error
}

func (e *invalidInput) Error() string   { return "invalid value: " + e.msg }
func (e *invalidInput) Unwrap() []error { return []error{ErrInvalidInput, e.err} }
