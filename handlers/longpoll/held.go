package longpoll

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
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
type held struct {
	l       *Listener
	conn    net.Conn
	p       Parked
	header  http.Header // what the middleware set before the hijack
	carried []byte      // read of the client's next request
	one     [1]byte
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
	h := &held{l: l, p: p, header: w.Header().Clone()}
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
	go h.watch()
	return true
}

// wake makes the watching Read return; the Parked calls it, under its own
// lock, only while the wait lasts.
func (h *held) wake() { _ = h.conn.SetReadDeadline(aLongTimeAgo) }

// watch is the held connection's one goroutine: blocked in a 1-byte Read
// while parked, it runs Resume when woken, and ends the wait when the
// client goes away.
func (h *held) watch() {
	h.p.Watch(h.wake)
	h.watchRead()
}

// watchRead is watch's loop. After a look (Resume) or an answer, which
// grow a goroutine's stack well past the 2 KiB a blocked Read needs, it
// goes on in a fresh goroutine, so that ten thousand held connections keep
// small stacks (the garbage collector shrinks a grown one only slowly, and
// stacks count twice in its heap goal).
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
		// Cleared before Resume: a wake-up during Resume sets it again.
		_ = h.conn.SetReadDeadline(time.Time{})
		if h.p.Resume(context.Background()) {
			h.answer()
			return
		}
		go h.watchRead()
		return
	}
}

// answer writes the answer, then waits (still held, no longer parked) for
// the client's next request and hands the connection back to net/http.
func (h *held) answer() {
	// A wake-up during the last Resume may have set a deadline again;
	// none comes after it (Parked.Watch), so this clear is the last.
	_ = h.conn.SetReadDeadline(time.Time{})
	rec := &recorder{header: h.header}
	h.p.Answer(rec)
	h.header, h.p = nil, nil
	closing := h.l.isClosed()
	if _, err := h.conn.Write(rec.response(closing)); err != nil || closing {
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
	go h.idle()
}

// idle waits for the first byte of the client's next request.
func (h *held) idle() {
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
