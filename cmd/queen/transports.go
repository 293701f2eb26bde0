package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/gen/api"
	dataplane "github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/pgevents"
	"github.com/queenforgo/queen/mesh"
)

// transports carries the broker's announcements to the other brokers on the
// database and applies theirs here (docs/mesh.md). PostgreSQL NOTIFY always
// listens (the SQL API and brokers without the mesh announce through it);
// this broker announces through the mesh when it runs, else through
// NOTIFY, never through both, and through neither with QUEEN_SYNC_ENABLED
// false (a lone broker saves the NOTIFY statements).
//
// Build it with newTransports before the broker (its Notifier is the
// broker's Config.Notifier), start it with the broker once that exists, and
// stop it after the broker and before the pool closes.
type transports struct {
	log    *slog.Logger
	id     string
	events *pgevents.Events
	mesh   *mesh.Mesh // nil: no mesh configured
	off    api.SharedStateStatsReason
	out    *outbound
}

// announcer is what the two transports share on the way out.
type announcer interface {
	QueuesReady(tenant string, queues []string)
	QueueConfigChanged(tenant, queue string, deleted bool)
	MaintenanceChanged(push, pop bool)
}

var (
	_ announcer        = (*mesh.Mesh)(nil)
	_ announcer        = (*pgevents.Events)(nil)
	_ mesh.Handler     = inbound{}
	_ pgevents.Handler = inbound{}
)

// newTransports builds both transports; it does no I/O.
func newTransports(cfg config.Config, pool *pgxpool.Pool, id string, logger *slog.Logger) (*transports, error) {
	ev, err := pgevents.New(pgevents.Config{Pool: pool, ServerID: id, Logger: logger})
	if err != nil {
		return nil, err
	}
	t := &transports{log: logger, id: id, events: ev, out: &outbound{}}
	m := cfg.Mesh
	switch {
	case !m.Enabled:
		t.off = api.SyncDisabled
	case !m.Active():
		t.off = api.NoPeers
	default:
		t.mesh, err = mesh.New(mesh.Config{
			ServerID: id, BindAddr: m.BindAddr.String(), Port: m.Port,
			AdvertiseHost: m.AdvertiseHost, HTTPPort: cfg.Server.Port, Peers: m.Peers, Secret: m.Secret,
			Heartbeat: m.Heartbeat, DeadThreshold: m.DeadThreshold, Logger: logger,
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Notifier is the broker's outbound transport (broker.Config.Notifier).
func (t *transports) Notifier() dataplane.Notifier { return t.out }

// start starts the NOTIFY listener and, when configured, the mesh, whose
// received announcements go to b; then it picks the outbound transport.
// A mesh that cannot bind its port is not fatal (MESH-1): this broker
// announces through NOTIFY instead. Call it before b.Start.
func (t *transports) start(ctx context.Context, b *dataplane.Broker) error {
	in := inbound{b}
	if err := t.events.Start(ctx, in); err != nil {
		return err
	}
	if t.off == api.SyncDisabled {
		t.log.Info("broker announcements stay on this broker (QUEEN_SYNC_ENABLED=false); other brokers' long-polls on this database wait for their re-poll", "server_id", t.id)
		return nil
	}
	t.out.to = t.events
	if t.mesh == nil {
		t.log.Info("broker announcements through postgres notify (no mesh)", "reason", string(t.off), "server_id", t.id)
		return nil
	}
	if err := t.mesh.Start(ctx, in); err != nil {
		t.off = api.BindFailed
		t.log.Warn("mesh bind failed, announcing through postgres notify instead", "err", err)
		return nil
	}
	t.out.to = t.mesh
	if t.mesh.Auth() == mesh.AuthOff {
		t.log.Warn("mesh is open (no QUEEN_SYNC_SECRET): whoever reaches its port can wake long-polls and flip maintenance; bind it to a private network and allow only the other brokers",
			"addr", t.mesh.Addr().String())
	}
	return nil
}

// stop stops both transports (idempotent); announcements after it are
// dropped.
func (t *transports) stop(ctx context.Context) error {
	var errs []error
	if t.mesh != nil {
		errs = append(errs, t.mesh.Stop(ctx))
	}
	errs = append(errs, t.events.Stop(ctx))
	return errors.Join(errs...)
}

// outbound adapts the broker's announcements (queue keys) to a transport
// (tenant and queue names). to is set by start, before the broker starts
// and before the HTTP server serves, so before any announcement.
type outbound struct{ to announcer }

func (o *outbound) QueuesReady(keys []dataplane.QueueKey) {
	if o.to == nil {
		return
	}
	for tenant, queues := range byTenant(keys) {
		o.to.QueuesReady(tenant, queues)
	}
}

// QueueChanged announces a configuration change. The broker does not say
// whether the queue was deleted, and need not: a receiver drops its cached
// row either way (QUEUE_CONFIG_SET and _DELETE act alike).
func (o *outbound) QueueChanged(keys []dataplane.QueueKey) {
	if o.to == nil {
		return
	}
	for _, k := range keys {
		o.to.QueueConfigChanged(k.Tenant, k.Queue, false)
	}
}

func (o *outbound) MaintenanceChanged(push, pop bool) {
	if o.to != nil {
		o.to.MaintenanceChanged(push, pop)
	}
}

// byTenant groups queue names by tenant, in the order they come.
func byTenant(keys []dataplane.QueueKey) map[string][]string {
	out := make(map[string][]string, 1)
	for _, k := range keys {
		out[k.Tenant] = append(out[k.Tenant], k.Queue)
	}
	return out
}

// inbound applies what a transport received to the broker. Its methods run
// on the transport's receiving goroutine and only wake waiters, drop cache
// entries or set a flag. A tenant of "" (the sender named none) reaches
// the broker as AnyTenant: every tenant with the queue name.
type inbound struct{ b *dataplane.Broker }

func (in inbound) QueuesReady(tenant string, queues []string) {
	keys := make([]dataplane.QueueKey, 0, len(queues))
	for _, q := range queues {
		keys = append(keys, dataplane.QueueKey{Tenant: inboundTenant(tenant), Queue: q})
	}
	in.b.ApplyQueuesReady(keys)
}

func (in inbound) QueueConfigChanged(tenant, queue string, _ bool) {
	in.b.ApplyQueueChanged([]dataplane.QueueKey{{Tenant: inboundTenant(tenant), Queue: queue}})
}

func (in inbound) PushMaintenanceChanged(on bool) { in.b.ApplyPushMaintenance(on) }
func (in inbound) PopMaintenanceChanged(on bool)  { in.b.ApplyPopMaintenance(on) }

func inboundTenant(t string) string {
	if t == "" {
		return dataplane.AnyTenant
	}
	return t
}

// serverID is this broker's identity on the mesh, in NOTIFY events and in
// the dashboard (QUEEN_SERVER_ID). It must be unique among the brokers on
// a database, since a broker skips NOTIFY events carrying its own id; so
// the default is the host name with a random suffix, which two brokers on
// one host (or two restarts) never share.
func serverID(configured string) string {
	if configured != "" {
		return configured
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "queen"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", host, hex.EncodeToString(b[:]))
}

// SharedStateStats implements handlers.SharedState: both transports'
// counters in the stats route's shape (the route adds the switches).
func (t *transports) SharedStateStats() api.SharedStateStats {
	n := t.events.Stats()
	st := api.SharedStateStats{
		ServerId: t.id,
		Notify: api.NotifyStats{
			Channel: n.Channel, Listening: n.Listening, Published: i64(n.Published), PublishErrors: i64(n.PublishErrors),
			Dropped: i64(n.Dropped), Received: i64(n.Received), IgnoredOwn: i64(n.IgnoredOwn), Malformed: i64(n.Malformed),
			Reconnects: i64(n.Reconnects),
		},
	}
	if n.ListenerPID != 0 {
		st.Notify.ListenerPid = ptr(int64(n.ListenerPID))
	}
	if t.off != "" {
		st.Reason = ptr(t.off)
	}
	if t.mesh == nil {
		return st
	}
	m := t.mesh.Stats()
	st.Enabled = m.Running
	st.Transport = ptr(api.SharedStateStatsTransport(m.Transport))
	st.Running, st.Port, st.Auth = ptr(m.Running), ptr(m.Port), ptr(api.SharedStateStatsAuth(m.Auth))
	st.PeerCount, st.PeersConnected = ptr(m.PeerCount), ptr(m.PeersConnected)
	peers := make([]api.MeshPeer, 0, len(m.Peers))
	for _, p := range m.Peers {
		peers = append(peers, api.MeshPeer{
			Host: p.Host, Port: p.Port, Connected: p.Connected, Resolved: p.Resolved, ResolvedIp: p.ResolvedIP,
			Self: p.Self, MessagesDropped: i64(p.Dropped),
		})
	}
	st.Peers = &peers
	st.ServersAlive, st.ServersDead = ptr(m.ServersAlive), ptr(m.ServersDead)
	servers := make([]api.MeshServer, 0, len(m.Servers))
	for _, s := range m.Servers {
		servers = append(servers, api.MeshServer{ServerId: s.ServerID, Alive: s.Alive, LastSeenAgoMs: s.LastSeenAgoMs, HttpAddr: optional(s.HTTPAddr)})
	}
	st.Servers = &servers
	st.MessagesSent, st.MessagesReceived, st.MessagesDropped = ptr(i64(m.MessagesSent)), ptr(i64(m.MessagesReceived)), ptr(i64(m.MessagesDropped))
	st.SignatureFailures, st.HandshakeFailures = ptr(i64(m.SignatureFailures)), ptr(i64(m.HandshakeFailures))
	st.SequenceRejections = ptr(i64(m.SequenceRejections))
	failures := make(map[string]int64, len(m.AuthFailures))
	for r, v := range m.AuthFailures {
		failures[r] = i64(v)
	}
	st.AuthFailures = &failures
	frames := make(map[string]api.MeshFrameCounts, len(m.Frames))
	for name, c := range m.Frames {
		frames[name] = api.MeshFrameCounts{In: i64(c.In), Out: i64(c.Out), Dropped: i64(c.Dropped)}
	}
	st.Frames = &frames
	return st
}

// i64 converts a counter for the wire; counters never reach 2^63.
func i64(v uint64) int64 { return int64(min(v, 1<<63-1)) }

func ptr[T any](v T) *T { return &v }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
