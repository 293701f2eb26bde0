package handlers

import "github.com/prometheus/client_golang/prometheus"

// countersCollector exposes a fixed list of the broker's counters on
// /metrics/prometheus, read at every scrape: read returns the values in the
// order of descs.
type countersCollector struct {
	descs []*prometheus.Desc
	read  func() []int64
}

func (c countersCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c countersCollector) Collect(ch chan<- prometheus.Metric) {
	for i, v := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}
