package handlers

import "github.com/prometheus/client_golang/prometheus"

// sharedReadCollector exposes the autoAck claims' reads and the claims
// served from the rows another consumer group's read kept on this broker
// (handlers/broker/read_share.go) on /metrics/prometheus, read from the
// broker's counters at every scrape: served against reads plus served is
// the share of autoAck claims that read no message.
type sharedReadCollector struct {
	s     *Server
	descs [4]*prometheus.Desc
}

func newSharedReadCollector(s *Server) sharedReadCollector {
	return sharedReadCollector{s: s, descs: [4]*prometheus.Desc{
		prometheus.NewDesc("queen_pop_autoack_reads_total",
			"AutoAck claims of a partition that read its messages (one statement that reads the batch and moves the cursor).", nil, nil),
		prometheus.NewDesc("queen_pop_autoack_shared_total",
			"AutoAck claims served from the messages another consumer group's autoAck read of the partition returned on this broker a moment before: their statement only moved the cursor.", nil, nil),
		prometheus.NewDesc("queen_pop_autoack_shared_fallbacks_total",
			"AutoAck claims that tried those messages but found the group's cursor moved, locked or leased, and read after all.", nil, nil),
		prometheus.NewDesc("queen_pop_autoack_shared_waits_total",
			"AutoAck claims that waited for another consumer group's autoAck read of the partition in flight on this broker, to be served from its messages.", nil, nil),
	}}
}

func (c sharedReadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c sharedReadCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.b.SharedReadStatsSnapshot()
	for i, v := range []int64{st.Reads, st.Served, st.FellBack, st.Waited} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}
