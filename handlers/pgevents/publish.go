package pgevents

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// counters are the package's statistics.
type counters struct {
	published     atomic.Uint64
	publishErrors atomic.Uint64
	dropped       atomic.Uint64
	received      atomic.Uint64
	ignoredOwn    atomic.Uint64
	malformed     atomic.Uint64
	reconnects    atomic.Uint64
}

// Stats is a snapshot of the NOTIFY transport, for the stats route and
// the metrics.
type Stats struct {
	Channel       string `json:"channel"`
	ServerID      string `json:"server_id"`
	Listening     bool   `json:"listening"`
	ListenerPID   uint32 `json:"listener_pid,omitempty"` // backend of the LISTEN connection
	Published     uint64 `json:"published"`              // notifications sent
	PublishErrors uint64 `json:"publish_errors"`         // NOTIFYs that failed
	Dropped       uint64 `json:"dropped"`                // events lost: queue full, NOTIFY failed, name too long
	Received      uint64 `json:"received"`               // notifications handed to the handler
	IgnoredOwn    uint64 `json:"ignored_own"`            // our own notifications, skipped
	Malformed     uint64 `json:"malformed"`              // notifications that were not a valid event
	Reconnects    uint64 `json:"reconnects"`             // LISTEN connections opened after the first
}

// Stats returns a snapshot; safe at any time.
func (e *Events) Stats() Stats {
	return Stats{
		Channel:       Channel,
		ServerID:      e.cfg.ServerID,
		Listening:     e.listening.Load(),
		ListenerPID:   e.pid.Load(),
		Published:     e.stats.published.Load(),
		PublishErrors: e.stats.publishErrors.Load(),
		Dropped:       e.stats.dropped.Load(),
		Received:      e.stats.received.Load(),
		IgnoredOwn:    e.stats.ignoredOwn.Load(),
		Malformed:     e.stats.malformed.Load(),
		Reconnects:    e.stats.reconnects.Load(),
	}
}

// take empties what waits to be published.
func (e *Events) take() (map[string]map[string]struct{}, []event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ready, control := e.ready, e.control
	if len(ready) > 0 {
		e.ready = make(map[string]map[string]struct{})
	}
	e.control = nil
	return ready, control
}

// publish sends what the outbound methods gathered. After each round it
// waits out the coalescing window, so that a burst of pushes becomes a few
// notifications instead of one per push.
func (e *Events) publish(ctx context.Context) {
	window := time.NewTimer(e.cfg.Coalesce)
	window.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
		}
		ready, control := e.take()
		var payloads [][]byte
		for _, ev := range control {
			if ev.Type == TypeMaintenance {
				ev.V, ev.From = payloadVersion, e.cfg.ServerID
				payloads = append(payloads, marshal(ev))
				continue
			}
			payloads = e.appendSplit(payloads, ev, ev.Queues)
		}
		for tenant, set := range ready {
			queues := make([]string, 0, len(set))
			for q := range set {
				queues = append(queues, q)
			}
			slices.Sort(queues)
			payloads = e.appendSplit(payloads, event{Type: TypeReady, Tenant: tenant}, queues)
		}
		for _, p := range payloads {
			failing = e.send(ctx, p, failing)
		}
		window.Reset(e.cfg.Coalesce)
		select {
		case <-ctx.Done():
			return
		case <-window.C:
		}
	}
}

func (e *Events) appendSplit(dst [][]byte, ev event, queues []string) [][]byte {
	ev.V, ev.From = payloadVersion, e.cfg.ServerID
	payloads, skipped := split(ev, queues)
	e.stats.dropped.Add(uint64(skipped))
	return append(dst, payloads...)
}

// send publishes one payload and reports whether publishing is failing;
// a failure is logged when it starts and when it ends, not per event.
func (e *Events) send(parent context.Context, payload []byte, failing bool) bool {
	ctx, cancel := context.WithTimeout(parent, e.cfg.PublishTimeout)
	defer cancel()
	if err := e.q.EventNotify(ctx, string(payload)); err != nil {
		e.stats.dropped.Add(1)
		if parent.Err() != nil {
			return failing // stopping, not failing
		}
		e.stats.publishErrors.Add(1)
		if !failing {
			e.log.Warn("pg events publish failed", slog.String("error", err.Error()))
		}
		return true
	}
	e.stats.published.Add(1)
	if failing {
		e.log.Info("pg events publish recovered")
	}
	return false
}
