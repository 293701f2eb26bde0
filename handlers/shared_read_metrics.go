package handlers

import "github.com/prometheus/client_golang/prometheus"

// newSharedReadCollector exposes the autoAck claims' reads and the claims
// served from the rows another consumer group's read kept on this broker
// (handlers/broker/read_share.go) on /metrics/prometheus, read from the
// broker's counters at every scrape: served against reads plus served is
// the share of autoAck claims that read no message.
func newSharedReadCollector(s *Server) countersCollector {
	return countersCollector{
		descs: []*prometheus.Desc{
			prometheus.NewDesc("queen_pop_autoack_reads_total",
				"AutoAck claims of a partition that read its messages (one statement that reads the batch and moves the cursor).", nil, nil),
			prometheus.NewDesc("queen_pop_autoack_shared_total",
				"AutoAck claims served from the messages another consumer group's autoAck read of the partition returned on this broker a moment before: their statement only moved the cursor.", nil, nil),
			prometheus.NewDesc("queen_pop_autoack_shared_fallbacks_total",
				"AutoAck claims that tried those messages but found the group's cursor moved, locked or leased, and read after all.", nil, nil),
			prometheus.NewDesc("queen_pop_autoack_shared_waits_total",
				"AutoAck claims that waited for another consumer group's autoAck read of the partition in flight on this broker, to be served from its messages.", nil, nil),
		},
		read: func() []int64 {
			st := s.b.SharedReadStatsSnapshot()
			return []int64{st.Reads, st.Served, st.FellBack, st.Waited}
		},
	}
}
