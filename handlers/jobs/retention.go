package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/db"
)

// Kinds of deletion, as recorded in queen.retention_history.
const (
	KindRetention          = "retention"
	KindCompletedRetention = "completed_retention"
	KindEviction           = "max_wait_time_eviction"
)

// Deleted is what one run deleted, per queue and kind.
type Deleted struct {
	Queue string
	Kind  string
	Count int64
}

// Run is the outcome of one retention, eviction or cleanup run. Skipped
// means another broker held the job's lock.
type Run struct {
	Skipped bool
	Deleted []Deleted
}

// Total adds up the deletions, of one kind when kind is not empty.
func (r Run) Total(kind string) int64 {
	var n int64
	for _, d := range r.Deleted {
		if kind == "" || d.Kind == kind {
			n += d.Count
		}
	}
	return n
}

// RunRetention applies each queue's retention as of now, when the queue has
// retentionEnabled: messages older than retentionSeconds go whatever their
// state; messages older than completedRetentionSeconds go once every consumer
// cursor of their partition passed them (dead-lettered ones stay).
func (s *Services) RunRetention(ctx context.Context, now time.Time) (Run, error) {
	return s.withLock(ctx, lockRetention, func() (Run, error) {
		queues, err := s.q.QueueListExpiring(ctx)
		if err != nil {
			return Run{}, fmt.Errorf("list queues with retention: %w", err)
		}
		var run Run
		for _, q := range queues {
			if !q.RetentionEnabled {
				continue
			}
			if q.RetentionSeconds > 0 {
				cutoff := now.Add(-time.Duration(q.RetentionSeconds) * time.Second)
				if err := s.deleteKind(ctx, &run, q, KindRetention, cutoff, now, s.q.MessageDeleteExpired); err != nil {
					return run, err
				}
			}
			if q.CompletedRetentionSeconds > 0 {
				cutoff := now.Add(-time.Duration(q.CompletedRetentionSeconds) * time.Second)
				del := func(ctx context.Context, p db.MessageDeleteCompletedParams) ([]db.MessageDeleteCompletedRow, error) {
					return s.q.MessageDeleteCompleted(ctx, p)
				}
				if err := s.deleteKind(ctx, &run, q, KindCompletedRetention, cutoff, now, adapt(del)); err != nil {
					return run, err
				}
			}
		}
		return run, nil
	})
}

// RunEviction deletes, as of now, the messages that waited longer than their
// queue's maxWaitTimeSeconds without every consumer cursor passing them.
// Partitions under a live lease wait for the next run.
func (s *Services) RunEviction(ctx context.Context, now time.Time) (Run, error) {
	return s.withLock(ctx, lockEviction, func() (Run, error) {
		queues, err := s.q.QueueListExpiring(ctx)
		if err != nil {
			return Run{}, fmt.Errorf("list queues with eviction: %w", err)
		}
		var run Run
		for _, q := range queues {
			if q.MaxWaitTimeSeconds <= 0 {
				continue
			}
			cutoff := now.Add(-time.Duration(q.MaxWaitTimeSeconds) * time.Second)
			del := func(ctx context.Context, p db.MessageDeleteWaitExpiredParams) ([]db.MessageDeleteWaitExpiredRow, error) {
				return s.q.MessageDeleteWaitExpired(ctx, p)
			}
			if err := s.deleteKind(ctx, &run, q, KindEviction, cutoff, now, adapt(del)); err != nil {
				return run, err
			}
		}
		return run, nil
	})
}

// deleteFunc deletes one batch and returns the partitions it touched, with
// how many messages each lost (the query also counts them as vacant
// sequence numbers, migration 0008).
type deleteFunc func(ctx context.Context, p db.MessageDeleteExpiredParams) ([]db.MessageDeleteExpiredRow, error)

// adapt lets the three DELETE queries, which take the same arguments and
// return the same rows in their own types, share deleteKind.
func adapt[P ~struct {
	QueueID   uuid.UUID
	Cutoff    pgtype.Timestamptz
	BatchSize int32
}, R ~struct {
	PartitionID uuid.UUID
	Deleted     int64
}](f func(context.Context, P) ([]R, error)) deleteFunc {
	return func(ctx context.Context, p db.MessageDeleteExpiredParams) ([]db.MessageDeleteExpiredRow, error) {
		rows, err := f(ctx, P(p))
		out := make([]db.MessageDeleteExpiredRow, len(rows))
		for i, r := range rows {
			out[i] = db.MessageDeleteExpiredRow(r)
		}
		return out, err
	}
}

// deleteKind deletes in batches until a batch comes back short or the run's
// budget is spent, moves the touched partitions' cursors over the gaps, and
// records what it deleted.
func (s *Services) deleteKind(ctx context.Context, run *Run, q db.QueenQueue, kind string, cutoff, now time.Time, del deleteFunc) error {
	p := db.MessageDeleteExpiredParams{
		QueueID: q.ID, Cutoff: pgtype.Timestamptz{Time: cutoff, Valid: true}, BatchSize: int32(s.cfg.BatchSize),
	}
	var total int64
	touched := map[uuid.UUID]bool{}
	for range s.cfg.MaxBatches {
		rows, err := del(ctx, p)
		if err != nil {
			return fmt.Errorf("%s of queue %q: %w", kind, q.Name, err)
		}
		var n int64
		for _, r := range rows {
			n += r.Deleted
			touched[r.PartitionID] = true
		}
		total += n
		if n < int64(s.cfg.BatchSize) {
			break
		}
	}
	if total == 0 {
		return nil
	}
	parts := make([]uuid.UUID, 0, len(touched))
	for id := range touched {
		parts = append(parts, id)
	}
	if _, err := s.q.PartitionConsumerSkipMissing(ctx, parts); err != nil {
		return fmt.Errorf("move cursors over deleted messages of %q: %w", q.Name, err)
	}
	if err := s.q.RetentionHistoryInsert(ctx, db.RetentionHistoryInsertParams{
		QueueName: q.Name, RetentionType: kind, DeletedCount: total,
		ExecutedAt: pgtype.Timestamptz{Time: now, Valid: true},
	}); err != nil {
		return fmt.Errorf("record %s of %q: %w", kind, q.Name, err)
	}
	run.Deleted = append(run.Deleted, Deleted{Queue: q.Name, Kind: kind, Count: total})
	s.log.Info("messages deleted", "queue", q.Name, "kind", kind, "count", total)
	return nil
}

// RunCleanup deletes metrics rows older than their retention as of now, and
// partitions that have stored nothing for PartitionRetention (the reference's
// PARTITION_CLEANUP_DAYS): with unlimited partitions created on first push,
// names used once would otherwise stay forever. That statement reads every
// partition row (no index can serve last_seq = vacant_seqs without costing
// pushes their HOT updates), once per cleanup interval.
func (s *Services) RunCleanup(ctx context.Context, now time.Time) (Run, error) {
	return s.withLock(ctx, lockCleanup, func() (Run, error) {
		metricsBefore := pgtype.Timestamptz{Time: now.Add(-s.cfg.MetricsRetention), Valid: true}
		historyBefore := pgtype.Timestamptz{Time: now.Add(-s.cfg.HistoryRetention), Valid: true}
		partitionsBefore := pgtype.Timestamptz{Time: now.Add(-s.cfg.PartitionRetention), Valid: true}
		batch := int32(s.cfg.BatchSize)
		var run Run
		for _, t := range []struct {
			table string
			del   func() (int64, error)
		}{
			{"worker_metrics", func() (int64, error) {
				return s.q.WorkerMetricsDeleteBefore(ctx, db.WorkerMetricsDeleteBeforeParams{Before: metricsBefore, BatchSize: batch})
			}},
			{"queue_lag_metrics", func() (int64, error) {
				return s.q.QueueLagMetricsDeleteBefore(ctx, db.QueueLagMetricsDeleteBeforeParams{Before: metricsBefore, BatchSize: batch})
			}},
			{"system_metrics", func() (int64, error) {
				return s.q.SystemMetricsDeleteBefore(ctx, db.SystemMetricsDeleteBeforeParams{Before: historyBefore, BatchSize: batch})
			}},
			{"retention_history", func() (int64, error) {
				return s.q.RetentionHistoryDeleteBefore(ctx, db.RetentionHistoryDeleteBeforeParams{Before: historyBefore, BatchSize: batch})
			}},
			{"partitions", func() (int64, error) {
				return s.q.PartitionDeleteEmptyBefore(ctx, db.PartitionDeleteEmptyBeforeParams{Before: partitionsBefore, BatchSize: batch})
			}},
		} {
			var total int64
			for range s.cfg.MaxBatches {
				n, err := t.del()
				if err != nil {
					return run, fmt.Errorf("clean up %s: %w", t.table, err)
				}
				total += n
				if n < int64(batch) {
					break
				}
			}
			if total > 0 {
				run.Deleted = append(run.Deleted, Deleted{Queue: t.table, Kind: "cleanup", Count: total})
			}
		}
		return run, nil
	})
}

// withLock runs fn while this broker holds the job's advisory lock, on a
// connection pinned for the run. When another broker holds it, the run is
// skipped.
func (s *Services) withLock(ctx context.Context, key int64, fn func() (Run, error)) (Run, error) {
	conn, err := s.cfg.Pool.Acquire(ctx)
	if err != nil {
		return Run{}, fmt.Errorf("acquire connection for job lock: %w", err)
	}
	defer conn.Release()
	q := db.New(conn)
	ok, err := q.AdvisoryLockTry(ctx, key)
	if err != nil {
		return Run{}, fmt.Errorf("take job lock: %w", err)
	}
	if !ok {
		return Run{Skipped: true}, nil
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := q.AdvisoryUnlock(unlockCtx, key); err != nil {
			// The session may still hold the lock: do not hand it back to
			// the pool.
			_ = conn.Conn().Close(unlockCtx)
		}
	}()
	return fn()
}
