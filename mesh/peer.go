package mesh

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// outFrame is a frame waiting in a peer's queue. The payload is shared by
// every peer's queue and never modified.
type outFrame struct {
	t       FrameType
	payload []byte
}

// peer is one configured peer: the outbound connection this broker sends on.
type peer struct {
	addr  string // as configured, host:port
	host  string
	port  int
	queue chan outFrame

	connected atomic.Bool
	self      atomic.Bool
	dropped   atomic.Uint64

	mu       sync.Mutex
	remoteIP string
}

func newPeer(addr, host string, port, queue int) *peer {
	return &peer{addr: addr, host: host, port: port, queue: make(chan outFrame, queue)}
}

// offer queues a frame for the peer, or reports false (and counts) when the
// peer is not connected or its queue is full. It never blocks.
func (p *peer) offer(f outFrame) bool {
	if p.connected.Load() {
		select {
		case p.queue <- f:
			return true
		default:
		}
	}
	p.dropped.Add(1)
	return false
}

func (p *peer) stats() PeerStats {
	s := PeerStats{Host: p.host, Port: p.port, Connected: p.connected.Load(), Self: p.self.Load(), Dropped: p.dropped.Load()}
	s.Resolved = s.Connected
	p.mu.Lock()
	if p.remoteIP != "" {
		ip := p.remoteIP
		s.ResolvedIP = &ip
	}
	p.mu.Unlock()
	return s
}

// Errors of a dial that end one attempt.
var (
	errSelf        = errors.New("mesh: peer is this broker")
	errNoSecret    = errors.New("mesh: peer requires QUEEN_SYNC_SECRET, none set here")
	errPeerOpen    = errors.New("mesh: peer has no QUEEN_SYNC_SECRET; not sending to an unauthenticated peer")
	errBadWelcome  = errors.New("mesh: peer's welcome does not verify (different secret?)")
	errBadHandshke = errors.New("mesh: malformed handshake from peer")
)

// runPeer owns one peer's outbound connection for the mesh's lifetime:
// dial, handshake, send, and on any failure reconnect after an exponential,
// jittered delay. Failures are logged when the state changes, not per retry.
func (m *Mesh) runPeer(ctx context.Context, p *peer) {
	backoff := m.cfg.ReconnectMin
	var lastErr string
	for {
		up, err := m.connectPeer(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errSelf) {
			p.self.Store(true)
			m.log.Info("mesh peer is this broker; not dialling it", slog.String("peer", p.addr))
			return
		}
		if up {
			backoff = m.cfg.ReconnectMin
			lastErr = ""
			m.log.Warn("mesh peer disconnected", slog.String("peer", p.addr), slog.String("error", err.Error()))
		} else if msg := err.Error(); msg != lastErr {
			lastErr = msg
			m.log.Warn("mesh peer unreachable", slog.String("peer", p.addr), slog.String("error", msg))
		}
		// Equal jitter: between half and all of the backoff, so that peers
		// restarted together do not redial in lockstep.
		delay := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, m.cfg.ReconnectMax)
	}
}

// connectPeer makes one connection: dial, handshake, then send until the
// connection fails or ctx ends. up reports whether the handshake succeeded.
func (m *Mesh) connectPeer(ctx context.Context, p *peer) (up bool, err error) {
	d := net.Dialer{Timeout: m.cfg.HandshakeTimeout}
	conn, err := d.DialContext(ctx, "tcp", p.addr) // resolves the host again on every attempt
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	seal, err := m.dialHandshake(conn)
	if err != nil {
		return false, err
	}
	// Frames queued while the peer was down are stale: drop them rather
	// than replay old wakes or switches.
	for drained := false; !drained; {
		select {
		case f := <-p.queue:
			p.dropped.Add(1)
			m.counters.dropped[f.t].Add(1)
		default:
			drained = true
		}
	}
	p.mu.Lock()
	p.remoteIP = conn.RemoteAddr().(*net.TCPAddr).IP.String()
	p.mu.Unlock()
	p.connected.Store(true)
	m.log.Info("mesh peer connected", slog.String("peer", p.addr))
	defer func() {
		p.connected.Store(false)
		p.mu.Lock()
		p.remoteIP = ""
		p.mu.Unlock()
	}()
	return true, m.send(ctx, conn, p, seal)
}

// dialHandshake runs the dialer's side: read the challenge, answer HELLO,
// read the welcome. It returns the sealer for the frames to come (nil when
// the listener is open).
func (m *Mesh) dialHandshake(conn net.Conn) (*sealer, error) {
	if err := conn.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout)); err != nil {
		return nil, err
	}
	fr := &frameReader{r: conn}
	t, body, err := fr.next(maxHandshakeLen)
	if err != nil {
		return nil, fmt.Errorf("read challenge: %w", err)
	}
	var ch challengeMsg
	if t != FrameChallenge || !decodeStrict(body, &ch) || ch.V != protocolVersion {
		return nil, errBadHandshke
	}
	if ch.Instance == m.instance {
		return nil, errSelf
	}
	ln, ok := decodeNonce(ch.Nonce)
	if !ok {
		return nil, errBadHandshke
	}
	// Both ends have a secret or neither: a dialer with one never falls
	// back to open mode, or an impostor could ask for it and be told
	// everything.
	secure := len(m.secret) > 0
	switch {
	case ch.Auth == AuthHMAC && !secure:
		return nil, errNoSecret
	case ch.Auth != AuthHMAC && secure:
		return nil, errPeerOpen
	}
	tr := transcript{listenerNonce: ln, dialerNonce: newNonce(), listenerID: ch.ServerID, dialerID: m.cfg.ServerID, httpAddr: m.httpAddr}
	hello := helloMsg{V: protocolVersion, ServerID: m.cfg.ServerID, Nonce: hex.EncodeToString(tr.dialerNonce), HTTPAddr: m.httpAddr}
	if secure {
		hello.MAC = hex.EncodeToString(tr.mac(m.secret, labelHello))
	}
	if _, err := conn.Write(appendFrame(nil, FrameHello, mustJSON(hello))); err != nil {
		return nil, fmt.Errorf("write hello: %w", err)
	}
	t, body, err = fr.next(maxHandshakeLen)
	if err != nil {
		// The listener closes without a word when it refuses us.
		return nil, fmt.Errorf("handshake refused by peer: %w", err)
	}
	var w welcomeMsg
	if t != FrameWelcome || !decodeStrict(body, &w) {
		return nil, errBadHandshke
	}
	if !secure {
		return nil, conn.SetDeadline(time.Time{})
	}
	if !verifyMAC(w.MAC, tr.mac(m.secret, labelWelcome)) {
		return nil, errBadWelcome
	}
	return newSealer(tr.sessionKey(m.secret)), conn.SetDeadline(time.Time{})
}

// sendBatch is the most queued frames written before one flush.
const sendBatch = 256

// send drains the peer's queue onto the connection and sends a HEARTBEAT
// in every interval without other traffic. A write that cannot finish
// within the dead threshold ends the connection: a peer that does not read
// is as good as dead, and the frames meanwhile are dropped at the queue.
func (m *Mesh) send(ctx context.Context, conn net.Conn, p *peer, seal *sealer) error {
	// The listener never writes after its welcome: a read returns only
	// when the connection ends.
	closed := make(chan error, 1)
	m.goRun(func() {
		_, err := io.Copy(io.Discard, conn)
		if err == nil {
			err = io.EOF
		}
		closed <- err
	})
	bw := bufio.NewWriterSize(conn, 32<<10)
	var buf []byte
	var counts [256]uint64
	hb := time.NewTicker(m.cfg.Heartbeat)
	defer hb.Stop()
	heartbeat := mustJSON(heartbeatMsg{ServerID: m.cfg.ServerID})
	sentSinceTick := false
	// batch writes frames and flushes them under one write deadline.
	batch := func(first outFrame, more bool) error {
		if err := conn.SetWriteDeadline(time.Now().Add(m.cfg.DeadThreshold)); err != nil {
			return err
		}
		var err error
		for f, n := first, 0; ; n++ {
			buf = seal.appendFrame(buf[:0], f.t, f.payload)
			counts[f.t]++
			if _, err = bw.Write(buf); err != nil || !more || n+1 >= sendBatch || len(p.queue) == 0 {
				break
			}
			f = <-p.queue
		}
		if err == nil {
			err = bw.Flush()
		}
		for t, n := range counts {
			if n > 0 {
				if err == nil {
					m.counters.out[t].Add(n)
				} else {
					m.counters.dropped[t].Add(n)
					p.dropped.Add(n)
				}
				counts[t] = 0
			}
		}
		sentSinceTick = true
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-closed:
			return fmt.Errorf("connection closed: %w", err)
		case f := <-p.queue:
			if err := batch(f, true); err != nil {
				return err
			}
		case <-hb.C:
			if !sentSinceTick {
				if err := batch(outFrame{t: FrameHeartbeat, payload: heartbeat}, false); err != nil {
					return err
				}
			}
			sentSinceTick = false
		}
	}
}
