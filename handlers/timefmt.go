package handlers

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Timestamps on the wire are UTC with a literal Z: milliseconds in general,
// microseconds for popped messages (the reference formats).
const (
	timeMillis = "2006-01-02T15:04:05.000Z"
	timeMicros = "2006-01-02T15:04:05.000000Z"
)

func fmtMillis(t time.Time) string { return t.UTC().Format(timeMillis) }
func fmtMicros(t time.Time) string { return t.UTC().Format(timeMicros) }

func fmtMillisPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := fmtMillis(*t)
	return &s
}

func fmtTimestamptz(t pgtype.Timestamptz) *string {
	if !t.Valid {
		return nil
	}
	s := fmtMillis(t.Time)
	return &s
}

// parseTimestamp accepts RFC 3339 with or without fractional seconds.
func parseTimestamp(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}
