package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

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

// QUEEN_SYNC_ENABLED=false keeps a broker's announcements to itself (no
// NOTIFY statement per commit batch); it still hears the others.
func TestSyncDisabled(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.12", "127.0.0.13"}
	c := startCluster(t, hosts, func(i int) []string {
		if i == 0 {
			return []string{"QUEEN_SYNC_ENABLED=false"}
		}
		return nil
	})
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d listening", i), announceDeadline, func() bool { return c.b[i].stats().Notify.Listening })
	}
	require.Equal(t, api.SyncDisabled, *c.b[0].stats().Reason)
	require.Equal(t, "queued", c.b[0].pushOne("sd-quiet", "m"))
	c.b[0].mustCall("POST", "/api/v1/configure", map[string]any{"queue": "sd-quiet"}, http.StatusOK)
	// By the time B's announcement has reached A and woken its long-poll,
	// anything A published before would have reached B.
	c.wakeRound(1, []int{0}, "sd-heard")
	require.Zero(t, c.b[0].stats().Notify.Published)
	require.Zero(t, c.b[1].stats().Notify.Received)
	require.Positive(t, c.b[1].stats().Notify.Published)
}
