package mesh

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"
)

// acceptLoop accepts inbound connections until the listener closes.
func (m *Mesh) acceptLoop(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of file descriptors): pause, go on.
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case m.handshakes <- struct{}{}:
		default:
			m.refuse(RefusedBusy, conn.RemoteAddr())
			_ = conn.Close()
			continue
		}
		if !m.track(conn) {
			_ = conn.Close()
			<-m.handshakes
			return
		}
		m.goRun(func() { m.serveInbound(conn) })
	}
}

// serveInbound authenticates one accepted connection, then dispatches its
// frames until it ends. The listener writes only the challenge and the
// welcome; everything else flows one way, from the dialer.
func (m *Mesh) serveInbound(conn net.Conn) {
	defer m.untrack(conn)
	defer conn.Close()
	pending := true
	release := func() {
		if pending {
			pending = false
			<-m.handshakes
		}
	}
	defer release()

	fr := &frameReader{r: conn}
	hello, op, ok := m.acceptHandshake(conn, fr)
	if !ok {
		return
	}
	release()
	srv := m.liveness.hello(hello.ServerID, hello.HTTPAddr, time.Now())
	// A dialer sends at least a heartbeat per interval; a connection silent
	// for several dead thresholds is gone without a FIN.
	idle := 3 * m.cfg.DeadThreshold
	for {
		if err := conn.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return
		}
		t, body, err := fr.next(MaxFrameLen)
		if err != nil {
			if errors.Is(err, ErrFrameEmpty) || errors.Is(err, ErrFrameTooLarge) {
				m.refuse(RefusedFrameError, conn.RemoteAddr())
			}
			return
		}
		payload := body
		if op != nil {
			if payload, err = op.open(t, body); err != nil {
				reason := RefusedFrameMAC
				if errors.Is(err, errFrameSequence) {
					reason = RefusedSequence
				}
				m.refuse(reason, conn.RemoteAddr())
				return
			}
		}
		m.liveness.touch(srv, time.Now())
		m.counters.in[t].Add(1)
		dispatch(m.handlers, t, payload)
	}
}

// acceptHandshake runs the listener's side: send a fresh nonce, read and
// check HELLO, send the welcome. It returns the opener for the frames to
// come (nil in open mode). Every refusal is counted and closes the
// connection without telling the stranger why.
func (m *Mesh) acceptHandshake(conn net.Conn, fr *frameReader) (helloMsg, *opener, bool) {
	var h helloMsg
	if err := conn.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout)); err != nil {
		return h, nil, false
	}
	nonce := newNonce()
	secure := len(m.secret) > 0
	ch := challengeMsg{V: protocolVersion, ServerID: m.cfg.ServerID, Instance: m.instance, Nonce: hex.EncodeToString(nonce), Auth: m.Auth()}
	if _, err := conn.Write(appendFrame(nil, FrameChallenge, mustJSON(ch))); err != nil {
		return h, nil, false
	}
	t, body, err := fr.next(maxHandshakeLen)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		m.refuse(RefusedTimeout, conn.RemoteAddr())
		return h, nil, false
	case errors.Is(err, ErrFrameEmpty) || errors.Is(err, ErrFrameTooLarge):
		m.refuse(RefusedFrameError, conn.RemoteAddr())
		return h, nil, false
	case errors.Is(err, io.EOF):
		return h, nil, false // connected and left: a probe, not an attack
	case err != nil:
		m.refuse(RefusedBadHello, conn.RemoteAddr()) // a torn frame
		return h, nil, false
	case t != FrameHello:
		m.refuse(RefusedNotHello, conn.RemoteAddr())
		return h, nil, false
	}
	if !decodeStrict(body, &h) || h.V != protocolVersion || h.ServerID == "" {
		m.refuse(RefusedBadHello, conn.RemoteAddr())
		return h, nil, false
	}
	dialerNonce, ok := decodeNonce(h.Nonce)
	if !ok {
		m.refuse(RefusedBadHello, conn.RemoteAddr())
		return h, nil, false
	}
	var welcome welcomeMsg
	var op *opener
	if secure {
		if h.MAC == "" {
			m.refuse(RefusedUnsigned, conn.RemoteAddr())
			return h, nil, false
		}
		tr := transcript{listenerNonce: nonce, dialerNonce: dialerNonce, listenerID: m.cfg.ServerID, dialerID: h.ServerID, httpAddr: h.HTTPAddr}
		if !verifyMAC(h.MAC, tr.mac(m.secret, labelHello)) {
			m.refuse(RefusedBadMAC, conn.RemoteAddr())
			return h, nil, false
		}
		welcome.MAC = hex.EncodeToString(tr.mac(m.secret, labelWelcome))
		op = newOpener(tr.sessionKey(m.secret))
	}
	if _, err := conn.Write(appendFrame(nil, FrameWelcome, mustJSON(welcome))); err != nil {
		return h, nil, false
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return h, nil, false
	}
	return h, op, true
}

// refuseLogEvery limits the refusal log to one line per reason per period:
// the counters say how many, and a flood must not flood the log too.
const refuseLogEvery = time.Minute

// refuse counts a refused connection and logs it, rate-limited.
func (m *Mesh) refuse(reason string, remote net.Addr) {
	m.counters.refused[reason].Add(1)
	now := time.Now().UnixNano()
	last := m.counters.refusedLog[reason]
	if prev := last.Load(); prev == 0 || now-prev >= int64(refuseLogEvery) {
		if last.CompareAndSwap(prev, now) {
			m.log.Warn("mesh connection refused", slog.String("reason", reason),
				slog.String("remote_addr", remote.String()))
		}
	}
}
