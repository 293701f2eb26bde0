package mesh

import (
	"bytes"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scriptConn is a net.Conn that reads a fixed script and records writes:
// it drives one side of the handshake without a socket or a goroutine.
type scriptConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (c *scriptConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *scriptConn) Write(b []byte) (int, error)      { return c.w.Write(b) }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }
func newScriptConn(script []byte) *scriptConn          { return &scriptConn{r: bytes.NewReader(script)} }

// Helpers shared by the package's tests.

func mustNew(t testing.TB, cfg Config) *Mesh {
	t.Helper()
	m, err := New(cfg)
	require.NoError(t, err)
	return m
}

func unitMesh(t testing.TB, secret string) *Mesh {
	return mustNew(t, Config{ServerID: "unit", Secret: secret, HandshakeTimeout: time.Second})
}

func helloFrame(h helloMsg) []byte              { return appendFrame(nil, FrameHello, mustJSON(h)) }
func challengeFrame(c challengeMsg) []byte      { return appendFrame(nil, FrameChallenge, mustJSON(c)) }
func hexNonce() string                          { return hex.EncodeToString(newNonce()) }
func refused(m *Mesh, reason string) uint64     { return m.Stats().AuthFailures[reason] }
func framesIn(m *Mesh, t FrameType) uint64      { return m.Stats().Frames[t.String()].In }
func framesDropped(m *Mesh, t FrameType) uint64 { return m.Stats().Frames[t.String()].Dropped }

// The transcript's fields are length-prefixed: moving a byte from one id
// to the next changes the MAC.
func TestTranscriptUnambiguous(t *testing.T) {
	t.Parallel()
	n1, n2 := newNonce(), newNonce()
	a := transcript{listenerNonce: n1, dialerNonce: n2, listenerID: "ab", dialerID: "c"}
	b := transcript{listenerNonce: n1, dialerNonce: n2, listenerID: "a", dialerID: "bc"}
	secret := []byte("s")
	require.NotEqual(t, a.mac(secret, labelHello), b.mac(secret, labelHello))
	require.NotEqual(t, a.mac(secret, labelHello), a.mac(secret, labelWelcome))
	require.NotEqual(t, a.sessionKey(secret), b.sessionKey(secret))
	require.Equal(t, a.sessionKey(secret), a.sessionKey(secret))
	require.NotEqual(t, a.sessionKey(secret), a.sessionKey([]byte("t")))
}

// A dialer and a listener with the same secret agree on the session key;
// the listener's checks refuse each kind of bad HELLO with its own reason.
func TestAcceptHandshake(t *testing.T) {
	t.Parallel()
	const probe = "probe" // a reason that is no refusal
	const secret = "0123456789abcdef0123456789abcdef"
	goodHello := func(ch challengeMsg, secret string) helloMsg {
		ln, _ := decodeNonce(ch.Nonce)
		h := helloMsg{V: protocolVersion, ServerID: "dialer", Nonce: hexNonce(), HTTPAddr: "http://d:6632"}
		dn, _ := decodeNonce(h.Nonce)
		tr := transcript{listenerNonce: ln, dialerNonce: dn, listenerID: ch.ServerID, dialerID: h.ServerID, httpAddr: h.HTTPAddr}
		h.MAC = hex.EncodeToString(tr.mac([]byte(secret), labelHello))
		return h
	}
	tests := []struct {
		name   string
		secret string
		hello  func(challengeMsg) []byte
		reason string // "" = accepted
		hangUp bool   // close after the script
	}{
		{name: "good", secret: secret, hello: func(ch challengeMsg) []byte { return helloFrame(goodHello(ch, secret)) }},
		{name: "open accepts a signed hello", hello: func(ch challengeMsg) []byte { return helloFrame(goodHello(ch, secret)) }},
		{name: "open accepts an unsigned hello", hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.MAC = ""
			return helloFrame(h)
		}},
		{name: "wrong secret", secret: secret, reason: RefusedBadMAC, hello: func(ch challengeMsg) []byte {
			return helloFrame(goodHello(ch, secret+"x"))
		}},
		{name: "unsigned", secret: secret, reason: RefusedUnsigned, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.MAC = ""
			return helloFrame(h)
		}},
		{name: "changed server id", secret: secret, reason: RefusedBadMAC, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.ServerID = "mallory"
			return helloFrame(h)
		}},
		{name: "changed http addr", secret: secret, reason: RefusedBadMAC, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.HTTPAddr = "http://evil:1"
			return helloFrame(h)
		}},
		{name: "signed for another listener nonce", secret: secret, reason: RefusedBadMAC, hello: func(ch challengeMsg) []byte {
			ch.Nonce = hexNonce()
			return helloFrame(goodHello(ch, secret))
		}},
		{name: "other version", secret: secret, reason: RefusedBadHello, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.V = 2
			return helloFrame(h)
		}},
		{name: "short nonce", secret: secret, reason: RefusedBadHello, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.Nonce = "abcd"
			return helloFrame(h)
		}},
		{name: "no server id", reason: RefusedBadHello, hello: func(ch challengeMsg) []byte {
			h := goodHello(ch, secret)
			h.ServerID = ""
			return helloFrame(h)
		}},
		{name: "not json", reason: RefusedBadHello, hello: func(challengeMsg) []byte { return appendFrame(nil, FrameHello, []byte("[1]")) }},
		{name: "data before hello", secret: secret, reason: RefusedNotHello, hello: func(challengeMsg) []byte {
			return appendFrame(nil, FrameMaintenance, []byte(`{"enabled":true}`))
		}},
		{name: "huge hello", reason: RefusedFrameError, hello: func(challengeMsg) []byte { return []byte{0, 1, 0, 0, 4} }},
		{name: "torn hello", reason: RefusedBadHello, hangUp: true, hello: func(challengeMsg) []byte { return []byte{0, 0, 0, 9, 4, '{'} }},
		// Connecting and leaving is a probe, not an attack: not counted.
		{name: "silent", hello: func(challengeMsg) []byte { return nil }, reason: probe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := unitMesh(t, tt.secret)
			ours, theirs := net.Pipe()
			type result struct {
				hello helloMsg
				op    *opener
				ok    bool
			}
			done := make(chan result, 1)
			go func() {
				h, op, ok := m.acceptHandshake(ours, &frameReader{r: ours})
				_ = ours.Close()
				done <- result{h, op, ok}
			}()

			fr := &frameReader{r: theirs}
			typ, body, err := fr.next(maxHandshakeLen)
			require.NoError(t, err)
			require.Equal(t, FrameChallenge, typ)
			var ch challengeMsg
			require.True(t, decodeStrict(body, &ch))
			require.Equal(t, m.Auth(), ch.Auth)
			require.Equal(t, "unit", ch.ServerID)
			require.Equal(t, m.instance, ch.Instance)

			script := tt.hello(ch)
			_, err = theirs.Write(script)
			if tt.reason == "" {
				require.NoError(t, err)
			}
			if script == nil || tt.hangUp {
				require.NoError(t, theirs.Close())
			}
			typ, body, err = fr.next(maxHandshakeLen)
			res := <-done
			if tt.reason != "" {
				require.Error(t, err, "a refusal closes without a word")
				require.False(t, res.ok)
				want := uint64(1)
				if tt.reason == probe {
					want = 0
				} else {
					require.Equal(t, want, refused(m, tt.reason))
				}
				require.Equal(t, want, m.Stats().HandshakeFailures)
				return
			}
			require.NoError(t, err)
			require.True(t, res.ok)
			require.Equal(t, FrameWelcome, typ)
			require.Equal(t, "dialer", res.hello.ServerID)
			require.Equal(t, tt.secret != "", res.op != nil)
			require.Zero(t, m.Stats().HandshakeFailures)
			var w welcomeMsg
			require.True(t, decodeStrict(body, &w))
			require.Equal(t, tt.secret != "", w.MAC != "")
		})
	}
}

// FuzzAcceptHandshake: whatever a stranger answers to the challenge, a
// listener with a secret never accepts it (a valid MAC needs the secret and
// the listener's fresh nonce), and an open listener accepts only a
// well-formed HELLO. Seeds in testdata/fuzz/FuzzAcceptHandshake.
func FuzzAcceptHandshake(f *testing.F) {
	f.Add(helloFrame(helloMsg{V: 1, ServerID: "x", Nonce: hexNonce(), MAC: hexNonce()}), true)
	f.Add(helloFrame(helloMsg{V: 1, ServerID: "x", Nonce: hexNonce()}), false)
	f.Add(appendFrame(nil, FrameMessageAvailable, []byte(`{"queues":["a"]}`)), true)
	f.Add([]byte{0, 0, 0, 0}, false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, true)
	f.Fuzz(func(t *testing.T, script []byte, secure bool) {
		secret := ""
		if secure {
			secret = "fuzz-secret-fuzz-secret-fuzz-secret"
		}
		m := unitMesh(t, secret)
		conn := newScriptConn(script)
		h, op, ok := m.acceptHandshake(conn, &frameReader{r: conn})
		if secure {
			require.False(t, ok)
			require.Nil(t, op)
			return
		}
		if ok {
			require.NotEmpty(t, h.ServerID)
			require.Equal(t, protocolVersion, h.V)
			_, nonceOK := decodeNonce(h.Nonce)
			require.True(t, nonceOK)
		}
	})
}

// FuzzDialHandshake: whatever a listener (or an impostor) sends, a dialer
// with a secret never derives a session from it, never mistakes it for
// itself, and never panics. Seeds in testdata/fuzz/FuzzDialHandshake.
func FuzzDialHandshake(f *testing.F) {
	welcome := appendFrame(nil, FrameWelcome, []byte(`{"mac":"00"}`))
	f.Add(append(challengeFrame(challengeMsg{V: 1, ServerID: "l", Instance: "i", Nonce: hexNonce(), Auth: AuthHMAC}), welcome...))
	f.Add(append(challengeFrame(challengeMsg{V: 1, ServerID: "l", Instance: "i", Nonce: hexNonce(), Auth: AuthOff}), welcome...))
	f.Add(challengeFrame(challengeMsg{V: 1, Nonce: "zz"}))
	f.Add([]byte{0, 0, 0, 1, 100})
	f.Fuzz(func(t *testing.T, script []byte) {
		m := unitMesh(t, "fuzz-secret-fuzz-secret-fuzz-secret")
		seal, err := m.dialHandshake(newScriptConn(script))
		require.Nil(t, seal)
		require.NotErrorIs(t, err, errSelf)
	})
}
