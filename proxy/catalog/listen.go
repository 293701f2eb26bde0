package catalog

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Backoff between attempts to bring the listening connection back.
const (
	listenRetryMin = 200 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Start runs the listener on queen_proxy_inval (its own connection, outside
// the pool) and the last_used_at flusher, until Stop. Idempotent.
func (c *Catalog) Start() {
	c.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		var wg sync.WaitGroup
		wg.Go(func() { c.listen(ctx) })
		wg.Go(func() { c.flushLoop(ctx) })
		if c.cfg.SweepInterval > 0 {
			wg.Go(func() { c.sweepLoop(ctx) })
		}
		go func() { wg.Wait(); close(c.done) }()
	})
}

// Stop ends the listener and flushes the last_used_at times once more.
// Idempotent; a Catalog that was never started just flushes.
func (c *Catalog) Stop() {
	c.stopOnce.Do(func() {
		started := false
		c.startOnce.Do(func() {}) // a Start after Stop does nothing
		if c.cancel != nil {
			started = true
			c.cancel()
		}
		if started {
			<-c.done
		}
		c.flush(context.Background())
	})
}

// listen keeps one connection LISTENing and applies what arrives. Each time
// the connection is (re)established the cache starts a new epoch.
func (c *Catalog) listen(ctx context.Context) {
	wait := listenRetryMin
	for ctx.Err() == nil {
		err := c.listenOnce(ctx)
		c.setListening(false)
		if ctx.Err() != nil {
			return
		}
		c.cfg.Logger.Warn("pxdb invalidation listener down; lookups bypass the cache until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, listenRetryMax)
	}
}

func (c *Catalog) listenOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	conn, err := pgx.ConnectConfig(cctx, c.cfg.Pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	c.setListening(true)
	c.cfg.Logger.Info("pxdb invalidation listener up", "channel", Channel)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		c.apply(n.Payload)
	}
}

// apply handles one announcement: a cluster id drops that cluster,
// "session:<jti>" revokes a session, "user:<id>" drops a user.
func (c *Catalog) apply(payload string) {
	if jti, ok := strings.CutPrefix(payload, "session:"); ok {
		c.MarkRevoked(jti)
		return
	}
	if user, ok := strings.CutPrefix(payload, "user:"); ok {
		if id, err := uuid.Parse(user); err == nil {
			c.forgetUser(id)
			return
		}
	}
	id, err := uuid.Parse(payload)
	if err != nil {
		c.cfg.Logger.Debug("pxdb announcement ignored", "payload", payload)
		return
	}
	c.Invalidate(id)
}

// sweepLoop deletes revocations of expired sessions, at Start and then
// every SweepInterval.
func (c *Catalog) sweepLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		c.sweepRevoked(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// flushLoop writes last_used_at for the keys used since the last flush.
func (c *Catalog) flushLoop(ctx context.Context) {
	t := time.NewTicker(touchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.flush(ctx)
			c.pruneRevoked()
		}
	}
}

// flush writes the batch in one statement. A failure keeps the keys for the
// next flush: a last-used time is worth a retry, not a log line per request.
func (c *Catalog) flush(ctx context.Context) {
	c.mu.Lock()
	ids := make([]uuid.UUID, 0, len(c.touched))
	for id := range c.touched {
		ids = append(ids, id)
	}
	clear(c.touched)
	c.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	if err := c.q.ApiKeysTouch(fctx, ids); err != nil {
		c.cfg.Logger.Warn("pxdb: recording key use failed; kept for the next flush", "err", err, "keys", len(ids))
		c.mu.Lock()
		for _, id := range ids {
			c.touched[id] = struct{}{}
		}
		c.mu.Unlock()
	}
}
