package handlers

import (
	"slices"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/metrics"
)

// writeSharedStateFamilies writes the Prometheus families of the
// broker-to-broker transports from one snapshot of the stats route
// (SharedState). The first three are the reference broker's names; the
// mesh and NOTIFY families are ours. Mesh families are written only when a
// mesh is configured (it may be down: its counters still count).
func writeSharedStateFamilies(e *metrics.Exposition, st api.SharedStateStats) {
	gauge := func(name, help string, v float64, labels ...string) {
		e.Family(name, "gauge", help)
		e.Sample(name, v, labels...)
	}
	counter := func(name, help string, v int64) {
		e.Family(name, "counter", help)
		e.Sample(name, float64(v))
	}
	gauge("queen_shared_state_enabled", "1 while the mesh runs on this broker.", b2f(st.Enabled))
	if st.Transport != nil {
		writeMeshFamilies(e, st)
	}
	n := st.Notify
	gauge("queen_notify_listening", "1 while this broker's LISTEN connection on queen_events is up.", b2f(n.Listening))
	counter("queen_notify_published_total", "NOTIFY queen_events sent by this broker (only without the mesh).", n.Published)
	counter("queen_notify_publish_errors_total", "NOTIFY statements that failed.", n.PublishErrors)
	counter("queen_notify_dropped_total", "Announcements not sent through NOTIFY: queue full or NOTIFY failed.", n.Dropped)
	counter("queen_notify_received_total", "Notifications from other brokers (or SQL) applied here.", n.Received)
	counter("queen_notify_malformed_total", "Notifications on queen_events that were not a valid event.", n.Malformed)
}

func writeMeshFamilies(e *metrics.Exposition, st api.SharedStateStats) {
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
	e.Family("queen_servers", "gauge", "Peers by liveness, from their inbound mesh frames.")
	e.Sample("queen_servers", num(st.ServersAlive), "state", "alive")
	e.Sample("queen_servers", num(st.ServersDead), "state", "dead")
	e.Family("queen_transport_messages_total", "counter", "Mesh frames by direction: sent, received, dropped.")
	e.Sample("queen_transport_messages_total", num64(st.MessagesSent), "dir", "sent")
	e.Sample("queen_transport_messages_total", num64(st.MessagesReceived), "dir", "received")
	e.Sample("queen_transport_messages_total", num64(st.MessagesDropped), "dir", "dropped")

	e.Family("queen_mesh_peers", "gauge", "Mesh peers configured (QUEEN_MESH_PEERS), this broker excluded.")
	e.Sample("queen_mesh_peers", float64(countPeers(st, false)))
	e.Family("queen_mesh_peers_up", "gauge", "Mesh peers this broker's outbound connection is up to.")
	e.Sample("queen_mesh_peers_up", float64(countPeers(st, true)))
	e.Family("queen_mesh_frames_total", "counter", "Mesh frames by type and direction: sent, received (authenticated), dropped (peer down or its queue full).")
	if st.Frames != nil {
		frames := *st.Frames
		for _, t := range sortedKeys(frames) {
			c := frames[t]
			e.Sample("queen_mesh_frames_total", float64(c.Out), "type", t, "dir", "sent")
			e.Sample("queen_mesh_frames_total", float64(c.In), "type", t, "dir", "received")
			e.Sample("queen_mesh_frames_total", float64(c.Dropped), "type", t, "dir", "dropped")
		}
	}
	e.Family("queen_mesh_auth_failures_total", "counter", "Mesh connections or frames refused, by reason.")
	if st.AuthFailures != nil {
		for _, r := range sortedKeys(*st.AuthFailures) {
			e.Sample("queen_mesh_auth_failures_total", float64((*st.AuthFailures)[r]), "reason", r)
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
