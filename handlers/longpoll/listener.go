// Package longpoll holds parked HTTP/1.1 long-polls outside net/http.
//
// net/http spends about 25 KiB on every request it is serving: the
// connection's goroutine (which runs the handler, so it waits with the
// handler's whole stack), its background reader, a 4 KiB read buffer, a
// 4 KiB write buffer and a 2 KiB response buffer. A long-poll that parks for
// thirty seconds needs none of that. Hold takes such a request's connection
// out of net/http (Hijack) and keeps only the connection and the answer's
// headers. On Linux the Listener's epoll set watches the sockets of all
// held connections from one goroutine (poller_linux.go), and a goroutine is
// started only when a client sends or goes away or the wait has something
// to do; elsewhere, and over TLS, one small goroutine per connection stays
// blocked in a 1-byte Read, woken by a read deadline in the past. Once the
// wait is over, the answer is written with the bytes net/http would have
// written and the connection goes back to the same http.Server through the
// Listener, so keep-alive goes on as before.
//
// The package knows nothing of pops: what is held is a Parked.
package longpoll

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// Listener is the http.Server's listener: Accept yields the connections of
// the listener it wraps and the connections Hold hands back after answering.
// It also does the TLS wrapping, when configured, so that a handed-back
// *tls.Conn is never wrapped twice: serve it with Serve, not ServeTLS.
type Listener struct {
	inner    net.Listener
	tls      *tls.Config
	start    sync.Once
	accepted chan accepted
	back     chan net.Conn // unbuffered: a conn is either taken by Accept or closed
	done     chan struct{}

	poll *poller // nil: every held connection keeps a goroutine

	mu          sync.Mutex
	closed      bool
	held        map[*held]bool // true while idle between two requests
	pollStopped bool
}

type accepted struct {
	c   net.Conn
	err error
}

// NewListener wraps inner. tlsConfig, when not nil, makes every accepted
// connection a TLS server connection (and should offer "h2" in NextProtos
// for HTTP/2, which is never held).
func NewListener(inner net.Listener, tlsConfig *tls.Config) *Listener {
	return &Listener{
		inner: inner, tls: tlsConfig,
		accepted: make(chan accepted), back: make(chan net.Conn), done: make(chan struct{}),
		held: make(map[*held]bool), poll: newPoller(),
	}
}

// Accept returns the next connection, new or handed back.
func (l *Listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.accepted:
		if a.err != nil {
			return nil, a.err
		}
		if l.tls != nil {
			return tls.Server(a.c, l.tls), nil
		}
		return a.c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop feeds Accept from the wrapped listener, until it fails for
// good or Close.
func (l *Listener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		select {
		case l.accepted <- accepted{c, err}:
		case <-l.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if ne, ok := err.(net.Error); err != nil && (!ok || !ne.Timeout()) {
			return
		}
	}
}

// Addr is the wrapped listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops Accept (http.Server's Shutdown and Close call it) and closes
// the held connections that are idle between two requests, as net/http
// closes its idle ones. Connections with a parked request stay until they
// are answered (a drain answers them) or Shutdown gives up on them.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for h, idle := range l.held {
		if idle {
			h.kick()
		}
	}
	l.stopPollerIfDone()
	l.mu.Unlock()
	return l.inner.Close()
}

// Shutdown closes the listener and waits until every held request is
// answered; when ctx ends first, it closes the connections still held and
// returns ctx's error. Call it after http.Server.Shutdown, which does not
// know about held connections.
func (l *Listener) Shutdown(ctx context.Context) error {
	_ = l.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		n := len(l.held)
		for h, idle := range l.held {
			if idle || ctx.Err() != nil {
				h.kick()
			}
		}
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// Held is the number of connections held now, parked or idle (for tests
// and metrics).
func (l *Listener) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// add registers h; false once the listener is closed.
func (l *Listener) add(h *held) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.held[h] = false
	return true
}

// setIdle marks h idle between two requests; false once the listener is
// closed (then the connection must be closed).
func (l *Listener) setIdle(h *held) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.held[h] = true
	return true
}

func (l *Listener) remove(h *held) {
	l.mu.Lock()
	delete(l.held, h)
	l.stopPollerIfDone()
	l.mu.Unlock()
}

// stopPollerIfDone ends the poller's goroutine once the listener is closed
// and holds nothing; under l.mu.
func (l *Listener) stopPollerIfDone() {
	if l.closed && len(l.held) == 0 && l.poll != nil && !l.pollStopped {
		l.pollStopped = true
		l.poll.stop()
	}
}

// handBack gives c to the http.Server again, with the bytes already read
// from it in front; a closed listener closes it instead.
func (l *Listener) handBack(c net.Conn, carried []byte) {
	if pc, ok := c.(*prefixConn); ok {
		// Not wrapped twice: what is left of the old prefix comes first.
		carried = append(pc.prefix, carried...)
		c = pc.Conn
	}
	if len(carried) > 0 {
		c = &prefixConn{Conn: c, prefix: carried}
	}
	select {
	case l.back <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// prefixConn reads prefix before the connection: bytes a held connection
// read of the client's next request.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http half-close a handed-back TCP connection, as it
// does a fresh one.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (l *Listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
