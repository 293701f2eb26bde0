package mesh

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// liveness tracks every peer that completed a handshake with us, by the
// server id it announced: the time of its last inbound frame decides whether
// it is up. Transitions are logged once each.
type liveness struct {
	log *slog.Logger

	mu      sync.Mutex
	servers map[string]*server
}

type server struct {
	id       string
	httpAddr atomic.Pointer[string]
	lastSeen atomic.Int64 // unix nanoseconds of the last inbound frame
	up       atomic.Bool  // last logged state
}

func newLiveness(log *slog.Logger) *liveness {
	return &liveness{log: log, servers: make(map[string]*server)}
}

// hello records a handshake and returns the server's entry, which the
// connection then touches on every frame.
func (l *liveness) hello(id, httpAddr string, now time.Time) *server {
	l.mu.Lock()
	s, ok := l.servers[id]
	if !ok {
		if len(l.servers) >= maxServers {
			l.evictOldest()
		}
		s = &server{id: id}
		l.servers[id] = s
	}
	l.mu.Unlock()
	if httpAddr != "" {
		s.httpAddr.Store(&httpAddr)
	}
	l.touch(s, now)
	return s
}

// maxServers bounds the liveness table: in open mode anyone can announce
// server ids, and they must not grow it without limit.
const maxServers = 1024

// evictOldest forgets the server heard from longest ago. l.mu is held.
func (l *liveness) evictOldest() {
	var oldest *server
	for _, s := range l.servers {
		if oldest == nil || s.lastSeen.Load() < oldest.lastSeen.Load() {
			oldest = s
		}
	}
	delete(l.servers, oldest.id)
}

// touch records an inbound frame; a server that was down is logged up.
func (l *liveness) touch(s *server, now time.Time) {
	s.lastSeen.Store(now.UnixNano())
	if !s.up.Load() && s.up.CompareAndSwap(false, true) {
		l.log.Info("mesh peer up", slog.String("peer_server_id", s.id))
	}
}

// sweep logs the servers whose last frame is older than the threshold.
func (l *liveness) sweep(now time.Time, threshold time.Duration) {
	l.mu.Lock()
	servers := make([]*server, 0, len(l.servers))
	for _, s := range l.servers {
		servers = append(servers, s)
	}
	l.mu.Unlock()
	for _, s := range servers {
		if now.UnixNano()-s.lastSeen.Load() > int64(threshold) && s.up.CompareAndSwap(true, false) {
			l.log.Warn("mesh peer down", slog.String("peer_server_id", s.id),
				slog.Int64("dead_threshold_ms", threshold.Milliseconds()))
		}
	}
}

// run sweeps until ctx ends, often enough to report a death within a
// quarter of the threshold.
func (l *liveness) run(ctx context.Context, threshold time.Duration) {
	t := time.NewTicker(min(max(threshold/4, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.sweep(now, threshold)
		}
	}
}

func (l *liveness) snapshot(now time.Time, threshold time.Duration) []ServerStats {
	l.mu.Lock()
	out := make([]ServerStats, 0, len(l.servers))
	for _, s := range l.servers {
		ago := now.UnixNano() - s.lastSeen.Load()
		st := ServerStats{ServerID: s.id, Alive: ago <= int64(threshold), LastSeenAgoMs: ago / int64(time.Millisecond)}
		if a := s.httpAddr.Load(); a != nil {
			st.HTTPAddr = *a
		}
		out = append(out, st)
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b ServerStats) int { return strings.Compare(a.ServerID, b.ServerID) })
	return out
}
