package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The tests of this file run several brokers on one database, each on its
// own loopback address (127.0.0.x) with the same HTTP and mesh ports, and
// check what they tell each other (docs/mesh.md) through behaviour only: a
// long-poll answered, a push spooled, a pop answered empty, a queue option
// that applies. The re-poll (30 s) and the reconcile (10 min) are set far
// beyond every wait here, so nothing but an announcement can make a check
// pass.

const meshTestSecret = "mesh-test-secret-0123456789abcdef0123456789abcdef"

// Long-polls wait 25 s, the re-poll 30 s, and the test's client gives up
// after 15 s: a long-poll answered in time was woken (at its deadline it
// would look once more and find the message anyway).
const (
	clusterRepoll    = "QUEEN_POP_REPOLL_MS=30000"
	clusterRefresh   = "QUEEN_CACHE_REFRESH_INTERVAL_MS=600000"
	wakePollTimeout  = 25000
	announceDeadline = 10 * time.Second
)

// cluster is brokers on one database, broker i listening on hosts[i].
type cluster struct {
	t     *testing.T
	bin   string
	hosts []string
	db    string     // the database's URL
	port  int        // the HTTP port, the same on every host
	env   [][]string // broker i's environment, for a restart
	b     []*broker
}

// startCluster starts one broker per host with the common test settings
// plus extra(i).
func startCluster(t *testing.T, hosts []string, extra func(i int) []string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: buildBroker(t), hosts: hosts, db: pgtest.NewDB(t), port: freePortOn(t, hosts)}
	for i, h := range hosts {
		env := brokerEnv(t, c.db, t.TempDir(), "QUEEN_BIND_ADDR="+h, clusterRepoll, clusterRefresh)
		env = append(env, extra(i)...)
		c.env = append(c.env, env)
		c.b = append(c.b, startBrokerAt(t, c.bin, h, c.port, env))
	}
	return c
}

// meshEnv is the mesh of hosts on port (bare hosts take QUEEN_MESH_PORT;
// the list names every broker, itself included, as a StatefulSet's would),
// plus extra peers; a quick heartbeat so that liveness changes in seconds.
func meshEnv(hosts []string, port int, secret string, extraPeers ...string) []string {
	return []string{
		"QUEEN_MESH_PEERS=" + strings.Join(append(append([]string{}, hosts...), extraPeers...), ","),
		"QUEEN_MESH_PORT=" + strconv.Itoa(port), "QUEEN_SYNC_SECRET=" + secret,
		"QUEEN_SYNC_HEARTBEAT_MS=200", "QUEEN_SYNC_DEAD_THRESHOLD_MS=1000",
	}
}

// freePortOn finds a TCP port free on every host.
func freePortOn(t testing.TB, hosts []string) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		require.NoError(t, err)
		port := first.Addr().(*net.TCPAddr).Port
		ok := true
		held := []net.Listener{first}
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			require.NoError(t, l.Close())
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// silentPeer accepts mesh connections and never says a word: a peer that
// hangs. It holds what it accepts until the test ends.
func silentPeer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func (b *broker) stats() api.SharedStateStats {
	b.t.Helper()
	var st api.SharedStateStats
	require.NoError(b.t, json.Unmarshal(b.mustCall("GET", "/internal/api/shared-state/stats", nil, http.StatusOK), &st))
	return st
}

// peer is the stats entry of the configured peer addr ("host:port").
func peer(st api.SharedStateStats, addr string) api.MeshPeer {
	if st.Peers != nil {
		for _, p := range *st.Peers {
			if net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) == addr {
				return p
			}
		}
	}
	return api.MeshPeer{}
}

// metric is the value of one sample of /metrics/prometheus (0 if absent).
func (b *broker) metric(family string, labels ...string) float64 {
	b.t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b.mustCall("GET", "/metrics/prometheus", nil, http.StatusOK)))
	require.NoError(b.t, err)
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fams[family].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// pushOne pushes one message and returns its status (queued, buffered).
func (b *broker) pushOne(queue, txID string) string {
	b.t.Helper()
	raw := b.mustCall("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": queue, "transactionId": txID, "payload": map[string]any{"tx": txID}},
	}}, http.StatusCreated)
	var res []struct {
		Status string `json:"status"`
	}
	require.NoError(b.t, json.Unmarshal(raw, &res))
	require.Len(b.t, res, 1)
	return res[0].Status
}

// popGroup pops one message of queue for consumer group g (from the
// start of the queue); "" means nothing (204). wait long-polls.
func (b *broker) popGroup(queue, g string, wait bool) (status int, txID string) {
	b.t.Helper()
	path := "/api/v1/pop/queue/" + queue + "?consumerGroup=" + g + "&subscriptionMode=all&autoAck=true"
	if wait {
		path += "&wait=true&timeout=" + strconv.Itoa(wakePollTimeout)
	}
	status, raw := call(context.Background(), "GET", b.url+path, nil)
	if status != http.StatusOK {
		return status, ""
	}
	var p struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	require.NoError(b.t, json.Unmarshal(raw, &p), "%s", raw)
	require.Len(b.t, p.Messages, 1)
	return status, p.Messages[0].TransactionID
}

// configAnnouncements counts the queue configuration announcements this
// broker received, through either transport (NOTIFY counts every event).
func (b *broker) configAnnouncements() int64 {
	st := b.stats()
	n := st.Notify.Received
	if st.Frames != nil {
		n += (*st.Frames)["QUEUE_CONFIG_SET"].In
	}
	return n
}

// wakeRound parks a long-poll on each broker of to (each its own group of
// a fresh queue), waits until every one is parked, pushes one message
// through from, and requires each long-poll to answer it before the
// client gives up, which only a wake-up from broker from can do.
func (c *cluster) wakeRound(from int, to []int, queue string) {
	t := c.t
	t.Helper()
	type answer struct {
		status int
		txID   string
	}
	// Parked long-polls are counted only on queues the broker knows, so
	// each broker of to learns the queue first: its pop reads the row
	// after the configuration announcement dropped it from its cache.
	before := make([]int64, len(to))
	for j, i := range to {
		before[j] = c.b[i].configAnnouncements()
	}
	c.b[from].mustCall("POST", "/api/v1/configure", map[string]any{"queue": queue}, http.StatusOK)
	for j, i := range to {
		waitFor(t, fmt.Sprintf("broker %d to hear of the new queue", i), announceDeadline, func() bool {
			return c.b[i].configAnnouncements() > before[j]
		})
		status, _ := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), false)
		require.Equal(t, http.StatusNoContent, status)
	}
	answers := make([]chan answer, len(to))
	for j, i := range to {
		answers[j] = make(chan answer, 1)
		go func() {
			status, tx := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), true)
			answers[j] <- answer{status, tx}
		}()
	}
	for _, i := range to {
		waitFor(t, fmt.Sprintf("the long-poll parked on broker %d", i), announceDeadline, func() bool {
			return c.b[i].metric("queen_parked_long_polls", "queue", queue) >= 1
		})
	}
	require.Equal(t, "queued", c.b[from].pushOne(queue, queue+"-m"))
	for j, i := range to {
		a := <-answers[j]
		require.Equal(t, http.StatusOK, a.status, "the long-poll on broker %d was not woken by the push on broker %d", i, from)
		require.Equal(t, queue+"-m", a.txID)
	}
}

// switchesReach flips push maintenance, then pop maintenance, on broker
// from and requires brokers to to act on each at once.
func (c *cluster) switchesReach(from int, to []int, prefix string) {
	t := c.t
	t.Helper()
	c.b[from].setMaintenance(true)
	for _, i := range to {
		waitFor(t, fmt.Sprintf("push maintenance on broker %d", i), announceDeadline, func() bool {
			return c.b[i].pushOne(prefix+"pm", fmt.Sprintf("%spm-%d-%d", prefix, i, time.Now().UnixNano())) == "buffered"
		})
	}
	c.b[from].setMaintenance(false)
	for _, i := range to {
		waitFor(t, fmt.Sprintf("push maintenance off on broker %d", i), announceDeadline, func() bool {
			return c.b[i].pushOne(prefix+"pm", fmt.Sprintf("%spm-%d-%d", prefix, i, time.Now().UnixNano())) == "queued"
		})
	}

	queue := prefix + "popm"
	c.b[from].mustCall("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}, http.StatusOK)
	for _, i := range to {
		waitFor(t, fmt.Sprintf("pop maintenance on broker %d", i), announceDeadline, func() bool {
			return c.b[i].stats().PopMaintenanceMode
		})
	}
	require.Equal(t, "queued", c.b[from].pushOne(queue, queue+"-m"))
	for _, i := range to {
		status, _ := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), false)
		require.Equal(t, http.StatusNoContent, status, "broker %d pops during pop maintenance", i)
	}
	c.b[from].mustCall("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}, http.StatusOK)
	for _, i := range to {
		waitFor(t, fmt.Sprintf("pop maintenance off on broker %d", i), announceDeadline, func() bool {
			status, tx := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), false)
			return status == http.StatusOK && tx == queue+"-m"
		})
	}
}

// reconfigurationReaches configures a queue on broker from with a one-hour
// delayedProcessing, lets brokers to cache it (their pops answer empty),
// then removes the delay on broker from: their next pops deliver at once,
// although their cached row would keep the delay until the reconcile.
func (c *cluster) reconfigurationReaches(from int, to []int, queue string) {
	t := c.t
	t.Helper()
	configure := func(delay int) {
		c.b[from].mustCall("POST", "/api/v1/configure",
			map[string]any{"queue": queue, "options": map[string]any{"delayedProcessing": delay}}, http.StatusOK)
	}
	configure(3600)
	require.Equal(t, "queued", c.b[from].pushOne(queue, queue+"-m"))
	for _, i := range to {
		status, _ := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), false)
		require.Equal(t, http.StatusNoContent, status, "broker %d delivered a delayed message", i)
	}
	configure(0)
	for _, i := range to {
		waitFor(t, fmt.Sprintf("the new options on broker %d", i), announceDeadline, func() bool {
			status, tx := c.b[i].popGroup(queue, "g"+strconv.Itoa(i), false)
			return status == http.StatusOK && tx == queue+"-m"
		})
	}
}

// Three brokers with an authenticated mesh, whose peer list also names a
// peer that accepts connections and never answers. A push on A wakes the
// long-polls parked on B and C; push and pop maintenance and a queue's
// options set on A apply on B and C at once; the hanging peer costs
// nothing but dropped frames; NOTIFY carries nothing. C killed and
// restarted rejoins, and wake-ups reach it again; a graceful stop stops
// the mesh.
func TestMeshBrokers(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	meshPort := freePortOn(t, hosts)
	hung := silentPeer(t)
	c := startCluster(t, hosts, func(int) []string { return meshEnv(hosts, meshPort, meshTestSecret, hung) })
	meshAddr := func(i int) string { return net.JoinHostPort(hosts[i], strconv.Itoa(meshPort)) }
	connected := func(i int) bool {
		st := c.b[i].stats()
		return st.Enabled && *st.PeersConnected == 2 && *st.ServersAlive == 2
	}
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d's mesh", i), 30*time.Second, func() bool { return connected(i) })
	}
	st := c.b[0].stats()
	require.Equal(t, api.Hmac, *st.Auth)
	require.True(t, peer(st, meshAddr(0)).Self)
	require.False(t, peer(st, hung).Connected)

	for round := range 3 {
		c.wakeRound(0, []int{1, 2}, fmt.Sprintf("mwake%d", round))
	}
	c.wakeRound(2, []int{0, 1}, "mwake-from-c")
	c.switchesReach(0, []int{1, 2}, "m")
	c.reconfigurationReaches(0, []int{1, 2}, "mconf")

	// The hanging peer never completed a handshake: A's frames for it
	// were dropped and counted, and its handshakes timed out.
	waitFor(t, "the hung peer's frames counted as dropped", announceDeadline, func() bool {
		return peer(c.b[0].stats(), hung).MessagesDropped > 0
	})
	// With the mesh on, brokers announce nothing through NOTIFY.
	for i := range c.b {
		require.Zero(t, c.b[i].stats().Notify.Published, "broker %d", i)
	}
	require.Positive(t, c.b[1].metric("queen_mesh_frames_total", "dir", "received", "type", "MESSAGE_AVAILABLE"))
	require.Equal(t, 2.0, c.b[1].metric("queen_mesh_peers_up"))

	// C dies: A sees it down and drops what it would send it.
	c.b[2].kill()
	waitFor(t, "A to see C down", announceDeadline, func() bool {
		st := c.b[0].stats()
		return !peer(st, meshAddr(2)).Connected && *st.ServersDead == 1
	})
	require.Equal(t, "queued", c.b[0].pushOne("mdown", "mdown-m"))
	waitFor(t, "A's frames for C counted as dropped", announceDeadline, func() bool {
		return peer(c.b[0].stats(), meshAddr(2)).MessagesDropped > 0
	})
	// C restarted at the same address rejoins, and is woken again.
	c.b[2] = startBrokerAt(t, c.bin, hosts[2], c.port, c.env[2])
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d's mesh after C's restart", i), 30*time.Second, func() bool { return connected(i) })
	}
	c.wakeRound(0, []int{2}, "mrejoin")
	c.wakeRound(2, []int{1}, "mrejoin-from-c")

	// A graceful stop ends the mesh after the drain.
	c.b[1].signal(syscall.SIGTERM)
	<-c.b[1].exited
	require.Equal(t, 0, c.b[1].cmd.ProcessState.ExitCode())
	require.Equal(t, 1, c.b[1].logCount("mesh stopped"))
	waitFor(t, "A to log B down", announceDeadline, func() bool { return c.b[0].logCount("mesh peer down") >= 1 })
}

// Three brokers without peers announce through PostgreSQL NOTIFY: the same
// wake-ups, switches and options reach B and C at once.
func TestNotifyBrokers(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.5", "127.0.0.6", "127.0.0.7"}
	c := startCluster(t, hosts, func(int) []string { return nil })
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d listening", i), 30*time.Second, func() bool {
			st := c.b[i].stats()
			return st.Notify.Listening
		})
		st := c.b[i].stats()
		require.False(t, st.Enabled)
		require.Equal(t, api.NoPeers, *st.Reason)
	}
	for round := range 3 {
		c.wakeRound(0, []int{1, 2}, fmt.Sprintf("nwake%d", round))
	}
	c.wakeRound(1, []int{0, 2}, "nwake-from-b")
	c.switchesReach(0, []int{1, 2}, "n")
	c.reconfigurationReaches(0, []int{1, 2}, "nconf")
	require.Positive(t, c.b[0].metric("queen_notify_published_total"))
	require.Positive(t, c.b[1].metric("queen_notify_received_total"))
	require.Equal(t, 1.0, c.b[1].metric("queen_notify_listening"))
}

// Two brokers whose secrets differ never complete a handshake: each counts
// the other's wrong MAC, and a push on one announces nothing to the other.
// (A long-poll cannot show it: at its deadline it looks once more and
// finds the message anyway.)
func TestMeshWrongSecret(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.8", "127.0.0.9"}
	meshPort := freePortOn(t, hosts)
	c := startCluster(t, hosts, func(i int) []string {
		return meshEnv(hosts, meshPort, meshTestSecret+strconv.Itoa(i))
	})
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d to refuse the other's handshake", i), 30*time.Second, func() bool {
			return c.b[i].metric("queen_mesh_auth_failures_total", "reason", "bad_mac") >= 1
		})
		st := c.b[i].stats()
		require.True(t, st.Enabled)
		require.Zero(t, *st.PeersConnected)
		require.Zero(t, *st.ServersAlive)
	}

	// A push on A announces the queue: the frame for B is dropped (no
	// authenticated connection), and B hears nothing, by either transport.
	require.Equal(t, "queued", c.b[0].pushOne("wrong-secret", "m"))
	addrB := net.JoinHostPort(hosts[1], strconv.Itoa(meshPort))
	waitFor(t, "A's frame for B dropped", announceDeadline, func() bool {
		return peer(c.b[0].stats(), addrB).MessagesDropped >= 1
	})
	st := c.b[1].stats()
	require.Zero(t, *st.MessagesReceived, "B received a frame from a broker with another secret")
	require.Zero(t, st.Notify.Received, "and nothing through NOTIFY either")
}

// A broker whose mesh port is taken boots anyway and announces through
// NOTIFY (MESH-1). NOTIFY reaches it from SQL too, so a forged switch is
// possible to whoever can connect to the database; the reconcile undoes
// it within QUEEN_CACHE_REFRESH_INTERVAL_MS, from the row (MESH-7).
func TestMeshBindFailureAndReconcile(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.10"}
	meshPort := freePortOn(t, hosts)
	taken, err := net.Listen("tcp", net.JoinHostPort(hosts[0], strconv.Itoa(meshPort)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	c := startCluster(t, hosts, func(int) []string {
		return append(meshEnv([]string{"127.0.0.10", "127.0.0.11"}, meshPort, ""), "QUEEN_CACHE_REFRESH_INTERVAL_MS=1000")
	})
	b := c.b[0]
	require.Equal(t, 1, b.logCount("mesh bind failed"))
	waitFor(t, "the NOTIFY listener", announceDeadline, func() bool { return b.stats().Notify.Listening })
	st := b.stats()
	require.False(t, st.Enabled)
	require.Equal(t, api.BindFailed, *st.Reason)
	require.Equal(t, "queued", b.pushOne("bind", "bind-1"))

	conn, err := pgx.Connect(t.Context(), c.db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), `SELECT pg_notify('queen_events', '{"v":1,"type":"maintenance","push":true}')`)
	require.NoError(t, err)
	waitFor(t, "the forged switch", announceDeadline, func() bool {
		return b.pushOne("bind", fmt.Sprintf("forged-%d", time.Now().UnixNano())) == "buffered"
	})
	waitFor(t, "the reconcile to restore the switch from the database", announceDeadline, func() bool {
		return b.pushOne("bind", fmt.Sprintf("healed-%d", time.Now().UnixNano())) == "queued"
	})
}
