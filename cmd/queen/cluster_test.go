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
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The mesh tests (mesh_test.go) run several brokers on one database, each
// on its own loopback address (127.0.0.x) with the same HTTP and mesh
// ports, and check what they tell each other (docs/mesh.md) through
// behaviour only: a long-poll answered, a push spooled, a pop answered
// empty, a queue option that applies. The re-poll (30 s) and the reconcile
// (10 min) are set far beyond every wait here, so nothing but an
// announcement can make a check pass.

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
	c := &cluster{t: t, bin: cmdtest.Binary(t, "cmd/queen"), hosts: hosts, db: pgtest.NewDB(t), port: freePortOn(t, hosts)}
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
