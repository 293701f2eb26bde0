package longpoll

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Parked is a request waiting for its answer, as Hold holds it. Watch,
// Resume and Cancel are those of the broker's parked pop; Answer renders
// the answer the route's handler would have returned.
type Parked interface {
	// Watch sets fn, called from any goroutine (and never after the wait
	// ended) each time Resume has something to do; fn returns at once.
	Watch(fn func())
	// Resume does what is due; true when the wait ended and Answer may
	// be called.
	Resume(ctx context.Context) (done bool)
	// Cancel ends the wait: the client went away.
	Cancel()
	// Answer writes the answer, as the handler would have.
	Answer(w http.ResponseWriter)
}

// maxCarried caps what a held connection reads of the client's next
// request while its long-poll is parked (HTTP/1.1 pipelining, which no
// common client does); a client that sends more is closed.
const maxCarried = 64 << 10

// aLongTimeAgo is a read deadline that makes a blocked Read return now.
var aLongTimeAgo = time.Unix(1, 0)

// held is one connection taken out of net/http.
//
// While parked or idle between two requests it has no goroutine when the
// Listener's poller can watch its socket (Linux, not TLS): the poller
// starts one when the socket turns readable, and wake starts one when the
// wait has something to do. Otherwise one goroutine stays blocked in a
// 1-byte Read, woken by a read deadline in the past.
type held struct {
	l       *Listener
	conn    net.Conn
	p       Parked
	header  http.Header // what the middleware set before the hijack
	carried []byte      // read of the client's next request
	one     [1]byte
	fd      int    // conn's socket, for the poller; -1 when it cannot watch it
	pollID  uint64 // the poller's registration, under the poller's lock

	mu      sync.Mutex
	running bool // a goroutine owns the connection (else the poller watches it)
	woken   bool // wake came while running: look again before parking
	idle    bool // answered, waiting for the client's next request
}

// Hold takes r's connection out of net/http while p waits, and answers it
// when p is done. It returns false, having changed nothing, when it cannot:
// not HTTP/1.1 (HTTP/2 cannot be hijacked), a request that asked to close
// the connection or has a body, or the listener closed; the caller then
// waits in its goroutine as before. After true the handler must return
// without writing anything.
func (l *Listener) Hold(w http.ResponseWriter, r *http.Request, p Parked) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Close || r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return false
	}
	h := &held{l: l, p: p, header: w.Header().Clone(), fd: -1, running: true}
	if !l.add(h) {
		return false
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		l.remove(h)
		return false
	}
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Peek(n)
		h.carried = bytes.Clone(b)
	}
	// net/http cleared its deadlines on hijack; a conn of another server
	// may not have.
	_ = conn.SetDeadline(time.Time{})
	h.conn = conn
	if l.poll != nil {
		if fd, ok := socketFD(conn); ok {
			h.fd = fd
		}
	}
	// The handler's goroutine owns h (running) until park hands it to the
	// poller; a wake-up meanwhile (Watch calls wake at once when the pop
	// is already due) makes park refuse, and a goroutine looks.
	p.Watch(h.wake)
	if !h.park() {
		go h.watchRead()
	}
	return true
}

// wake has the wait's due work done: it makes the watching Read return,
// or starts a goroutine when none runs. The Parked calls it, under its own
// lock, only while the wait lasts; it does not block.
func (h *held) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.conn.SetReadDeadline(aLongTimeAgo)
	if h.running {
		h.woken = true
		return
	}
	h.running = true
	h.l.poll.disarm(h)
	go h.watchRead()
}

// park hands h to the poller and reports whether it did; the caller's
// goroutine then has nothing more to do with h. It does not when a wake-up
// came since the last look, or when the poller cannot watch h.
func (h *held) park() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.woken || h.fd < 0 || !h.l.poll.arm(h) {
		return false
	}
	h.running = false
	return true
}

// readable is the poller's hand-off: the socket has bytes, an end of file
// or an error, which a fresh goroutine reads.
func (h *held) readable() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		return
	}
	h.running = true
	if h.idle {
		go h.waitNext()
	} else {
		go h.watchRead()
	}
}

// kick closes the connection; one not running gets a goroutine first,
// whose Read then fails and ends the wait as a client gone away does.
func (h *held) kick() {
	h.mu.Lock()
	if !h.running {
		h.running = true
		h.l.poll.disarm(h)
		if h.idle {
			go h.waitNext()
		} else {
			go h.watchRead()
		}
	}
	h.mu.Unlock()
	_ = h.conn.Close()
}

// watchRead reads while h waits: it runs Resume when woken and ends the
// wait when the client goes away. After a look (Resume) it parks h with the
// poller, or goes on in a fresh goroutine: a look or an answer grows a
// goroutine's stack well past the 2 KiB a blocked Read needs, and ten
// thousand held connections should keep small stacks (the garbage
// collector shrinks a grown one only slowly, and stacks count twice in its
// heap goal).
func (h *held) watchRead() {
	for {
		n, err := h.conn.Read(h.one[:])
		if n > 0 {
			if len(h.carried) >= maxCarried {
				h.p.Cancel()
				h.drop()
				return
			}
			h.carried = append(h.carried, h.one[0])
		}
		switch {
		case err == nil:
			continue
		case !errors.Is(err, os.ErrDeadlineExceeded):
			// EOF or a reset: nobody will read the answer. Nothing was
			// claimed, so nothing is leased to nobody.
			h.p.Cancel()
			h.drop()
			return
		}
		// Cleared before Resume, with woken: a wake-up during Resume sets
		// both again.
		h.mu.Lock()
		h.woken = false
		_ = h.conn.SetReadDeadline(time.Time{})
		h.mu.Unlock()
		if h.p.Resume(context.Background()) {
			h.answer()
			return
		}
		if !h.park() {
			go h.watchRead()
		}
		return
	}
}

// answer writes the answer, then waits (still held, no longer parked) for
// the client's next request and hands the connection back to net/http.
func (h *held) answer() {
	// A wake-up during the last Resume may have set a deadline again;
	// none comes after it (Parked.Watch), so this clear is the last.
	h.mu.Lock()
	h.woken = false
	_ = h.conn.SetReadDeadline(time.Time{})
	h.mu.Unlock()
	rec := newRecorder(h.header)
	h.p.Answer(rec)
	h.header, h.p = nil, nil
	closing := h.l.isClosed()
	_, err := h.conn.Write(rec.response(closing))
	rec.release()
	if err != nil || closing {
		h.drop()
		return
	}
	if len(h.carried) > 0 {
		h.handBack()
		return
	}
	// Idle between two requests, as net/http's keep-alive waits (without
	// a read deadline: the server sets no IdleTimeout).
	if !h.l.setIdle(h) {
		h.drop()
		return
	}
	h.mu.Lock()
	h.idle = true
	h.mu.Unlock()
	if !h.park() {
		go h.waitNext()
	}
}

// waitNext waits for the first byte of the client's next request.
func (h *held) waitNext() {
	n, _ := h.conn.Read(h.one[:])
	if n == 0 {
		h.drop()
		return
	}
	h.carried = append(h.carried, h.one[0])
	h.handBack()
}

func (h *held) handBack() {
	h.l.remove(h)
	h.l.handBack(h.conn, h.carried)
}

// drop closes the connection and forgets it.
func (h *held) drop() {
	_ = h.conn.Close()
	h.l.remove(h)
}
