// Package pxerr is the proxy's one translator of pxdb errors into sentinels
// (the broker's is sql/pgerr, which the proxy's layering rule keeps out of
// reach). The console and the meter test its results with errors.Is and
// never look at pgx or pgconn errors themselves.
//
// The SQL functions of sql/proxy/migrations raise no_data_found for what is
// not there (or not the caller's), invalid_parameter_value for bad input and
// object_not_in_prerequisite_state for a refused state change (the
// last-admin guard).
package pxerr

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The sentinels.
var (
	ErrNotFound = errors.New("not found")      // no row, or no_data_found (P0002)
	ErrInvalid  = errors.New("invalid input")  // data exceptions, check violations, refused state changes
	ErrConflict = errors.New("already exists") // unique_violation
	// ErrPermanent marks what retrying cannot fix: the statement or its data
	// is wrong (data, integrity and syntax classes). Anything else, a
	// connection failure first, may pass.
	ErrPermanent = errors.New("refused for good")
)

// Translate joins the matching sentinels to err (nil for nil). Error() is
// PostgreSQL's own message, which the functions write for people.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &translated{[]error{ErrNotFound}, err, "not found"}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	var s []error
	switch {
	case pgErr.Code == "P0002":
		s = append(s, ErrNotFound)
	case pgErr.Code == "23505":
		s = append(s, ErrConflict)
	case pgErr.Code == "55000", pgErr.Code[:2] == "22", pgErr.Code == "23514":
		s = append(s, ErrInvalid)
	}
	switch pgErr.Code[:2] {
	case "22", "23", "42":
		s = append(s, ErrPermanent)
	}
	if len(s) == 0 {
		return err
	}
	return &translated{s, err, pgErr.Message}
}

type translated struct {
	sentinels []error
	err       error
	msg       string
}

func (e *translated) Error() string   { return e.msg }
func (e *translated) Unwrap() []error { return append(append([]error{}, e.sentinels...), e.err) }
