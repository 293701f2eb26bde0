package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/planmode"
)

// AdminWarmConnsDefault is how many connections WarmAdmin prepares: the
// overview page's four requests and the shell's arrive together, and the
// overview's heavy reads each take a connection of their own (eight were
// busy at once in the PostgreSQL log of a first refresh).
const AdminWarmConnsDefault = 8

// adminKeepWarmEvery is how often KeepAdminWarm asks the answer cache for
// the overview page's answers: below the cache's 5 minutes (aggcache's
// MaxAge), so that the answers it keeps never expire in between.
const adminKeepWarmEvery = 4 * time.Minute

// KeepAdminWarm runs until ctx ends (the broker starts it in the
// background once it serves): WarmAdmin on conns connections, then the
// overview page's four answers computed through the answer cache for the
// default tenant, as if the page had been opened, and again every
// adminKeepWarmEvery. So the page's first refresh, on a fresh broker or
// at any time after, is served what was computed at most a few minutes
// before (each answer carries its time), and the refresh after it the
// recomputation the cache starts behind it, instead of waiting for the
// passes over every partition. It does not wait for the dashboard to be
// opened: a first refresh on a broker nobody had asked within the cache's
// 5 minutes computed its answers while the caller waited (76–104 ms on the
// deep backlog of docs/benchmarks.md), and the recomputation costs what
// one refresh costs (about 100–300 ms of PostgreSQL time every 4 minutes
// there). An answer the cache does not keep (cheaper than 50 ms, a small
// database) costs that little each time.
func (s *Server) KeepAdminWarm(ctx context.Context, conns int) {
	tick := time.NewTicker(adminKeepWarmEvery)
	defer tick.Stop()
	s.keepAdminWarm(ctx, conns, tick.C)
}

// keepAdminWarm is KeepAdminWarm on the clock ticks: the overview page
// is computed again at each tick.
func (s *Server) keepAdminWarm(ctx context.Context, conns int, ticks <-chan time.Time) {
	s.warmAdminAtStart(ctx, conns)
	if s.cfg.AnswerCache == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		s.warmOverviewPage(ctx)
	}
}

// warmAdminAtStart is KeepAdminWarm's first step: the connections, then
// the overview page's answers.
func (s *Server) warmAdminAtStart(ctx context.Context, conns int) {
	if err := s.WarmAdmin(ctx, conns); err != nil && ctx.Err() == nil {
		s.log.Warn("warm the dashboard's connections", "err", err)
	}
	if s.cfg.AnswerCache != nil {
		s.warmOverviewPage(ctx)
	}
}

// warmOverviewPage asks the answer cache for what the dashboard's overview
// page asks (web/static/assets/views/overview.js), for the default tenant,
// all at once as the page does.
func (s *Server) warmOverviewPage(ctx context.Context) {
	now := time.Now().UTC()
	from, to := now.Add(-time.Hour).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)
	var page errgroup.Group
	page.Go(func() error { _, err := s.cachedOverview(ctx, api.GetOverviewRequestObject{}); return err })
	page.Go(func() error {
		_, err := s.GetStatus(ctx, api.GetStatusRequestObject{Params: api.GetStatusParams{From: &from, To: &to}})
		return err
	})
	page.Go(func() error { _, err := s.ListQueues(ctx, api.ListQueuesRequestObject{}); return err })
	page.Go(func() error { _, err := s.ListConsumerGroups(ctx, api.ListConsumerGroupsRequestObject{}); return err })
	if err := page.Wait(); err != nil && ctx.Err() == nil {
		s.log.Warn("compute the overview page's answers", "err", err)
	}
}

// WarmAdmin gets the dashboard's first computation off cold connections: it
// holds n connections of the pool at once (opening those it lacks) and runs
// on each the statements of the pages the dashboard polls, for a tenant
// that owns nothing, so that each backend has parsed and planned them
// (catalog and statistics caches loaded, a few milliseconds to tens of
// milliseconds a statement on a new backend) while reading no rows. The
// broker runs it once in the background after it starts serving
// (KeepAdminWarm); the connections go back to the pool idle, for the pages'
// first requests (pgxpool closes a connection idle for 30 minutes). It
// returns the errors; a connection it could not warm is left as it was.
func (s *Server) WarmAdmin(ctx context.Context, n int) error {
	conns := make([]*pgxpool.Conn, n)
	var acquire errgroup.Group
	for i := range conns {
		acquire.Go(func() (err error) {
			conns[i], err = s.pool.Acquire(ctx)
			return err
		})
	}
	err := acquire.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Release()
			}
		}
	}()
	if err != nil {
		return fmt.Errorf("acquire connections to warm: %w", err)
	}
	var warm errgroup.Group
	for _, c := range conns {
		warm.Go(func() error { return warmAdminStatements(ctx, db.New(planmode.Custom(c))) })
	}
	return warm.Wait()
}

// warmAdminStatements runs the dashboard's statements that read many rows
// for real arguments (sql/queries), with arguments that select nothing.
func warmAdminStatements(ctx context.Context, q *db.Queries) error {
	nobody := uuid.New() // no tenant or queue has this id
	ids := []uuid.UUID{nobody}
	future := pgtype.Timestamptz{Time: time.Now().Add(time.Hour), Valid: true}
	steps := []func() error{
		func() error { _, err := q.QueueListPage(ctx, db.QueueListPageParams{TenantID: &nobody}); return err },
		func() error { _, err := q.PartitionCountsByQueue(ctx, ids); return err },
		func() error { _, err := q.PartitionDeadLetterCounts(ctx, ids); return err },
		func() error { _, err := q.ConsumerLagHistogram(ctx, nobody); return err },
		func() error {
			_, err := q.MessageCountCreatedSince(ctx, db.MessageCountCreatedSinceParams{Since: future, TenantID: &nobody})
			return err
		},
		func() error {
			_, err := q.ConsumerLagByQueue(ctx, db.ConsumerLagByQueueParams{TenantID: nobody})
			return err
		},
		func() error {
			_, err := q.ConsumerLagOlderThan(ctx, db.ConsumerLagOlderThanParams{
				TenantID: nobody, MinLagSeconds: laggingThresholdDefault, MaxRows: 101,
			})
			return err
		},
		func() error { _, err := q.WorkerMetricsProcessedSince(ctx, future); return err },
		func() error {
			_, err := q.QueueConsumptionList(ctx, db.QueueConsumptionListParams{QueueName: nobody.String()})
			return err
		},
	}
	var errs []error
	for _, step := range steps {
		if err := step(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
