package handlers

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// sharedStateFunc is a SharedState from a function (cmd/queen's is built
// over the mesh and NOTIFY; their own tests are in mesh and pgevents).
type sharedStateFunc func() api.SharedStateStats

func (f sharedStateFunc) SharedStateStats() api.SharedStateStats { return f() }

// MESH-6: without a mesh the route says so (enabled false, reason
// no_peers) with both switches as this broker applies them; the alias
// answers the same.
func TestSharedStateStatsWithoutMesh(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{config: func(c *testConfig) { c.ServerID = "broker-x" }})
	b.srv.b.ApplyPopMaintenance(true)
	for _, path := range []string{"/internal/api/shared-state/stats", "/internal/api/inter-instance/stats"} {
		var st map[string]any
		b.doJSON("GET", path, nil, http.StatusOK, &st)
		require.Equal(t, false, st["enabled"], path)
		require.Equal(t, "no_peers", st["reason"], path)
		require.Equal(t, "broker-x", st["server_id"], path)
		require.Equal(t, false, st["maintenance_mode"], path)
		require.Equal(t, true, st["pop_maintenance_mode"], path)
		require.NotContains(t, st, "peers", path)
	}
	fams := b.scrape()
	require.Zero(t, value(t, fams, "queen_shared_state_enabled"))
	require.NotContains(t, fams, "queen_mesh_frames_total", "no mesh, no mesh families")
	require.Contains(t, fams, "queen_notify_received_total")
}

// The route and the Prometheus families read one snapshot of the
// transports: every counter reaches both.
func TestSharedStateStatsAndFamilies(t *testing.T) {
	t.Parallel()
	snap := api.SharedStateStats{
		Enabled: true, ServerId: "a", Transport: ptr(api.TcpMesh), Running: ptr(true), Port: ptr(6633), Auth: ptr(api.Hmac),
		PeerCount: ptr(3), PeersConnected: ptr(1),
		Peers: &[]api.MeshPeer{
			{Host: "10.0.0.1", Port: 6633, Self: true},
			{Host: "10.0.0.2", Port: 6633, Connected: true, Resolved: true, ResolvedIp: ptr("10.0.0.2")},
			{Host: "10.0.0.3", Port: 6633, MessagesDropped: 7},
		},
		ServersAlive: ptr(1), ServersDead: ptr(1),
		Servers:      &[]api.MeshServer{{ServerId: "b", Alive: true}, {ServerId: "c", LastSeenAgoMs: 9000}},
		MessagesSent: ptr(int64(11)), MessagesReceived: ptr(int64(5)), MessagesDropped: ptr(int64(7)),
		AuthFailures: &map[string]int64{"bad_mac": 2, "timeout": 0},
		Frames:       &map[string]api.MeshFrameCounts{"MESSAGE_AVAILABLE": {In: 4, Out: 10, Dropped: 7}},
		Notify:       api.NotifyStats{Channel: "queen_events", Listening: true, Received: 3, Malformed: 1},
	}
	b := setup(t, setupOpts{config: func(c *testConfig) {
		c.SharedState = sharedStateFunc(func() api.SharedStateStats { return snap })
	}})
	b.srv.b.ApplyPushMaintenance(true)
	var st api.SharedStateStats
	b.doJSON("GET", "/internal/api/shared-state/stats", nil, http.StatusOK, &st)
	want := snap
	want.MaintenanceMode = true
	require.Equal(t, want, st)

	fams := b.scrape()
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"queen_shared_state_enabled", nil, 1},
		{"queen_servers", []string{"state", "alive"}, 1},
		{"queen_servers", []string{"state", "dead"}, 1},
		{"queen_transport_messages_total", []string{"dir", "sent"}, 11},
		{"queen_transport_messages_total", []string{"dir", "received"}, 5},
		{"queen_transport_messages_total", []string{"dir", "dropped"}, 7},
		{"queen_mesh_peers", nil, 2},
		{"queen_mesh_peers_up", nil, 1},
		{"queen_mesh_frames_total", []string{"type", "MESSAGE_AVAILABLE", "dir", "sent"}, 10},
		{"queen_mesh_frames_total", []string{"type", "MESSAGE_AVAILABLE", "dir", "received"}, 4},
		{"queen_mesh_frames_total", []string{"type", "MESSAGE_AVAILABLE", "dir", "dropped"}, 7},
		{"queen_mesh_auth_failures_total", []string{"reason", "bad_mac"}, 2},
		{"queen_mesh_auth_failures_total", []string{"reason", "timeout"}, 0},
		{"queen_notify_listening", nil, 1},
		{"queen_notify_received_total", nil, 3},
		{"queen_notify_malformed_total", nil, 1},
		{"queen_notify_published_total", nil, 0},
		{"queen_maintenance_mode_enabled", nil, 1},
	} {
		require.Equal(t, c.want, value(t, fams, c.family, c.labels...), "%s %v", c.family, c.labels)
	}
}
