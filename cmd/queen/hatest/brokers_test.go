package hatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/sql/pgtest"
)

// Three brokers on one database behind a round-robin load balancer; one
// is SIGKILLed under load. Nothing acknowledged is lost; a batch it had
// leased and never saw acked is delivered again through the others once
// the lease expires; clients whose requests land on the dead broker get a
// 502 and retry, which the balancer sends to the next broker.
//
// The brokers form an authenticated mesh and wake each other's long-polls
// through it; the re-poll is the default 1 s, the fallback for a lease
// that expired. The survivors report the dead broker (MESH-6).
func TestBrokersOneKilled(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	db := dbEnv{hosts: u.Host, user: u.User.Username(), db: strings.TrimPrefix(u.Path, "/")}
	bin := cmdtest.Binary(t, "cmd/queen")
	meshPorts := freePorts(t, 3)
	var peers []string
	for _, p := range meshPorts {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(p))
	}
	var brokers []*broker
	for i := range 3 {
		brokers = append(brokers, startBroker(t, fmt.Sprintf("b%d", i), bin, brokerEnv(t, db,
			"QUEEN_MESH_PEERS="+strings.Join(peers, ","), "QUEEN_MESH_PORT="+strconv.Itoa(meshPorts[i]),
			"QUEEN_SYNC_SECRET=hatest-mesh-secret-0123456789abcdef0123456789",
			"QUEEN_SYNC_HEARTBEAT_MS=200", "QUEEN_SYNC_DEAD_THRESHOLD_MS=1000", "QUEEN_POP_REPOLL_MS=1000")))
	}
	for _, b := range brokers {
		waitFor(t, b.name+"'s mesh", time.Minute, func() bool {
			st := meshStats(t, b.url)
			return st.Enabled && st.PeersConnected == 2 && st.ServersAlive == 2
		})
	}
	lb := newBalancer(t, brokers)
	status, raw := call(t.Context(), "POST", lb.url+"/api/v1/configure",
		map[string]any{"queue": "ha", "options": map[string]any{"leaseTime": 2, "retryLimit": 1000}})
	require.Equal(t, http.StatusOK, status, "%s", raw)

	viaLB := func(int, int) string { return lb.url }
	l := newLoad("ha", partitions, viaLB, viaLB)
	pctx, stopP := context.WithCancel(context.Background())
	cctx, stopC := context.WithCancel(context.Background())
	producers, consumersWG := l.startProducers(pctx), l.startConsumers(cctx, consumers)
	t.Cleanup(func() {
		stopP()
		stopC()
		producers.Wait()
		consumersWG.Wait()
	})
	l.waitProgress(t, "steady load", 300)

	// A consumer that leased a batch through the broker about to die and
	// will never ack it.
	victim := brokers[1]
	var held []popped
	waitFor(t, "a batch leased through the victim", time.Minute, func() bool {
		held = popDirect(t, victim.url, "ha")
		return len(held) > 0
	})
	victim.kill()
	killedAt := time.Now()
	lb.markDead(1)
	for _, i := range []int{0, 2} {
		waitFor(t, brokers[i].name+" to report the victim dead", time.Minute, func() bool {
			st := meshStats(t, brokers[i].url)
			return st.ServersDead == 1 && st.ServersAlive == 1 && st.PeersConnected == 1
		})
	}

	waitFor(t, "the dead broker's leased batch to be delivered again", time.Minute, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range held {
			if l.delivered[m.TransactionID] == 0 {
				return false
			}
		}
		return true
	})
	redeliveredAfter := time.Since(killedAt)
	l.waitProgress(t, "load after the kill", 300)
	require.Positive(t, lb.failed(1), "clients reached the dead broker and failed over")

	stopP()
	producers.Wait()
	if !l.waitDelivered(2*time.Minute) || !waitCaughtUp(t, dbURL, "ha", 2*time.Minute) {
		t.Fatalf("acknowledged pushes not consumed after 2m:\n%s", diagnose(t, dbURL, l, brokers))
	}
	stopC()
	consumersWG.Wait()
	require.Positive(t, meshStats(t, brokers[0].url).MessagesReceived, "the survivors heard each other over the mesh")
	s := l.verify(t)
	t.Logf("brokers: 3 on one database, b1 SIGKILLed; its leased batch of %d delivered again %s later; requests failed over by the clients after reaching it %d",
		len(held), redeliveredAfter.Round(10*time.Millisecond), lb.failed(1))
	t.Logf("brokers: %s", s)
}

// meshState is the part of a broker's shared-state stats the test reads.
type meshState struct {
	Enabled        bool `json:"enabled"`
	PeersConnected int  `json:"peers_connected"`
	ServersAlive   int  `json:"servers_alive"`
	ServersDead    int  `json:"servers_dead"`
	// Frames received from the peers after their handshake.
	MessagesReceived int64 `json:"messages_received"`
}

func meshStats(t testing.TB, brokerURL string) meshState {
	t.Helper()
	status, raw := call(t.Context(), "GET", brokerURL+"/internal/api/shared-state/stats", nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var st meshState
	require.NoError(t, json.Unmarshal(raw, &st))
	return st
}

// freePorts returns n distinct free ports on 127.0.0.1.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// popDirect pops one batch from a broker without acking it.
func popDirect(t testing.TB, brokerURL, queue string) []popped {
	t.Helper()
	status, raw := call(t.Context(), "GET", brokerURL+"/api/v1/pop/queue/"+queue+"?batch=20&wait=true&timeout=1000", nil)
	if status == http.StatusNoContent {
		return nil
	}
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var p struct {
		Messages []popped `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(raw, &p))
	return p.Messages
}

// balancer is a plain round-robin reverse proxy, as a load balancer
// without health checks behaves: a dead backend answers 502 until taken
// out of rotation (markDead, what a health check would do after a few
// failed probes).
type balancer struct {
	url      string
	backends []*url.URL
	next     atomic.Uint64
	dead     []atomic.Bool
	errs     []atomic.Int64
}

type backendKey struct{}

func newBalancer(t testing.TB, brokers []*broker) *balancer {
	t.Helper()
	b := &balancer{dead: make([]atomic.Bool, len(brokers)), errs: make([]atomic.Int64, len(brokers))}
	for _, br := range brokers {
		u, err := url.Parse(br.url)
		require.NoError(t, err)
		b.backends = append(b.backends, u)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := b.pick()
			r.SetURL(b.backends[i])
			r.SetXForwarded()
			r.Out = r.Out.WithContext(context.WithValue(r.Out.Context(), backendKey{}, i))
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if i, ok := r.Context().Value(backendKey{}).(int); ok {
				b.errs[i].Add(1)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// pick is the next backend in turn. The dead one stays in rotation for a
// few more turns after markDead, as it would until its health check fails
// enough times; the clients' retries cover that.
func (b *balancer) pick() int {
	for {
		i := int(b.next.Add(1) % uint64(len(b.backends)))
		if !b.dead[i].Load() || b.errs[i].Load() < 10 {
			return i
		}
	}
}

func (b *balancer) markDead(i int) { b.dead[i].Store(true) }

func (b *balancer) failed(i int) int64 { return b.errs[i].Load() }
