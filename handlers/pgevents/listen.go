package pgevents

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/db"
)

// closeTimeout bounds the goodbye on a listener connection.
const closeTimeout = 5 * time.Second

// listen keeps one LISTEN connection up until ctx ends, reconnecting after
// a jittered, doubling delay. Losing it is logged once per outage.
func (e *Events) listen(ctx context.Context) {
	backoff := e.cfg.ReconnectMin
	everUp, down := false, false
	for {
		up, err := e.listenOnce(ctx, func() {
			if everUp {
				e.stats.reconnects.Add(1)
			}
			if down || !everUp {
				e.log.Info("pg events listening", slog.String("channel", Channel))
			}
			everUp, down = true, false
			backoff = e.cfg.ReconnectMin
		})
		if ctx.Err() != nil {
			return
		}
		if up || !down {
			down = true
			e.log.Warn("pg events listener lost", slog.String("error", err.Error()))
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, e.cfg.ReconnectMax)
	}
}

// listenOnce opens the connection, subscribes, calls onUp, and hands every
// notification to the handler until the connection fails or ctx ends.
func (e *Events) listenOnce(ctx context.Context, onUp func()) (up bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, e.cfg.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := db.New(conn).EventListen(ctx); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	e.pid.Store(conn.PgConn().PID())
	e.listening.Store(true)
	defer e.listening.Store(false)
	onUp()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait: %w", err)
		}
		e.receive(n.Payload)
	}
}

// receive applies one notification.
func (e *Events) receive(payload string) {
	ev, err := decode(payload)
	switch {
	case err != nil:
		e.stats.malformed.Add(1)
		return
	case ev.From == e.cfg.ServerID:
		e.stats.ignoredOwn.Add(1)
		return
	}
	e.stats.received.Add(1)
	h := e.handlers
	switch ev.Type {
	case TypeReady:
		h.QueuesReady(ev.Tenant, ev.Queues)
	case TypeQueueConfig:
		for _, q := range ev.Queues {
			h.QueueConfigChanged(ev.Tenant, q, ev.Deleted)
		}
	case TypeMaintenance:
		if ev.Push != nil {
			h.PushMaintenanceChanged(*ev.Push)
		}
		if ev.Pop != nil {
			h.PopMaintenanceChanged(*ev.Pop)
		}
	}
}
