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

// timestampLayouts are the ISO-8601 forms clients send: RFC 3339, and the
// zone-less form of Python's naive datetime.isoformat(), read as UTC.
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02",
}

// parseTimestamp reads a client timestamp; without a zone it is UTC.
func parseTimestamp(s string) (time.Time, error) {
	var err error
	for _, layout := range timestampLayouts {
		var t time.Time
		if t, err = time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// parseTimestampParam parses an optional timestamp field, answering 400
// naming the field when it is not a timestamp.
func parseTimestampParam(name string, s *string) (*time.Time, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	t, err := parseTimestamp(*s)
	if err != nil {
		return nil, invalidf("%s must be an ISO-8601 timestamp", name)
	}
	return &t, nil
}
