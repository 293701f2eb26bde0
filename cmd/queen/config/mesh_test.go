package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const syncSecret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestLoadMesh(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want func(*Mesh) // edits MeshDefault() into the expected value
	}{
		{name: "defaults", env: nil, want: func(*Mesh) {}},
		{name: "every peer form", env: map[string]string{
			"QUEEN_MESH_PEERS": " a, b:7000 ,http://c:7001/, HTTPS://D.example,, [::1]:7002, ::2, [fe80::1], a,queen-1.queen.svc_x:6633",
		}, want: func(m *Mesh) {
			m.Peers = []string{"a:6633", "b:7000", "c:7001", "D.example:6633", "[::1]:7002", "[::2]:6633", "[fe80::1]:6633", "queen-1.queen.svc_x:6633"}
		}},
		{name: "bare hosts take the mesh port", env: map[string]string{"QUEEN_MESH_PEERS": "a,b", "QUEEN_MESH_PORT": "7100"},
			want: func(m *Mesh) { m.Peers, m.Port = []string{"a:7100", "b:7100"}, 7100 }},
		{name: "legacy names", env: map[string]string{"QUEEN_UDP_PEERS": "a", "QUEEN_UDP_NOTIFY_PORT": "7200"},
			want: func(m *Mesh) { m.Peers, m.Port = []string{"a:7200"}, 7200 }},
		{name: "both names agreeing", env: map[string]string{"QUEEN_UDP_PEERS": "a", "QUEEN_MESH_PEERS": " a "},
			want: func(m *Mesh) { m.Peers = []string{"a:6633"} }},
		{name: "blank new name uses the legacy one", env: map[string]string{"QUEEN_UDP_PEERS": "a", "QUEEN_MESH_PEERS": ""},
			want: func(m *Mesh) { m.Peers = []string{"a:6633"} }},
		{name: "bind follows QUEEN_BIND_ADDR", env: map[string]string{"QUEEN_BIND_ADDR": "127.0.0.1"},
			want: func(m *Mesh) { m.BindAddr = netip.MustParseAddr("127.0.0.1") }},
		{name: "own bind", env: map[string]string{"QUEEN_BIND_ADDR": "127.0.0.1", "QUEEN_MESH_BIND_ADDR": "[::]"},
			want: func(m *Mesh) { m.BindAddr = netip.MustParseAddr("::") }},
		{name: "secret trimmed", env: map[string]string{"QUEEN_SYNC_SECRET": syncSecret + "\n"},
			want: func(m *Mesh) { m.Secret = syncSecret }},
		{name: "empty secret is open mode", env: map[string]string{"QUEEN_SYNC_SECRET": ""}, want: func(*Mesh) {}},
		{name: "timings", env: map[string]string{"QUEEN_SYNC_HEARTBEAT_MS": "100", "QUEEN_SYNC_DEAD_THRESHOLD_MS": "200"},
			want: func(m *Mesh) { m.Heartbeat, m.DeadThreshold = 100*time.Millisecond, 200*time.Millisecond }},
		{name: "disabled", env: map[string]string{"QUEEN_SYNC_ENABLED": "off", "QUEEN_MESH_PEERS": "a"},
			want: func(m *Mesh) { m.Enabled, m.Peers = false, []string{"a:6633"} }},
		{name: "advertise host name", env: map[string]string{"QUEEN_MESH_ADVERTISE_HOST": "queen-0.queen.default.svc"},
			want: func(m *Mesh) { m.AdvertiseHost = "queen-0.queen.default.svc" }},
		{name: "advertise IPv6", env: map[string]string{"QUEEN_MESH_ADVERTISE_HOST": "[fd00::5]"},
			want: func(m *Mesh) { m.AdvertiseHost = "fd00::5" }},
		{name: "cache refresh", env: map[string]string{"QUEEN_CACHE_REFRESH_INTERVAL_MS": "60000"},
			want: func(m *Mesh) { m.CacheRefresh = time.Minute }},
		{name: "server id", env: map[string]string{"QUEEN_SERVER_ID": " queen-a "},
			want: func(m *Mesh) { m.ServerID = "queen-a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(tt.env))
			require.NoError(t, err)
			want := MeshDefault()
			if b, ok := tt.env["QUEEN_BIND_ADDR"]; ok {
				want.BindAddr = netip.MustParseAddr(b)
			}
			tt.want(&want)
			require.Equal(t, want, c.Mesh)
		})
	}
}

func TestLoadMeshProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string // the one problem line
	}{
		{name: "non-numeric port", env: map[string]string{"QUEEN_MESH_PEERS": "a,b:abc"},
			want: `QUEEN_MESH_PEERS: entry "b:abc": port "abc" is not a port number (1-65535)`},
		{name: "port zero", env: map[string]string{"QUEEN_MESH_PEERS": "b:0"},
			want: `QUEEN_MESH_PEERS: entry "b:0": port "0" is not a port number (1-65535)`},
		{name: "missing port", env: map[string]string{"QUEEN_MESH_PEERS": "b:"},
			want: `QUEEN_MESH_PEERS: entry "b:": the port after the colon is missing`},
		{name: "path", env: map[string]string{"QUEEN_MESH_PEERS": "http://b:1/mesh"},
			want: `QUEEN_MESH_PEERS: entry "http://b:1/mesh": give host or host:port, not a URL with a path or user`},
		{name: "user", env: map[string]string{"QUEEN_MESH_PEERS": "me@b"},
			want: `QUEEN_MESH_PEERS: entry "me@b": give host or host:port, not a URL with a path or user`},
		{name: "space in host", env: map[string]string{"QUEEN_MESH_PEERS": "a b"},
			want: `QUEEN_MESH_PEERS: entry "a b": "a b" is not a host name or IP address`},
		{name: "torn bracket", env: map[string]string{"QUEEN_MESH_PEERS": "[::1"},
			want: `QUEEN_MESH_PEERS: entry "[::1": malformed bracketed IPv6 address`},
		{name: "brackets around a name", env: map[string]string{"QUEEN_MESH_PEERS": "[a]:1"},
			want: `QUEEN_MESH_PEERS: entry "[a]:1": "a" is not an IPv6 address`},
		{name: "too many colons", env: map[string]string{"QUEEN_MESH_PEERS": "a:1:2"},
			want: `QUEEN_MESH_PEERS: entry "a:1:2": not host:port (write an IPv6 address with a port as [address]:port)`},
		{name: "legacy disagrees", env: map[string]string{"QUEEN_MESH_PEERS": "a", "QUEEN_UDP_PEERS": "b"},
			want: `QUEEN_UDP_PEERS: is the legacy name of QUEEN_MESH_PEERS and disagrees with it; unset one of them`},
		{name: "legacy port bad", env: map[string]string{"QUEEN_UDP_NOTIFY_PORT": "x"},
			want: `QUEEN_UDP_NOTIFY_PORT: "x" is not a port number (1-65535)`},
		{name: "mesh port", env: map[string]string{"QUEEN_MESH_PORT": "70000"},
			want: `QUEEN_MESH_PORT: "70000" is not a port number (1-65535)`},
		{name: "bind with port", env: map[string]string{"QUEEN_MESH_BIND_ADDR": "0.0.0.0:7000"},
			want: `QUEEN_MESH_BIND_ADDR: "0.0.0.0:7000" carries a port; give the host only and set the port with QUEEN_MESH_PORT`},
		{name: "bind empty", env: map[string]string{"QUEEN_BIND_ADDR": "127.0.0.1", "QUEEN_MESH_BIND_ADDR": " "},
			want: `QUEEN_MESH_BIND_ADDR: is set to the empty string (unset it for the default 127.0.0.1)`},
		{name: "short secret", env: map[string]string{"QUEEN_SYNC_SECRET": "hunter2"},
			want: `QUEEN_SYNC_SECRET: is 7 bytes long; use at least 32 (for example: openssl rand -hex 32)`},
		{name: "bad boolean", env: map[string]string{"QUEEN_SYNC_ENABLED": "maybe"},
			want: `QUEEN_SYNC_ENABLED: "maybe" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{name: "zero heartbeat", env: map[string]string{"QUEEN_SYNC_HEARTBEAT_MS": "0"},
			want: `QUEEN_SYNC_HEARTBEAT_MS: "0" is out of range (1-86400000)`},
		{name: "threshold too close", env: map[string]string{"QUEEN_SYNC_HEARTBEAT_MS": "1000", "QUEEN_SYNC_DEAD_THRESHOLD_MS": "1500"},
			want: `QUEEN_SYNC_DEAD_THRESHOLD_MS: 1500 must be at least twice QUEEN_SYNC_HEARTBEAT_MS (1000), or peers flap between up and down`},
		{name: "advertise with port", env: map[string]string{"QUEEN_MESH_ADVERTISE_HOST": "node:6632"},
			want: `QUEEN_MESH_ADVERTISE_HOST: "node:6632" carries a port; give the host only (the HTTP port is PORT)`},
		{name: "advertise URL", env: map[string]string{"QUEEN_MESH_ADVERTISE_HOST": "http://node"},
			want: `QUEEN_MESH_ADVERTISE_HOST: "http://node" is not a host name or IP address`},
		{name: "cache refresh too short", env: map[string]string{"QUEEN_CACHE_REFRESH_INTERVAL_MS": "10"},
			want: `QUEEN_CACHE_REFRESH_INTERVAL_MS: "10" is out of range (100-86400000)`},
		{name: "server id with space", env: map[string]string{"QUEEN_SERVER_ID": "queen a"},
			want: `QUEEN_SERVER_ID: "queen a" must be at most 128 printable characters without spaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(env(tt.env))
			require.Equal(t, []string{tt.want}, problems(err))
		})
	}
}

func TestMeshSummaryHidesSecret(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"QUEEN_SYNC_SECRET": syncSecret, "QUEEN_MESH_PEERS": "a,b:7000", "QUEEN_BIND_ADDR": "::1"}))
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprint(c.Summary()), syncSecret)
	attrs := map[string]string{}
	for _, a := range c.Summary()["sync"] {
		attrs[a.Key] = a.Value.String()
	}
	require.Equal(t, "<set:64 chars>", attrs["secret"])
	require.Equal(t, "hmac", attrs["auth"])
	require.Equal(t, "true", attrs["active"])
	require.Equal(t, "a:6633,b:7000", attrs["peers"])
	require.Equal(t, "[::1]:6633", attrs["mesh_bind"])

	_, err = Load(env(map[string]string{"QUEEN_SYNC_SECRET": "short-secret-value"}))
	require.NotContains(t, err.Error(), "short-secret-value")

	def, err := Load(env(nil))
	require.NoError(t, err)
	require.False(t, def.Mesh.Active())
	require.Equal(t, "off", def.Mesh.Auth())
	require.Equal(t, "0.0.0.0:6633", def.Mesh.ListenAddr())
}

// FuzzParsePeers: whatever the list, the parser never panics, and what it
// accepts is a list of distinct host:port entries with a valid port that
// parses again to itself. Seeds in testdata/fuzz/FuzzParsePeers.
func FuzzParsePeers(f *testing.F) {
	f.Add("a, b:7000 ,http://c:7001/, [::1]:7002, ::2")
	f.Add("HTTPS://x.example/,,")
	f.Add("[::1, a:b:c, @, http://")
	f.Add("[fe80::1%eth0]:1, 1.2.3.4:65535")
	f.Fuzz(func(t *testing.T, v string) {
		peers, err := parsePeers(v, 6633)
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
			return
		}
		seen := map[string]bool{}
		for _, p := range peers {
			require.False(t, seen[p], "duplicate %q", p)
			seen[p] = true
			host, port, err := net.SplitHostPort(p)
			require.NoError(t, err, p)
			n, err := strconv.Atoi(port)
			require.NoError(t, err)
			require.True(t, n >= 1 && n <= 65535)
			require.True(t, validIP(host) || validHostName(host), host)
			require.False(t, strings.ContainsAny(p, ", \t\n/"), p)
		}
		again, err := parsePeers(strings.Join(peers, ","), 1)
		require.NoError(t, err)
		require.Equal(t, peers, again)
	})
}
