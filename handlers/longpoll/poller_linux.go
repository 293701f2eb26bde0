//go:build linux

package longpoll

import (
	"net"
	"sync"
	"syscall"
)

// poller watches the sockets of parked held connections with one epoll set
// and one goroutine for all of them, so that a parked long-poll costs no
// goroutine (a goroutine blocked in Read costs a 2-8 KiB stack, and its
// stack counts in the garbage collector's goal). When a watched socket has
// something to read (the client's next bytes, its close or a reset) the
// poller forgets it and hands it to a fresh goroutine, which reads as a
// held connection always read (held.readable).
//
// Registrations are one-shot and keyed by a counter, never by the file
// descriptor: an event that epoll_wait returned for a connection closed
// since (and its descriptor reused) finds no registration and is dropped.
// A registered connection is only closed after disarm (held.kick), so
// that the kernel's set never keeps a stale descriptor.
type poller struct {
	epfd    int
	stopR   int // read end of the stop pipe, registered as id 0
	stopW   int
	start   sync.Once
	mu      sync.Mutex
	next    uint64
	regs    map[uint64]*held
	stopped bool
}

// pollEvents is how many readable sockets one epoll_wait returns at most.
const pollEvents = 128

// newPoller returns nil when the epoll set cannot be made; Hold then keeps
// a goroutine per held connection, as on other systems.
func newPoller() *poller {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fds[0], &ev); err != nil {
		_ = syscall.Close(epfd)
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return nil
	}
	return &poller{epfd: epfd, stopR: fds[0], stopW: fds[1], regs: make(map[uint64]*held)}
}

// socketFD is c's descriptor when the poller can watch it: a plain socket
// (a *tls.Conn may hold decrypted bytes the socket no longer shows), or a
// handed-back one with nothing left of its prefix.
func socketFD(c net.Conn) (int, bool) {
	if pc, ok := c.(*prefixConn); ok {
		if len(pc.prefix) > 0 {
			return -1, false
		}
		c = pc.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd = int(s) }); err != nil {
		return -1, false
	}
	return fd, fd >= 0
}

// arm watches h's socket until it is readable; false when it cannot (the
// poller stopped, or epoll refused), and the caller keeps reading itself.
// Called under h.mu.
func (p *poller) arm(h *held) bool {
	p.start.Do(func() { go p.run() })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.next++
	id := p.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT}
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, h.fd, &ev); err != nil {
		return false
	}
	p.regs[id] = h
	h.pollID = id
	return true
}

// disarm stops watching h's socket, if it is watched. Called under h.mu.
func (p *poller) disarm(h *held) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forget(h)
}

// forget removes h's registration; under p.mu.
func (p *poller) forget(h *held) {
	if h.pollID == 0 || p.regs[h.pollID] != h {
		return
	}
	delete(p.regs, h.pollID)
	h.pollID = 0
	if !p.stopped {
		_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, h.fd, nil)
	}
}

// run is the poller's goroutine: it waits in epoll_wait (a blocking system
// call: one thread, not a P) and hands each readable socket on.
func (p *poller) run() {
	events := make([]syscall.EpollEvent, pollEvents)
	for {
		n, err := syscall.EpollWait(p.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			p.shutdown()
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				p.shutdown()
				return
			}
			p.mu.Lock()
			h := p.regs[id]
			if h != nil {
				p.forget(h)
			}
			p.mu.Unlock()
			if h != nil {
				h.readable()
			}
		}
	}
}

// stop ends the poller once nothing is registered (Listener.Close with no
// connection held); a later arm returns false.
func (p *poller) stop() {
	p.start.Do(func() { go p.run() })
	_, _ = syscall.Write(p.stopW, []byte{0})
}

// shutdown releases the epoll set. A connection still registered (none,
// when stop is called as Listener does) would be handed on as readable,
// so that its goroutine finds out for itself.
func (p *poller) shutdown() {
	p.mu.Lock()
	p.stopped = true
	left := make([]*held, 0, len(p.regs))
	for id, h := range p.regs {
		delete(p.regs, id)
		h.pollID = 0
		left = append(left, h)
	}
	_ = syscall.Close(p.epfd)
	_ = syscall.Close(p.stopR)
	_ = syscall.Close(p.stopW)
	p.mu.Unlock()
	for _, h := range left {
		h.readable()
	}
}
