package longpoll

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeParked is a wait that ends when the test says so.
type fakeParked struct {
	mu       sync.Mutex
	notify   func()
	ready    bool
	watched  chan struct{}
	canceled atomic.Bool
}

func (f *fakeParked) Watch(fn func()) {
	f.mu.Lock()
	f.notify = fn
	if f.ready {
		fn()
	}
	f.mu.Unlock()
	close(f.watched)
}

func (f *fakeParked) Resume(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ready {
		f.notify = nil
	}
	return f.ready
}

func (f *fakeParked) Cancel() { f.canceled.Store(true) }

func (f *fakeParked) Answer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "done")
}

// answerNow ends the wait, as a commit announced to a parked pop does.
func (f *fakeParked) answerNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = true
	if f.notify != nil {
		f.notify()
	}
}

// holdServer serves /park (held until the test answers it) and /now.
type holdServer struct {
	ln     *Listener
	addr   string
	parked chan *fakeParked
}

func serveHolding(t *testing.T) *holdServer {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &holdServer{ln: NewListener(tcp, nil), addr: tcp.Addr().String(), parked: make(chan *fakeParked, 100)}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/park" {
			_, _ = io.WriteString(w, "now")
			return
		}
		f := &fakeParked{watched: make(chan struct{})}
		if !s.ln.Hold(w, r, f) {
			http.Error(w, "not held", http.StatusInternalServerError)
			return
		}
		s.parked <- f
	})}
	go func() { _ = hs.Serve(s.ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.ln.Shutdown(ctx)
	})
	return s
}

type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (s *holdServer) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *client) send(path string) {
	c.t.Helper()
	_, err := io.WriteString(c.c, "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n")
	require.NoError(c.t, err)
}

func (c *client) body() string {
	c.t.Helper()
	require.NoError(c.t, c.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(c.t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return string(b)
}

func (s *holdServer) next(t *testing.T) *fakeParked {
	t.Helper()
	select {
	case f := <-s.parked:
		<-f.watched
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no request held")
		return nil
	}
}

// Parked held connections cost no goroutine each (the poller watches
// their sockets); a wake-up still answers each, and each connection then
// serves its next request.
func TestHeldParkedConnectionsHaveNoGoroutine(t *testing.T) {
	s := serveHolding(t)
	if s.ln.poll == nil {
		t.Fatal("no epoll set on linux")
	}
	base := runtime.NumGoroutine()
	const n = 60
	clients := make([]*client, n)
	waits := make([]*fakeParked, n)
	for i := range clients {
		clients[i] = s.dial(t)
		clients[i].send("/park")
		waits[i] = s.next(t)
	}
	require.Equal(t, n, s.ln.Held())
	// net/http's connection goroutines end after the hijack; what is left
	// is the poller's goroutine, not one per connection.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() < base+n/3 }, 10*time.Second, 5*time.Millisecond,
		"goroutines: %d, before %d", runtime.NumGoroutine(), base)
	for i, c := range clients {
		waits[i].answerNow()
		require.Equal(t, "done", c.body())
	}
	for _, c := range clients {
		c.send("/now")
		require.Equal(t, "now", c.body())
	}
	for _, f := range waits {
		require.False(t, f.canceled.Load())
	}
}

// A client that goes away while its connection is parked with the poller
// cancels the wait.
func TestHeldParkedClientGoneCancels(t *testing.T) {
	s := serveHolding(t)
	c := s.dial(t)
	c.send("/park")
	f := s.next(t)
	require.NoError(t, c.c.Close())
	require.Eventually(t, f.canceled.Load, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return s.ln.Held() == 0 }, 10*time.Second, 5*time.Millisecond)
}

// A wait already due when it is held is answered at once, and a
// connection idle after its answer is closed by Shutdown.
func TestHeldDueAtOnceAndIdleClosedOnShutdown(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := NewListener(tcp, nil)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &fakeParked{watched: make(chan struct{}), ready: true}
		if !ln.Hold(w, r, f) {
			http.Error(w, "not held", http.StatusInternalServerError)
		}
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	s := &holdServer{ln: ln, addr: tcp.Addr().String()}
	c := s.dial(t)
	c.send("/park")
	require.Equal(t, "done", c.body())
	require.Eventually(t, func() bool { return ln.Held() == 1 }, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ln.Shutdown(ctx))
	require.NoError(t, c.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the idle connection is closed")
}
