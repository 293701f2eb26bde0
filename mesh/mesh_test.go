package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	testTenant = "3f0e0f6e-8d2b-4d0c-9a43-6c1b8a9e2b10"
	testSecret = "test-secret-0123456789abcdef0123456789"
	waitFor    = 10 * time.Second
	tick       = 5 * time.Millisecond
)

// logCounter is a slog.Handler that counts messages per peer_server_id (or
// per message when there is none), so tests can check "logged once".
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newLogCounter() *logCounter { return &logCounter{counts: map[string]int{}} }

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "peer_server_id" {
			key += " " + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.counts[key]++
	l.mu.Unlock()
	return nil
}

func (l *logCounter) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[key]
}

type node struct {
	m    *Mesh
	rec  *recorder
	logs *logCounter
	cfg  Config
}

// freeAddr finds a free port on a loopback address.
func freeAddr(t testing.TB, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// testConfig is a configuration with short timings, so that the tests
// see reconnects and deaths quickly.
func testConfig(id, addr string, peers []string, secret string) Config {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return Config{
		ServerID: id, BindAddr: host, Port: p, Peers: peers, Secret: secret, HTTPPort: 6632,
		AdvertiseHost: id, Heartbeat: 20 * time.Millisecond, DeadThreshold: 500 * time.Millisecond,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, HandshakeTimeout: 5 * time.Second,
	}
}

func startNode(t testing.TB, cfg Config) *node {
	t.Helper()
	n := &node{rec: &recorder{}, logs: newLogCounter(), cfg: cfg}
	cfg.Logger = slog.New(n.logs)
	n.m = mustNew(t, cfg)
	require.NoError(t, n.m.Start(context.Background(), n.rec))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, n.m.Stop(ctx))
	})
	return n
}

// cluster starts n meshes on 127.0.0.2, 127.0.0.3, ... that all know each other.
func cluster(t testing.TB, n int, secret string) []*node {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = freeAddr(t, fmt.Sprintf("127.0.0.%d", i+2))
	}
	nodes := make([]*node, n)
	for i := range nodes {
		var peers []string
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		nodes[i] = startNode(t, testConfig(string(rune('a'+i)), addrs[i], peers, secret))
	}
	waitConnected(t, nodes...)
	return nodes
}

// waitConnected waits until every node has all its outbound connections up
// and has heard from every peer.
func waitConnected(t testing.TB, nodes ...*node) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			s := n.m.Stats()
			if s.PeersConnected != len(n.cfg.Peers) || s.ServersAlive != len(n.cfg.Peers) {
				return false
			}
		}
		return true
	}, waitFor, tick)
}

func TestMeshDeliversEveryFrame(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"", testSecret} {
		t.Run("auth="+map[bool]string{true: AuthOff, false: AuthHMAC}[secret == ""], func(t *testing.T) {
			t.Parallel()
			nodes := cluster(t, 3, secret)
			a, b, c := nodes[0], nodes[1], nodes[2]

			a.m.QueuesReady(testTenant, []string{"orders", "billing"})
			a.m.QueuesReady("", []string{"default-queue"})
			a.m.QueueConfigChanged(testTenant, "orders", false)
			a.m.QueueConfigChanged(testTenant, "gone", true)
			a.m.MaintenanceChanged(true, false)
			b.m.QueuesReady(testTenant, []string{"from-b"})

			for _, n := range []*node{b, c} {
				require.Eventually(t, func() bool {
					return n.rec.readyQueues(testTenant)["orders"] && n.rec.readyQueues(testTenant)["billing"] &&
						n.rec.readyQueues(DefaultTenant)["default-queue"] &&
						n.rec.has(event{kind: "config", tenant: testTenant, queues: []string{"orders"}}) &&
						n.rec.has(event{kind: "config", tenant: testTenant, queues: []string{"gone"}, deleted: true}) &&
						n.rec.has(event{kind: "push", enabled: true}) &&
						n.rec.has(event{kind: "pop", enabled: false})
				}, waitFor, tick, n.cfg.ServerID)
			}
			for _, n := range []*node{a, c} {
				require.Eventually(t, func() bool { return n.rec.readyQueues(testTenant)["from-b"] }, waitFor, tick)
			}
			require.False(t, a.rec.readyQueues(testTenant)["orders"], "a broker does not hear itself")
			require.False(t, b.rec.readyQueues(testTenant)["from-b"], "a broker does not hear itself")

			s := b.m.Stats()
			require.Equal(t, "tcp-mesh", s.Transport)
			require.Equal(t, map[bool]string{true: AuthOff, false: AuthHMAC}[secret == ""], s.Auth)
			require.True(t, s.Running)
			require.Equal(t, 2, s.PeerCount)
			require.Equal(t, 2, s.ServersAlive)
			require.Zero(t, s.ServersDead)
			require.Zero(t, s.HandshakeFailures)
			require.Zero(t, s.SignatureFailures)
			require.GreaterOrEqual(t, s.Frames["MESSAGE_AVAILABLE"].In, uint64(2))
			require.GreaterOrEqual(t, s.Frames["QUEUE_CONFIG_DELETE"].In, uint64(1))
			require.GreaterOrEqual(t, s.Frames["MAINTENANCE_MODE_SET"].In, uint64(1))
			require.GreaterOrEqual(t, s.Frames["POP_MAINTENANCE_MODE_SET"].In, uint64(1))
			require.GreaterOrEqual(t, a.m.Stats().Frames["MESSAGE_AVAILABLE"].Out, uint64(4), "two peers, two tenants")
			require.Equal(t, []string{"http://a:6632", "http://c:6632"}, []string{s.Servers[0].HTTPAddr, s.Servers[1].HTTPAddr})
			for _, p := range s.Peers {
				require.True(t, p.Connected)
				require.NotNil(t, p.ResolvedIP)
			}
		})
	}
}

// Announcements within the window share frames; the first one after a
// quiet spell does not wait.
func TestMeshCoalescesReadyQueues(t *testing.T) {
	t.Parallel()
	addrA, addrB := freeAddr(t, "127.0.0.2"), freeAddr(t, "127.0.0.3")
	cfgA := testConfig("a", addrA, []string{addrB}, testSecret)
	cfgA.Coalesce = 200 * time.Millisecond
	a := startNode(t, cfgA)
	b := startNode(t, testConfig("b", addrB, []string{addrA}, testSecret))
	waitConnected(t, a, b)

	const calls = 500
	for i := range calls {
		a.m.QueuesReady(testTenant, []string{fmt.Sprintf("q%03d", i), "shared"})
	}
	require.Eventually(t, func() bool { return len(b.rec.readyQueues(testTenant)) == calls+1 }, waitFor, tick)
	require.Less(t, framesIn(b.m, FrameMessageAvailable), uint64(calls/10))
}

// A peer list shared by every broker names each broker itself too: the
// handshake recognises it and the entry is left alone.
func TestMeshSkipsItselfInPeerList(t *testing.T) {
	t.Parallel()
	addrA, addrB := freeAddr(t, "127.0.0.2"), freeAddr(t, "127.0.0.3")
	all := []string{addrA, addrB}
	a := startNode(t, testConfig("a", addrA, all, testSecret))
	b := startNode(t, testConfig("b", addrB, all, testSecret))
	for _, n := range []*node{a, b} {
		require.Eventually(t, func() bool {
			s := n.m.Stats()
			return s.PeersConnected == 1 && (s.Peers[0].Self || s.Peers[1].Self) && s.ServersAlive == 1
		}, waitFor, tick)
	}
	a.m.QueuesReady(testTenant, []string{"q"})
	require.Eventually(t, func() bool { return b.rec.readyQueues(testTenant)["q"] }, waitFor, tick)
	require.Zero(t, a.m.Stats().HandshakeFailures)
}

func TestMeshLifecycle(t *testing.T) {
	t.Parallel()
	m := mustNew(t, Config{ServerID: "x", BindAddr: "127.0.0.1", Peers: []string{"127.0.0.1:1"}})
	require.NoError(t, m.Stop(context.Background()), "Stop without Start")
	require.Error(t, m.Start(context.Background(), &recorder{}), "no Start after Stop")
	m.QueuesReady(testTenant, []string{"q"}) // a no-op, not a panic

	m = mustNew(t, Config{ServerID: "x", BindAddr: "127.0.0.1"})
	require.Nil(t, m.Addr())
	require.Error(t, m.Start(context.Background(), nil))
	require.NoError(t, m.Start(context.Background(), &recorder{}))
	require.Error(t, m.Start(context.Background(), &recorder{}))
	require.NotNil(t, m.Addr())
	require.Equal(t, m.Addr().(*net.TCPAddr).Port, m.Stats().Port)
	require.NoError(t, m.Stop(context.Background()))
	require.NoError(t, m.Stop(context.Background()), "Stop is idempotent")
	require.False(t, m.Stats().Running)

	// A port in use is an error from Start (the broker carries on without).
	busy := mustNew(t, Config{ServerID: "y", BindAddr: "127.0.0.1", Port: m.Addr().(*net.TCPAddr).Port})
	ln, err := net.Listen("tcp", m.Addr().String())
	require.NoError(t, err)
	defer ln.Close()
	require.Error(t, busy.Start(context.Background(), &recorder{}))

	// The Start context ends the mesh too.
	ctx, cancel := context.WithCancel(context.Background())
	m = mustNew(t, Config{ServerID: "z", BindAddr: "127.0.0.1"})
	require.NoError(t, m.Start(ctx, &recorder{}))
	cancel()
	require.Eventually(t, func() bool { return !m.Stats().Running }, waitFor, tick)
	require.NoError(t, m.Stop(context.Background()))
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no server id":          {},
		"bad peer":              {ServerID: "x", Peers: []string{"no-port"}},
		"bad peer port":         {ServerID: "x", Peers: []string{"h:0"}},
		"threshold not over hb": {ServerID: "x", Heartbeat: time.Second, DeadThreshold: time.Second},
		"port":                  {ServerID: "x", Port: 70000},
	} {
		_, err := New(cfg)
		require.Error(t, err, name)
	}
	m := mustNew(t, Config{ServerID: "x", Peers: []string{"h:1", "h:1", "[::1]:2"}})
	require.Equal(t, []string{"h:1", "[::1]:2"}, m.cfg.Peers, "duplicates dropped")
	require.Equal(t, SendQueueDefault, m.cfg.SendQueue)
	require.Equal(t, DeadThresholdDefault, m.cfg.DeadThreshold)
	require.Equal(t, AuthOff, m.Auth())
}
