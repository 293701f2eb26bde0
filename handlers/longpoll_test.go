package handlers

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/longpoll"
	"github.com/queenforgo/queen/sql/pgtest"
)

// rawConn is one client TCP connection that sends requests by hand and
// keeps the exact bytes of each answer.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	seen bytes.Buffer // everything read from c
	br   *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawConn{t: t, c: c}
	rc.br = bufio.NewReader(io.TeeReader(c, &rc.seen))
	return rc
}

func (rc *rawConn) send(path string) {
	rc.t.Helper()
	_, err := io.WriteString(rc.c, "GET "+path+" HTTP/1.1\r\nHost: queen.test\r\n\r\n")
	require.NoError(rc.t, err)
}

// answer reads one response: its status, body and raw bytes.
func (rc *rawConn) answer() (int, []byte, []byte) {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(30*time.Second)))
	rc.seen.Reset()
	resp, err := http.ReadResponse(rc.br, nil)
	require.NoError(rc.t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(rc.t, err)
	require.Zero(rc.t, rc.br.Buffered(), "nothing after the answer")
	return resp.StatusCode, body, bytes.Clone(rc.seen.Bytes())
}

var dateLine = regexp.MustCompile(`\r\nDate: [^\r]*\r\n`)

// head is an answer's status line and headers without Date.
func head(raw []byte) string {
	h, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	return dateLine.ReplaceAllString(h+"\r\n", "\r\n")
}

func (b *testBundle) waitHeld(queue string, n int) {
	b.t.Helper()
	require.Eventually(b.t, func() bool { return b.parked(queue) == n && b.held.Held() == n },
		10*time.Second, 5*time.Millisecond)
}

// A parked pop is held outside net/http, answered by a push, and its
// connection then serves the client's next request (keep-alive).
func TestHeldLongPollAnsweredThenConnectionKeptAlive(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: time.Hour})
	rc := dialRaw(t, b.url)
	// autoAck: the partition's lease must not keep the second pop waiting.
	rc.send("/api/v1/pop/queue/held?wait=true&timeout=60000&autoAck=true")
	b.waitHeld("held", 1)
	b.push(item("held", "", "wake", 1))
	status, body, _ := rc.answer()
	require.Equal(t, http.StatusOK, status, "%s", body)
	var p popped
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "wake", p.Messages[0].TransactionID)

	// The same TCP connection: a second pop parks and is answered again,
	// then an immediate one.
	rc.send("/api/v1/pop/queue/held?wait=true&timeout=60000&autoAck=true")
	b.waitHeld("held", 1)
	b.push(item("held", "", "again", 2))
	status, body, _ = rc.answer()
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), `"again"`)
	rc.send("/api/v1/pop/queue/held?wait=false")
	status, _, _ = rc.answer()
	require.Equal(t, http.StatusNoContent, status)
	require.Zero(t, b.held.Held())
}

// A held answer has the bytes of an immediate one, Date apart: 204 exactly,
// 200 with the same headers (the bodies differ only in ids and times).
func TestHeldAnswerBytesEqualImmediateAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: time.Hour})
	b.push(item("bytes-a", "", "txn-1", map[string]any{"n": 1}))
	rc := dialRaw(t, b.url)

	rc.send("/api/v1/pop/queue/bytes-a?wait=false")
	status, body, immediate := rc.answer()
	require.Equal(t, http.StatusOK, status, "%s", body)
	rc.send("/api/v1/pop/queue/bytes-b?wait=true&timeout=60000")
	b.waitHeld("bytes-b", 1)
	b.push(item("bytes-b", "", "txn-2", map[string]any{"n": 1}))
	status, body, held := rc.answer()
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Equal(t, head(immediate), head(held))
	require.Contains(t, head(held), "\r\nContent-Length: ")
	var a, c map[string]any
	_, ib, _ := strings.Cut(string(immediate), "\r\n\r\n")
	require.NoError(t, json.Unmarshal([]byte(ib), &a))
	require.NoError(t, json.Unmarshal(body, &c))
	require.Equal(t, len(a), len(c))
	for k := range a {
		require.Contains(t, c, k)
	}

	rc.send("/api/v1/pop/queue/bytes-a?wait=false")
	status, _, immediate = rc.answer()
	require.Equal(t, http.StatusNoContent, status)
	rc.send("/api/v1/pop/queue/bytes-a?wait=true&timeout=1000")
	b.waitHeld("bytes-a", 1)
	status, _, held = rc.answer() // the timeout
	require.Equal(t, http.StatusNoContent, status)
	require.Equal(t, dateLine.ReplaceAll(immediate, []byte("\r\n")), dateLine.ReplaceAll(held, []byte("\r\n")))
}

// A client that goes away while held cancels its wait: the message pushed
// afterwards is not leased to it but popped by the next consumer.
func TestHeldClientGoneLeavesMessageUnclaimed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: time.Hour})
	rc := dialRaw(t, b.url)
	rc.send("/api/v1/pop/queue/gone?wait=true&timeout=60000")
	b.waitHeld("gone", 1)
	require.NoError(t, rc.c.Close())
	b.waitHeld("gone", 0)
	b.push(item("gone", "", "left", 1))
	p := b.pop("/api/v1/pop/queue/gone?wait=false")
	require.NotNil(t, p, "the message must still be poppable")
	require.Equal(t, "left", p.Messages[0].TransactionID)
}

// heldServer is a broker served as cmd/queen serves it, over tlsConfig
// when set, with the http.Server at hand for a shutdown.
type heldServer struct {
	b    *testBundle
	hs   *http.Server
	ln   *longpoll.Listener
	base string
}

func serveHeld(t *testing.T, tlsConfig *tls.Config) *heldServer {
	t.Helper()
	pool := pgtest.NewPool(t)
	srv := newServer(t, testConfig{Pool: pool, RepollInterval: time.Hour})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := longpoll.NewListener(tcp, tlsConfig)
	srv.cfg.LongPolls = ln
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); _ = ln.Shutdown(context.Background()) })
	t.Cleanup(srv.Drain)
	scheme := "http://"
	if tlsConfig != nil {
		scheme = "https://"
	}
	hsv := &heldServer{hs: hs, ln: ln, base: scheme + tcp.Addr().String()}
	hsv.b = &testBundle{t: t, srv: srv, pool: pool, url: hsv.base, held: ln}
	return hsv
}

// testTLS is a certificate and a client trusting it (httptest's).
func testTLS(t *testing.T, h2 bool) (*tls.Config, *http.Client) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	cert := ts.TLS.Certificates[0]
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	ts.Close()
	protos := []string{"http/1.1"}
	if h2 {
		protos = []string{"h2", "http/1.1"}
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2}
	t.Cleanup(tr.CloseIdleConnections)
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos}, &http.Client{Transport: tr}
}

// get sends a GET through c and says whether it reused a connection.
func get(t *testing.T, c *http.Client, url string) (int, []byte, int, bool) {
	t.Helper()
	var reused bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body, resp.ProtoMajor, reused
}

func pushOver(t *testing.T, c *http.Client, base, queue, txID string) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"items": []any{map[string]any{"queue": queue, "transactionId": txID, "payload": map[string]any{"n": 1}}}})
	require.NoError(t, err)
	resp, err := c.Post(base+"/api/v1/push", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

// Over TLS a held connection is a *tls.Conn, answered and handed back
// without a second TLS layer: the next request reuses it.
func TestHeldLongPollOverTLS(t *testing.T) {
	t.Parallel()
	cfg, client := testTLS(t, false)
	s := serveHeld(t, cfg)
	got := make(chan []byte, 1)
	go func() {
		status, body, proto, _ := get(t, client, s.base+"/api/v1/pop/queue/tls?wait=true&timeout=60000")
		if status != http.StatusOK || proto != 1 {
			body = nil
		}
		got <- body
	}()
	s.b.waitHeld("tls", 1)
	pushOver(t, &http.Client{Transport: &http.Transport{TLSClientConfig: client.Transport.(*http.Transport).TLSClientConfig}}, s.base, "tls", "secure")
	require.Contains(t, string(<-got), `"secure"`)
	status, _, _, reused := get(t, client, s.base+"/api/v1/pop/queue/tls?wait=false")
	require.Equal(t, http.StatusNoContent, status)
	require.True(t, reused, "the held connection serves the next request")
}

// HTTP/2 cannot be hijacked: its long-polls park in their handler as
// before, and are answered the same.
func TestHeldFallsBackOnHTTP2(t *testing.T) {
	t.Parallel()
	cfg, client := testTLS(t, true)
	s := serveHeld(t, cfg)
	type answer struct {
		body  []byte
		proto int
	}
	got := make(chan answer, 1)
	go func() {
		_, body, proto, _ := get(t, client, s.base+"/api/v1/pop/queue/h2?wait=true&timeout=60000")
		got <- answer{body, proto}
	}()
	require.Eventually(t, func() bool { return s.b.parked("h2") == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, s.ln.Held())
	pushOver(t, client, s.base, "h2", "multiplexed")
	a := <-got
	require.Equal(t, 2, a.proto)
	require.Contains(t, string(a.body), `"multiplexed"`)
}

// A graceful stop answers every held pop empty (as it answers parked ones)
// and closes the connections.
func TestHeldLongPollsEndOnStop(t *testing.T) {
	t.Parallel()
	s := serveHeld(t, nil)
	conns := make([]*rawConn, 3)
	for i := range conns {
		conns[i] = dialRaw(t, s.base)
		conns[i].send("/api/v1/pop/queue/stop?wait=true&timeout=60000")
	}
	s.b.waitHeld("stop", 3)
	s.b.srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.hs.Shutdown(ctx))
	require.NoError(t, s.ln.Shutdown(ctx))
	require.Zero(t, s.ln.Held())
	for _, rc := range conns {
		status, _, _ := rc.answer()
		require.Equal(t, http.StatusNoContent, status)
		_, err := rc.br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the connection is closed after the answer")
	}
}

// A pop answer declares its length, whether the pop was answered at once
// (net/http writes it) or held first (handlers/longpoll renders it), and
// so does a push's: an answer larger than net/http's buffers is not sent
// in chunks.
func TestPopAndPushAnswersHaveAContentLength(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: time.Hour})
	pad := strings.Repeat("x", 200)
	items := func(round int) []client.PushItem {
		its := make([]client.PushItem, 50) // about 25 kB of answer
		for i := range its {
			its[i] = item("cl", "", fmt.Sprintf("m%d-%d", round, i), map[string]any{"i": i, "pad": pad})
		}
		return its
	}
	check := func(res *http.Response, err error, status ...int) {
		t.Helper()
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, append(status, http.StatusOK)[0], res.StatusCode, "%s", body)
		require.Greater(t, len(body), 8192)
		require.Empty(t, res.TransferEncoding, "the answer went in chunks")
		require.Equal(t, int64(len(body)), res.ContentLength)
	}
	raw, err := json.Marshal(client.PushRequest{Items: items(1)})
	require.NoError(t, err)
	res, err := http.Post(b.url+"/api/v1/push", "application/json", bytes.NewReader(raw))
	check(res, err, http.StatusCreated)
	check(http.Get(b.url + "/api/v1/pop/queue/cl?batch=100&autoAck=true"))
	type answer struct {
		res *http.Response
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := http.Get(b.url + "/api/v1/pop/queue/cl?batch=100&autoAck=true&wait=true&timeout=60000")
		got <- answer{res, err}
	}()
	b.waitHeld("cl", 1)
	b.push(items(2)...)
	a := <-got
	check(a.res, a.err)
}
