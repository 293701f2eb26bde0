package mesh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config, the reference broker's where it has one.
const (
	PortDefault             = 6633
	HeartbeatDefault        = time.Second
	DeadThresholdDefault    = 5 * time.Second
	SendQueueDefault        = 1024
	CoalesceDefault         = 2 * time.Millisecond
	HandshakeTimeoutDefault = 5 * time.Second
	ReconnectMinDefault     = 250 * time.Millisecond
	ReconnectMaxDefault     = 5 * time.Second
)

// Config is the input of New. Zero durations and sizes take their defaults.
type Config struct {
	ServerID string // this broker's identity in HELLO and heartbeats; required
	BindAddr string // listen host; empty means every interface
	Port     int    // listen port; 0 picks a free one (tests; see Addr)
	// AdvertiseHost and HTTPPort make the http_addr announced in HELLO
	// (informational, shown in peers' stats). An empty host means the OS
	// host name, then $HOSTNAME, then 127.0.0.1.
	AdvertiseHost string
	HTTPPort      int
	Peers         []string // "host:port" of every other broker; the host is resolved on each dial
	// Secret turns authentication on: its bytes key the handshake MACs and
	// derive every connection's frame key. Empty means open mode.
	Secret           string
	Heartbeat        time.Duration // HEARTBEAT interval on each outbound connection
	DeadThreshold    time.Duration // a peer silent this long is down; must exceed Heartbeat
	SendQueue        int           // frames queued per peer before new ones are dropped
	Coalesce         time.Duration // how long ready queues gather before the next frame
	HandshakeTimeout time.Duration // dial plus handshake, either side
	ReconnectMin     time.Duration // first reconnect delay, doubled per failure
	ReconnectMax     time.Duration // largest reconnect delay
	Logger           *slog.Logger  // nil discards
}

// Handler receives what peers announce. Its methods run on the receiving
// connection's goroutine, so they must be quick and must not block (set a
// flag, wake waiters, drop a cache entry). A tenant of "" means the sender
// named no valid tenant: apply to every tenant that has the queue name.
type Handler interface {
	// QueuesReady: messages became poppable (or a lease was released) in
	// these queues; wake the long-polls parked on them.
	QueuesReady(tenant string, queues []string)
	// QueueConfigChanged: the queue was configured (or deleted); drop its
	// cached settings, such as the lease time and the encryption flag.
	QueueConfigChanged(tenant, queue string, deleted bool)
	// PushMaintenanceChanged: set the in-process push maintenance flag.
	PushMaintenanceChanged(enabled bool)
	// PopMaintenanceChanged: set the in-process pop maintenance flag.
	PopMaintenanceChanged(enabled bool)
}

// Mesh is one broker's end of the mesh. Build it with New, run it with Start,
// end it with Stop. The outbound methods are safe for concurrent use and
// never block on the network.
type Mesh struct {
	cfg      Config
	log      *slog.Logger
	instance string // random per process, to recognise a dial to ourselves
	httpAddr string
	secret   []byte

	peers    []*peer
	counters *counters
	liveness *liveness
	ready    *coalescer

	running atomic.Bool
	port    atomic.Int64 // bound port, once started

	mu       sync.Mutex // guards the fields below
	started  bool
	stopped  bool
	ln       net.Listener
	cancel   context.CancelFunc
	inbound  map[net.Conn]struct{}
	wg       sync.WaitGroup
	handlers Handler

	handshakes chan struct{} // semaphore of handshakes in progress
}

// maxPendingHandshakes bounds the accepted connections that have not yet
// authenticated, so that a flood of idle connections costs little.
const maxPendingHandshakes = 64

// New validates the configuration and builds a Mesh. It does no I/O.
func New(cfg Config) (*Mesh, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With(slog.String("component", "mesh"))
	var inst [8]byte
	_, _ = rand.Read(inst[:])
	m := &Mesh{
		cfg:        cfg,
		log:        log,
		instance:   hex.EncodeToString(inst[:]),
		secret:     []byte(cfg.Secret),
		counters:   newCounters(),
		liveness:   newLiveness(log),
		inbound:    make(map[net.Conn]struct{}),
		handshakes: make(chan struct{}, maxPendingHandshakes),
	}
	if cfg.HTTPPort > 0 {
		m.httpAddr = "http://" + net.JoinHostPort(advertiseHost(cfg.AdvertiseHost), strconv.Itoa(cfg.HTTPPort))
	}
	m.ready = newCoalescer(cfg.Coalesce, m.sendReady)
	for _, addr := range cfg.Peers {
		host, port, _ := net.SplitHostPort(addr) // checked by normalize
		p, _ := strconv.Atoi(port)
		m.peers = append(m.peers, newPeer(addr, host, p, cfg.SendQueue))
	}
	return m, nil
}

func (c *Config) normalize() error {
	var errs []error
	if c.ServerID == "" {
		errs = append(errs, errors.New("mesh: ServerID is required"))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("mesh: Port %d out of range", c.Port))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Heartbeat, HeartbeatDefault)
	def(&c.DeadThreshold, DeadThresholdDefault)
	def(&c.Coalesce, CoalesceDefault)
	def(&c.HandshakeTimeout, HandshakeTimeoutDefault)
	def(&c.ReconnectMin, ReconnectMinDefault)
	def(&c.ReconnectMax, ReconnectMaxDefault)
	if c.SendQueue <= 0 {
		c.SendQueue = SendQueueDefault
	}
	if c.DeadThreshold <= c.Heartbeat {
		errs = append(errs, fmt.Errorf("mesh: DeadThreshold %s must exceed Heartbeat %s", c.DeadThreshold, c.Heartbeat))
	}
	c.ReconnectMax = max(c.ReconnectMax, c.ReconnectMin)
	seen := make(map[string]bool, len(c.Peers))
	peers := make([]string, 0, len(c.Peers))
	for _, p := range c.Peers {
		host, port, err := net.SplitHostPort(p)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("mesh: peer %q is not host:port", p))
			continue
		}
		if !seen[p] {
			seen[p] = true
			peers = append(peers, p)
		}
	}
	c.Peers = peers
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

// advertiseHost resolves the host announced in HELLO.
func advertiseHost(h string) string {
	if h != "" {
		return h
	}
	if n, err := os.Hostname(); err == nil && n != "" {
		return n
	}
	if n := os.Getenv("HOSTNAME"); n != "" {
		return n
	}
	return "127.0.0.1"
}

// Auth reports the mode: AuthHMAC with a secret, AuthOff without. For the
// boot log, which must say in one line when the mesh is open.
func (m *Mesh) Auth() string {
	if len(m.secret) > 0 {
		return AuthHMAC
	}
	return AuthOff
}

// Addr is the listener's address once Start has bound it, else nil.
func (m *Mesh) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

func (m *Mesh) boundPort() int {
	if p := int(m.port.Load()); p != 0 {
		return p
	}
	return m.cfg.Port
}

// Start binds the listener and starts the dialers, the listener and the
// liveness sweep; inbound frames go to h. A bind failure is returned (the
// broker carries on without the mesh); Start after Start or Stop is an error.
// The mesh runs until Stop or until ctx ends.
func (m *Mesh) Start(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("mesh: Start needs a Handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return errors.New("mesh: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(m.cfg.BindAddr, strconv.Itoa(m.cfg.Port)))
	if err != nil {
		return fmt.Errorf("mesh: listen: %w", err)
	}
	m.started, m.ln, m.handlers = true, ln, h
	m.port.Store(int64(ln.Addr().(*net.TCPAddr).Port))
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	context.AfterFunc(ctx, func() { m.shutdown() })

	m.running.Store(true)
	m.goRun(func() { m.acceptLoop(runCtx, ln) })
	m.goRun(func() { m.liveness.run(runCtx, m.cfg.DeadThreshold) })
	m.goRun(func() { m.ready.run(runCtx) })
	for _, p := range m.peers {
		m.goRun(func() { m.runPeer(runCtx, p) })
	}
	m.log.Info("mesh started", slog.String("server_id", m.cfg.ServerID),
		slog.String("addr", ln.Addr().String()), slog.Int("peers", len(m.peers)), slog.String("auth", m.Auth()))
	return nil
}

func (m *Mesh) goRun(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Stop closes the listener and every connection and waits for the
// goroutines until ctx ends. It is idempotent and safe without Start.
func (m *Mesh) Stop(ctx context.Context) error {
	m.shutdown()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mesh: stop: %w", ctx.Err())
	}
}

func (m *Mesh) shutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.stopped = true
	m.running.Store(false)
	if !m.started {
		return
	}
	m.cancel()
	_ = m.ln.Close()
	for c := range m.inbound {
		_ = c.Close()
	}
	m.log.Info("mesh stopped")
}

// track registers an accepted connection for Stop; false if stopping.
func (m *Mesh) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false
	}
	m.inbound[c] = struct{}{}
	return true
}

func (m *Mesh) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.inbound, c)
	m.mu.Unlock()
}

// QueuesReady announces that messages became poppable (or a lease was
// released) in these queues of the tenant ("" = DefaultTenant). Calls within
// the coalescing window share frames; it never blocks.
func (m *Mesh) QueuesReady(tenant string, queues []string) {
	if !m.running.Load() || len(m.peers) == 0 {
		return
	}
	m.ready.add(outboundTenant(tenant), queues)
}

// QueueConfigChanged announces that a queue was configured, or deleted, so
// that peers drop its cached settings (lease time, encryption flag: ENC-5).
func (m *Mesh) QueueConfigChanged(tenant, queue string, deleted bool) {
	if queue == "" {
		return
	}
	t := FrameQueueConfigSet
	if deleted {
		t = FrameQueueConfigDelete
	}
	m.broadcast(t, mustJSON(queueConfigMsg{Tenant: outboundTenant(tenant), Queue: queue}))
}

// MaintenanceChanged announces both maintenance switches' current state.
// They are broker-wide, so the frames name no tenant.
func (m *Mesh) MaintenanceChanged(push, pop bool) {
	m.broadcast(FrameMaintenance, mustJSON(maintenanceMsg{Enabled: push}))
	m.broadcast(FramePopMaintenance, mustJSON(maintenanceMsg{Enabled: pop}))
}

// sendReady is the coalescer's flush: one or more frames per tenant.
func (m *Mesh) sendReady(tenant string, queues []string) {
	for _, payload := range readyFrames(tenant, queues) {
		m.broadcast(FrameMessageAvailable, payload)
	}
}

// broadcast offers a frame to every peer without waiting: a peer that is
// down or whose queue is full loses it, and the loss is counted.
func (m *Mesh) broadcast(t FrameType, payload []byte) {
	if !m.running.Load() {
		return
	}
	for _, p := range m.peers {
		if !p.offer(outFrame{t: t, payload: payload}) {
			m.counters.dropped[t].Add(1)
		}
	}
}

// sortedKeys returns a set's members in order (for stable frames).
func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
