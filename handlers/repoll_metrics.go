package handlers

import "github.com/prometheus/client_golang/prometheus"

// newRepollCollector exposes the shared re-poll of parked long-polls
// (handlers/broker/repoll.go, docs/architecture.md on QUEEN_POP_REPOLL_MS) on
// /metrics/prometheus, read from the broker's counters at every scrape.
// statements against keys tells how many parked keys one look serves;
// skipped counts the long-polls that cost no statement at all.
func newRepollCollector(s *Server) countersCollector {
	return countersCollector{
		descs: []*prometheus.Desc{
			prometheus.NewDesc("queen_pop_repoll_statements_total",
				"Statements run by the shared re-poll of parked long-polls (one per interval and up to 1000 parked keys).", nil, nil),
			prometheus.NewDesc("queen_pop_repoll_keys_total",
				"Parked keys (a queue or namespace/task, partition and consumer group) the shared re-poll looked at.", nil, nil),
			prometheus.NewDesc("queen_pop_repoll_woken_total",
				"Parked keys the shared re-poll found claimable; their parked long-polls were woken.", nil, nil),
			prometheus.NewDesc("queen_pop_repoll_skipped_total",
				"Long-polls that parked without their own first look, because a look had just found their key empty.", nil, nil),
		},
		read: func() []int64 {
			st := s.b.RepollStatsSnapshot()
			return []int64{st.Statements, st.Keys, st.Woken, st.Skipped}
		},
	}
}
