package exposition

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Timings holds the data plane's histograms: push, pop and ack latency, and
// the size and duration of group-commit flushes. It implements the broker's
// Timings interface (handlers/broker records into it without importing
// client_golang) and prometheus.Collector (main registers it through
// Config.Collectors). Observing is a few atomic adds.
type Timings struct {
	push, ack     prometheus.Histogram
	pop           *prometheus.HistogramVec
	popMessages   prometheus.Observer
	popEmpty      prometheus.Observer
	flushItems    *prometheus.HistogramVec
	flushDuration *prometheus.HistogramVec
}

// latencyBuckets spans a pop served from memory-warm pages (well under a
// millisecond) to a push waiting out a failover.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// flushBuckets spans one request alone up to QUEEN_PUSH_MAX_BATCH's
// default (2000) and past it.
var flushBuckets = []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000}

// NewTimings builds the histograms, empty.
func NewTimings() *Timings {
	t := &Timings{
		push: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queen_push_duration_seconds",
			Help:    "Time of a push in the data plane, until its items are committed (group commit included) or spooled.",
			Buckets: latencyBuckets,
		}),
		pop: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queen_pop_duration_seconds",
			Help:    "Time of one look at the database by a pop (claim and read), by whether it delivered messages; a long-poll's time parked between looks is not included.",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		ack: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queen_ack_duration_seconds",
			Help:    "Time of an ack or batch ack in the data plane, until committed (group commit included).",
			Buckets: latencyBuckets,
		}),
		flushItems: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queen_group_commit_flush_items",
			Help:    "Items (messages or acknowledgements) committed together by one group-commit flush, by kind.",
			Buckets: flushBuckets,
		}, []string{"kind"}),
		flushDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queen_group_commit_flush_duration_seconds",
			Help:    "Time of one group-commit flush, one-by-one retries after a failed shared commit included, by kind.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
	}
	t.popMessages = t.pop.WithLabelValues("messages")
	t.popEmpty = t.pop.WithLabelValues("empty")
	return t
}

// Push implements broker.Timings.
func (t *Timings) Push(d time.Duration) { t.push.Observe(d.Seconds()) }

// Pop implements broker.Timings.
func (t *Timings) Pop(d time.Duration, delivered bool) {
	if delivered {
		t.popMessages.Observe(d.Seconds())
		return
	}
	t.popEmpty.Observe(d.Seconds())
}

// Ack implements broker.Timings.
func (t *Timings) Ack(d time.Duration) { t.ack.Observe(d.Seconds()) }

// Flush implements broker.Timings.
func (t *Timings) Flush(kind string, items int, d time.Duration) {
	t.flushItems.WithLabelValues(kind).Observe(float64(items))
	t.flushDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (t *Timings) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range t.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (t *Timings) Collect(ch chan<- prometheus.Metric) {
	for _, c := range t.collectors() {
		c.Collect(ch)
	}
}

func (t *Timings) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.push, t.pop, t.ack, t.flushItems, t.flushDuration}
}
