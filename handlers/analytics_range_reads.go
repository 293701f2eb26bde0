package handlers

import (
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/planmode"
)

// aq is the queries of the admin reads, planned with their arguments at
// every execution: their optional filters make PostgreSQL's generic plans
// for prepared statements far slower (see handlers/planmode).
func (s *Server) aq() *db.Queries { return db.New(planmode.Custom(s.pool)) }

// rq is the queries of the read routes with fixed arguments.
func (s *Server) rq() *db.Queries { return db.New(s.pool) }

// The time-series routes read the per-minute rows of the metrics collector
// (handlers/jobs) and fold them into buckets whose width follows the range,
// as the reference broker does.

// timeBucket renders a bucket key: second precision, fixed width, so the
// dashboard can compare keys as strings.
const timeBucket = "2006-01-02T15:04:05Z"

func fmtBucket(t time.Time) string { return t.UTC().Format(timeBucket) }

// maxAnalyticsRange bounds the window of a time-series request.
const maxAnalyticsRange = 400 * 24 * time.Hour

// seriesRange is a validated from/to window with its bucket width.
type seriesRange struct {
	from, to      time.Time
	bucketMinutes int
}

// newSeriesRange reads from/to (defaults: the window def ending now).
func newSeriesRange(from, to *string, def time.Duration) (seriesRange, error) {
	f, err := parseTimestampParam("from", from)
	if err != nil {
		return seriesRange{}, err
	}
	t, err := parseTimestampParam("to", to)
	if err != nil {
		return seriesRange{}, err
	}
	r := seriesRange{to: time.Now().UTC()}
	if t != nil {
		r.to = t.UTC()
	}
	r.from = r.to.Add(-def)
	if f != nil {
		r.from = f.UTC()
	}
	if r.from.After(r.to) {
		return seriesRange{}, invalidf("from must not be after to")
	}
	if r.to.Sub(r.from) > maxAnalyticsRange {
		return seriesRange{}, invalidf("the time range is limited to 400 days")
	}
	r.bucketMinutes = bucketMinutesFor(r.to.Sub(r.from))
	return r, nil
}

// bucketMinutesFor is the reference's rule: up to 1 hour, 1 minute; up to 6
// hours, 5; up to 24 hours, 15; up to 7 days, 60; beyond, 360.
func bucketMinutesFor(d time.Duration) int {
	switch {
	case d <= time.Hour:
		return 1
	case d <= 6*time.Hour:
		return 5
	case d <= 24*time.Hour:
		return 15
	case d <= 7*24*time.Hour:
		return 60
	}
	return 360
}

func (r seriesRange) bucketSeconds() int32 { return int32(r.bucketMinutes * 60) }

// fromTime is the start of the first bucket, so that it is complete.
func (r seriesRange) fromTime() pgtype.Timestamptz {
	w := time.Duration(r.bucketMinutes) * time.Minute
	return pgtype.Timestamptz{Time: r.from.Truncate(w), Valid: true}
}

func (r seriesRange) toTime() pgtype.Timestamptz { return pgtype.Timestamptz{Time: r.to, Valid: true} }

func (r seriesRange) wire() api.TimeRange {
	return api.TimeRange{From: fmtMillis(r.from), To: fmtMillis(r.to)}
}

// perSecond is n over a bucket, with 2 decimals.
func (r seriesRange) perSecond(n int64) float64 {
	return round2(float64(n) / float64(r.bucketMinutes*60))
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// avgLag is a message-weighted average lag, 2 decimals.
func avgLag(sum, count int64) float64 {
	if count == 0 {
		return 0
	}
	return round2(float64(sum) / float64(count))
}
