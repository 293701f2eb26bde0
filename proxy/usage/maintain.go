package usage

import (
	"context"
	"time"

	"github.com/queenforgo/queen/gen/pxdb"
)

// Start runs the flush loop (every FlushInterval) and the maintenance loop
// (at once, then every RollupInterval) until Stop. Idempotent.
func (m *Meter) Start() {
	m.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-m.stop
			cancel()
		}()
		go func() {
			defer close(m.done)
			flush := time.NewTicker(m.cfg.FlushInterval)
			defer flush.Stop()
			rollup := time.NewTicker(m.cfg.RollupInterval)
			defer rollup.Stop()
			m.Maintain(ctx)
			for {
				select {
				case <-ctx.Done():
					return
				case <-flush.C:
					_ = m.Flush(ctx)
				case <-rollup.C:
					m.Maintain(ctx)
				}
			}
		}()
	})
}

// Stop ends the loops and flushes once more within DrainTimeout; what pxdb
// does not take by then is spooled for the next start. Idempotent.
func (m *Meter) Stop() {
	m.stopOnce.Do(func() {
		started := false
		m.startOnce.Do(func() { close(m.done) }) // a Start after Stop does nothing
		select {
		case <-m.done:
		default:
			started = true
		}
		close(m.stop)
		if started {
			<-m.done
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DrainTimeout)
		defer cancel()
		if err := m.Flush(ctx); err != nil {
			m.cfg.Logger.Warn("final usage flush incomplete; the rest is spooled", "err", err, "spooled", m.Spooled())
		}
	})
}

// Maintain rolls up the closed UTC days, prunes whole days of minutes past
// QUEEN_PROXY_USAGE_KEEP_DAYS, and lifts the quota blocks of a month that
// ended (or whose quota was raised) even for clusters no longer metered.
// Every proxy may run it: each step recomputes or is idempotent.
func (m *Meter) Maintain(ctx context.Context) {
	step := func(what string, f func(context.Context) error) {
		sctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
		defer cancel()
		if err := f(sctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("usage maintenance step failed; the next run retries", "step", what, "err", err)
		}
	}
	step("rollup", func(ctx context.Context) error { _, err := m.q.UsageRollup(ctx); return err })
	step("prune", func(ctx context.Context) error { _, err := m.q.UsagePrune(ctx, int32(m.cfg.KeepDays)); return err })
	step("quota", func(ctx context.Context) error {
		_, err := m.q.UsageQuotasCheck(ctx, pxdb.UsageQuotasCheckParams{WarnPercent: int32(m.cfg.WarnPercent)})
		return err
	})
}
