package mesh

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tap relays connections to target and records what the dialer sends: an
// eavesdropper on the mesh network.
type tap struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	sent   []byte
}

func startTap(t *testing.T, target string) *tap {
	t.Helper()
	tp := &tap{target: target}
	tp.ln = serveTCP(t, "127.0.0.1", func(c net.Conn, track func(net.Conn), wg *sync.WaitGroup) {
		s, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		track(s)
		wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		wg.Go(func() {
			_, _ = io.Copy(io.MultiWriter(s, tp), c)
			_ = s.Close()
		})
	})
	return tp
}

// serveTCP listens on ip and hands each accepted connection to handle, on
// the accept goroutine; every connection (and whatever handle tracks) is
// closed, and every goroutine awaited, when the test ends.
func serveTCP(t *testing.T, ip string, handle func(c net.Conn, track func(net.Conn), wg *sync.WaitGroup)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			handle(c, track, &wg)
		}
	})
	return ln
}

func (tp *tap) Write(b []byte) (int, error) {
	tp.mu.Lock()
	tp.sent = append(tp.sent, b...)
	tp.mu.Unlock()
	return len(b), nil
}

// frames splits what the tap recorded into raw frames.
func (tp *tap) frames(t *testing.T) [][]byte {
	t.Helper()
	tp.mu.Lock()
	data := bytes.Clone(tp.sent)
	tp.mu.Unlock()
	var out [][]byte
	r := bytes.NewReader(data)
	fr := &frameReader{r: r}
	for {
		start := len(data) - r.Len()
		if _, _, err := fr.next(MaxFrameLen); err != nil {
			return out
		}
		out = append(out, data[start:len(data)-r.Len()])
	}
}

// rawConn is an attacker's (or a test's) hand-driven mesh connection.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	fr   *frameReader
	ch   challengeMsg
}

func rawDial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(waitFor)))
	rc := &rawConn{t: t, conn: c, fr: &frameReader{r: c}}
	typ, body, err := rc.fr.next(maxHandshakeLen)
	require.NoError(t, err)
	require.Equal(t, FrameChallenge, typ)
	require.True(t, decodeStrict(body, &rc.ch))
	return rc
}

func (rc *rawConn) send(b []byte) {
	_, err := rc.conn.Write(b)
	require.NoError(rc.t, err)
}

// hello answers the challenge as a dialer that knows secret, reads the
// welcome and returns the sealer for the session.
func (rc *rawConn) hello(id, secret string) *sealer {
	ln, _ := decodeNonce(rc.ch.Nonce)
	h := helloMsg{V: protocolVersion, ServerID: id, Nonce: hexNonce()}
	dn, _ := decodeNonce(h.Nonce)
	tr := transcript{listenerNonce: ln, dialerNonce: dn, listenerID: rc.ch.ServerID, dialerID: id}
	h.MAC = hex.EncodeToString(tr.mac([]byte(secret), labelHello))
	rc.send(helloFrame(h))
	typ, body, err := rc.fr.next(maxHandshakeLen)
	require.NoError(rc.t, err)
	require.Equal(rc.t, FrameWelcome, typ)
	var w welcomeMsg
	require.True(rc.t, decodeStrict(body, &w))
	require.True(rc.t, verifyMAC(w.MAC, tr.mac([]byte(secret), labelWelcome)))
	return newSealer(tr.sessionKey([]byte(secret)))
}

// closedByPeer waits until the listener drops the connection. Frames are
// dispatched before the next read, so once it is closed, anything that
// was going to reach the handler has.
func (rc *rawConn) closedByPeer() {
	rc.t.Helper()
	_, err := io.Copy(io.Discard, rc.conn)
	require.False(rc.t, errors.Is(err, os.ErrDeadlineExceeded), "the listener kept the connection")
}

func TestMeshRefusesForgeriesAndReplays(t *testing.T) {
	t.Parallel()
	addrA, addrB := freeAddr(t, "127.0.0.2"), freeAddr(t, "127.0.0.3")
	b := startNode(t, testConfig("b", addrB, []string{addrA}, testSecret))
	tp := startTap(t, addrB)
	a := startNode(t, testConfig("a", addrA, []string{tp.ln.Addr().String()}, testSecret))
	waitConnected(t, a, b)

	// Capture a real session: A's HELLO and a few sealed frames to B.
	a.m.QueuesReady(testTenant, []string{"captured"})
	a.m.MaintenanceChanged(false, false)
	require.Eventually(t, func() bool {
		return b.rec.readyQueues(testTenant)["captured"] && b.rec.has(event{kind: "pop"})
	}, waitFor, tick)
	captured := tp.frames(t)
	require.GreaterOrEqual(t, len(captured), 3)
	captHello := captured[0]
	require.Equal(t, byte(FrameHello), captHello[lenSize])
	var captReady []byte
	for _, f := range captured[1:] {
		if f[lenSize] == byte(FrameMessageAvailable) {
			captReady = f
		}
	}
	require.NotNil(t, captReady)

	attack := func(name, reason string, run func(rc *rawConn)) {
		t.Run(name, func(t *testing.T) {
			before := refused(b.m, reason)
			events := len(b.rec.all())
			rc := rawDial(t, addrB)
			run(rc)
			rc.closedByPeer()
			require.Equal(t, before+1, refused(b.m, reason))
			require.Len(t, b.rec.all(), events, "nothing reached the handler")
		})
	}
	evil := func() []byte { return mustJSON(maintenanceMsg{Enabled: true}) }

	attack("replayed hello and session", RefusedBadMAC, func(rc *rawConn) {
		// The whole captured stream: HELLO then its frames.
		for _, f := range captured {
			_, _ = rc.conn.Write(f)
		}
	})
	attack("wrong secret", RefusedBadMAC, func(rc *rawConn) {
		ln, _ := decodeNonce(rc.ch.Nonce)
		h := helloMsg{V: protocolVersion, ServerID: "mallory", Nonce: hexNonce()}
		dn, _ := decodeNonce(h.Nonce)
		h.MAC = hex.EncodeToString(transcript{listenerNonce: ln, dialerNonce: dn, listenerID: "b", dialerID: "mallory"}.mac([]byte("not-the-secret"), labelHello))
		rc.send(helloFrame(h))
	})
	attack("unsigned hello", RefusedUnsigned, func(rc *rawConn) {
		rc.send(helloFrame(helloMsg{V: protocolVersion, ServerID: "mallory", Nonce: hexNonce()}))
	})
	attack("frame before hello", RefusedNotHello, func(rc *rawConn) {
		rc.send(appendFrame(nil, FrameMaintenance, evil()))
	})
	attack("captured frame replayed in a new session", RefusedFrameMAC, func(rc *rawConn) {
		rc.hello("legit", testSecret)
		rc.send(captReady)
	})
	attack("wrong frame MAC", RefusedFrameMAC, func(rc *rawConn) {
		f := rc.hello("legit", testSecret).appendFrame(nil, FrameMaintenance, evil())
		f[lenSize+1+seqSize] ^= 0x01
		rc.send(f)
	})
	attack("altered payload", RefusedFrameMAC, func(rc *rawConn) {
		f := rc.hello("legit", testSecret).appendFrame(nil, FrameMaintenance, mustJSON(maintenanceMsg{Enabled: false}))
		copy(f[len(f)-len(`false}`):], "true }")
		rc.send(f)
	})
	attack("plain frame after a secure handshake", RefusedFrameMAC, func(rc *rawConn) {
		rc.hello("legit", testSecret)
		rc.send(appendFrame(nil, FrameMaintenance, evil()))
	})
	t.Run("replayed frame in its own session", func(t *testing.T) {
		before := refused(b.m, RefusedSequence)
		rc := rawDial(t, addrB)
		f := rc.hello("legit", testSecret).appendFrame(nil, FrameMessageAvailable, mustJSON(readyMsg{Tenant: testTenant, Queues: []string{"once"}}))
		rc.send(f)
		rc.send(f)
		rc.closedByPeer()
		require.Equal(t, before+1, refused(b.m, RefusedSequence))
		n := 0
		for _, e := range b.rec.all() {
			if e.kind == "ready" && e.queues[0] == "once" {
				n++
			}
		}
		require.Equal(t, 1, n, "the first copy was genuine, the second refused")
	})

	t.Run("a mesh with the wrong secret", func(t *testing.T) {
		before := refused(b.m, RefusedBadMAC)
		m := startNode(t, testConfig("wrong", freeAddr(t, "127.0.0.4"), []string{addrB}, testSecret+"-other"))
		require.Eventually(t, func() bool { return refused(b.m, RefusedBadMAC) > before }, waitFor, tick)
		require.False(t, m.m.Stats().Peers[0].Connected)
		m.m.MaintenanceChanged(true, true)
		require.Equal(t, uint64(2), framesDropped(m.m, FrameMaintenance)+framesDropped(m.m, FramePopMaintenance))
	})

	t.Run("an open dialer cannot reach a secured listener", func(t *testing.T) {
		before := refused(b.m, RefusedUnsigned)
		m := startNode(t, testConfig("open", freeAddr(t, "127.0.0.5"), []string{addrB}, ""))
		require.Eventually(t, func() bool { return m.logs.count("mesh peer unreachable") > 0 }, waitFor, tick)
		require.Equal(t, before, refused(b.m, RefusedUnsigned), "the dialer knows it lacks the secret and does not try")
		require.False(t, m.m.Stats().Peers[0].Connected)
	})

	t.Run("a secured dialer does not talk to an open listener", func(t *testing.T) {
		// An impostor (or a broker without the secret) that offers open
		// mode gets nothing.
		open := startNode(t, testConfig("open-listener", freeAddr(t, "127.0.0.6"), nil, ""))
		m := startNode(t, testConfig("secured", freeAddr(t, "127.0.0.7"), []string{open.m.Addr().String()}, testSecret))
		require.Eventually(t, func() bool { return m.logs.count("mesh peer unreachable") > 0 }, waitFor, tick)
		m.m.QueuesReady(testTenant, []string{"secret-queue"})
		require.False(t, m.m.Stats().Peers[0].Connected)
		require.Empty(t, open.m.Stats().Servers, "no HELLO was sent")
		require.Empty(t, open.rec.all())
	})

	s := b.m.Stats()
	require.GreaterOrEqual(t, s.HandshakeFailures, uint64(4))
	require.GreaterOrEqual(t, s.SignatureFailures, uint64(5))
	require.GreaterOrEqual(t, s.SequenceRejections, uint64(1))
	require.False(t, b.rec.has(event{kind: "push", enabled: true}), "no forged switch got through")
	require.Equal(t, 1, b.logs.count("mesh peer up a"), "the genuine peer stayed up throughout")
}

// In open mode anyone may talk, but the framing rules still hold: a frame
// without a tenant wakes every tenant (never the default one), and an
// unknown type is skipped without ending the connection.
func TestMeshOpenModeRawFrames(t *testing.T) {
	t.Parallel()
	b := startNode(t, testConfig("b", freeAddr(t, "127.0.0.3"), nil, ""))
	rc := rawDial(t, b.m.Addr().String())
	require.Equal(t, AuthOff, rc.ch.Auth)
	rc.send(helloFrame(helloMsg{V: protocolVersion, ServerID: "raw", Nonce: hexNonce()}))
	typ, _, err := rc.fr.next(maxHandshakeLen)
	require.NoError(t, err)
	require.Equal(t, FrameWelcome, typ)
	rc.send(appendFrame(nil, FrameType(99), []byte(`{"from":"the future"}`)))
	rc.send(appendFrame(nil, FrameMessageAvailable, []byte(`not json`)))
	rc.send(appendFrame(nil, FrameMessageAvailable, []byte(`{"queues":["no-tenant"]}`)))
	require.Eventually(t, func() bool { return b.rec.readyQueues("")["no-tenant"] }, waitFor, tick)
	require.Empty(t, b.rec.readyQueues(DefaultTenant))
	require.Equal(t, uint64(1), b.m.Stats().Frames["UNKNOWN_99"].In)

	// A zero length ends the connection and is counted.
	rc.send([]byte{0, 0, 0, 0})
	rc.closedByPeer()
	require.Equal(t, uint64(1), refused(b.m, RefusedFrameError))
}
