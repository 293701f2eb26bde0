package handlers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queenforgo/queen/gen/api"
)

// sharedStateCollector exposes the broker-to-broker transports on
// /metrics/prometheus, read from one snapshot of the stats route
// (SharedState) per scrape. queen_shared_state_enabled and queen_servers
// are the reference broker's names; the mesh and NOTIFY families are ours.
// The mesh families appear only when a mesh is configured (it may be down:
// its counters still count), so the collector is unchecked: Describe
// announces nothing and Collect decides the families.
type sharedStateCollector struct{ s *Server }

func (sharedStateCollector) Describe(chan<- *prometheus.Desc) {}

func (c sharedStateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.sharedState()
	emit := func(name, help string, kind prometheus.ValueType, v float64, labels ...string) {
		var keys, values []string
		for i := 0; i+1 < len(labels); i += 2 {
			keys, values = append(keys, labels[i]), append(values, labels[i+1])
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, keys, nil), kind, v, values...)
	}
	gauge := func(name, help string, v float64, labels ...string) {
		emit(name, help, prometheus.GaugeValue, v, labels...)
	}
	counter := func(name, help string, v int64) { emit(name, help, prometheus.CounterValue, float64(v)) }

	gauge("queen_shared_state_enabled", "1 while the mesh runs on this broker.", b2f(st.Enabled))
	if st.Transport != nil {
		collectMesh(st, emit)
	}
	n := st.Notify
	gauge("queen_notify_listening", "1 while this broker's LISTEN connection on queen_events is up.", b2f(n.Listening))
	counter("queen_notify_published_total", "NOTIFY queen_events sent by this broker (only without the mesh).", n.Published)
	counter("queen_notify_publish_errors_total", "NOTIFY statements that failed.", n.PublishErrors)
	counter("queen_notify_dropped_total", "Announcements not sent through NOTIFY: queue full or NOTIFY failed.", n.Dropped)
	counter("queen_notify_received_total", "Notifications from other brokers (or SQL) applied here.", n.Received)
	counter("queen_notify_malformed_total", "Notifications on queen_events that were not a valid event.", n.Malformed)
}

func collectMesh(st api.SharedStateStats, emit func(name, help string, kind prometheus.ValueType, v float64, labels ...string)) {
	num := func(p *int) float64 {
		if p == nil {
			return 0
		}
		return float64(*p)
	}
	num64 := func(p *int64) float64 {
		if p == nil {
			return 0
		}
		return float64(*p)
	}
	const servers = "Peers by liveness, from their inbound mesh frames."
	emit("queen_servers", servers, prometheus.GaugeValue, num(st.ServersAlive), "state", "alive")
	emit("queen_servers", servers, prometheus.GaugeValue, num(st.ServersDead), "state", "dead")
	const transport = "Mesh frames by direction: sent, received, dropped."
	emit("queen_transport_messages_total", transport, prometheus.CounterValue, num64(st.MessagesSent), "dir", "sent")
	emit("queen_transport_messages_total", transport, prometheus.CounterValue, num64(st.MessagesReceived), "dir", "received")
	emit("queen_transport_messages_total", transport, prometheus.CounterValue, num64(st.MessagesDropped), "dir", "dropped")
	emit("queen_mesh_peers", "Mesh peers configured (QUEEN_MESH_PEERS), this broker excluded.", prometheus.GaugeValue, float64(countPeers(st, false)))
	emit("queen_mesh_peers_up", "Mesh peers this broker's outbound connection is up to.", prometheus.GaugeValue, float64(countPeers(st, true)))
	if st.Frames != nil {
		const frames = "Mesh frames by type and direction: sent, received (authenticated), dropped (peer down or its queue full)."
		for t, c := range *st.Frames {
			emit("queen_mesh_frames_total", frames, prometheus.CounterValue, float64(c.Out), "type", t, "dir", "sent")
			emit("queen_mesh_frames_total", frames, prometheus.CounterValue, float64(c.In), "type", t, "dir", "received")
			emit("queen_mesh_frames_total", frames, prometheus.CounterValue, float64(c.Dropped), "type", t, "dir", "dropped")
		}
	}
	if st.AuthFailures != nil {
		for r, v := range *st.AuthFailures {
			emit("queen_mesh_auth_failures_total", "Mesh connections or frames refused, by reason.", prometheus.CounterValue, float64(v), "reason", r)
		}
	}
}

// countPeers counts the configured peers other than this broker, or those
// of them whose connection is up.
func countPeers(st api.SharedStateStats, up bool) int {
	if st.Peers == nil {
		return 0
	}
	n := 0
	for _, p := range *st.Peers {
		if !p.Self && (!up || p.Connected) {
			n++
		}
	}
	return n
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
