package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

// retentionSeconds: messages stored before now-retentionSeconds go whatever
// their state (dead-letter rows with them); younger ones, and queues without
// retentionEnabled, keep everything. Each deletion is recorded once.
func TestRetentionDeletesOnlyExpiredMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := t.Context()

	q := b.queue("ret", queueOpts{enabled: true, retention: 60})
	p := b.partition(q, "p")
	b.messages(p, 3, t0.Add(-61*time.Second)) // p-1..p-3: expired
	b.messages(p, 1, t0.Add(-60*time.Second)) // p-4: exactly at the cutoff, stays
	b.messages(p, 2, t0.Add(-time.Second))    // p-5, p-6: young
	b.cursor(p, "__QUEUE_MODE__", 1, false)   // consumed or not makes no difference
	b.deadLetter(p, 2)
	p2 := b.partition(q, "other")
	b.messages(p2, 2, t0.Add(-time.Hour))

	off := b.queue("off", queueOpts{enabled: false, retention: 60, completed: 60})
	b.messages(b.partition(off, "o"), 2, t0.Add(-time.Hour))

	run, err := b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Equal(t, []Deleted{{Queue: "ret", Kind: KindRetention, Count: 5}}, run.Deleted)
	require.Equal(t, []string{"p-4", "p-5", "p-6"}, b.remaining("ret"))
	require.Equal(t, []string{"o-1", "o-2"}, b.remaining("off"))
	require.Zero(t, b.count(`SELECT count(*) FROM queen.dead_letter_queue`), "the DLQ row went with its message")
	require.Equal(t, []historyRow{{Queue: "ret", Kind: KindRetention, Count: 5, At: t0}}, b.history())

	// Nothing left to do: the run deletes and records nothing.
	run, err = b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.Empty(t, run.Deleted)
	require.Len(t, b.history(), 1)
}

// A run deletes at most BatchSize rows per DELETE and MaxBatches DELETEs per
// queue and kind; the rest waits for the next run.
func TestRetentionIsBoundedPerRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{BatchSize: 2, MaxBatches: 3})
	ctx := t.Context()
	q := b.queue("big", queueOpts{enabled: true, retention: 60})
	b.messages(b.partition(q, "a"), 6, t0.Add(-time.Hour))
	b.messages(b.partition(q, "b"), 5, t0.Add(-time.Hour))
	b.messages(b.partition(q, "c"), 1, t0) // young

	var counts []int64
	for range 4 {
		run, err := b.svc.RunRetention(ctx, t0)
		require.NoError(t, err)
		counts = append(counts, run.Total(KindRetention))
	}
	require.Equal(t, []int64{6, 5, 0, 0}, counts, "6 per run (3 batches of 2), then the short batch ends the run")
	require.Equal(t, []string{"c-1"}, b.remaining("big"))
	var recorded []int64
	for _, h := range b.history() {
		recorded = append(recorded, h.Count)
	}
	require.Equal(t, []int64{6, 5}, recorded, "one history row per run that deleted something")
}

// completedRetentionSeconds: an old message goes only once every cursor of
// its partition passed it; a partition nobody read keeps everything, a group
// that never read a partition is not waited for (docs/observability.md), and
// dead-lettered messages stay.
func TestCompletedRetentionWaitsForEveryCursor(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{BatchSize: 2})
	ctx := t.Context()
	old := t0.Add(-2 * time.Minute)
	q := b.queue("done", queueOpts{enabled: true, completed: 60})

	two := b.partition(q, "two") // two groups at different positions
	b.messages(two, 5, old)
	b.cursor(two, "fast", 5, false)
	b.cursor(two, "slow", 3, false)
	b.deadLetter(two, 2)

	unread := b.partition(q, "unread") // no cursor at all
	b.messages(unread, 2, old)

	young := b.partition(q, "young") // consumed but not old enough; slow never read it
	b.messages(young, 1, old)
	b.messages(young, 2, t0.Add(-30*time.Second))
	b.cursor(young, "fast", 3, false)

	leased := b.partition(q, "leased") // passed, with a live lease on later ones
	b.messages(leased, 3, old)
	b.cursor(leased, "fast", 2, true)

	run, err := b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, []Deleted{{Queue: "done", Kind: KindCompletedRetention, Count: 5}}, run.Deleted)
	require.Equal(t, []string{
		"leased-3",
		"two-2", "two-4", "two-5", // dead-lettered; not passed by slow
		"unread-1", "unread-2",
		"young-2", "young-3",
	}, b.remaining("done"))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM queen.dead_letter_queue`))
	require.Equal(t, []historyRow{{Queue: "done", Kind: KindCompletedRetention, Count: 5, At: t0}}, b.history())
	// Cursors never move past a stored message.
	require.Equal(t, 3, b.cursorAt(two, "slow"))
	require.Equal(t, 5, b.cursorAt(two, "fast"))
	require.Equal(t, 2, b.cursorAt(leased, "fast"))
}

// maxWaitTimeSeconds: old messages that some cursor has not passed (or that
// nobody read) are deleted, whatever retentionEnabled says; consumed ones and
// partitions under a live lease stay. Unleased cursors move over the gap.
func TestEvictionByMaxWaitTime(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{BatchSize: 2})
	ctx := t.Context()
	old := t0.Add(-2 * time.Minute)
	q := b.queue("ev", queueOpts{maxWait: 60}) // retentionEnabled is false

	part := b.partition(q, "part") // fast read all, slow read 2
	b.messages(part, 5, old)
	b.cursor(part, "fast", 5, false)
	b.cursor(part, "slow", 2, false)

	unread := b.partition(q, "unread")
	b.messages(unread, 2, old)

	leased := b.partition(q, "leased")
	b.messages(leased, 3, old)
	b.cursor(leased, "fast", 1, true)

	mixed := b.partition(q, "mixed") // old, then young
	b.messages(mixed, 2, old)
	b.messages(mixed, 1, t0.Add(-10*time.Second))
	b.cursor(mixed, "fast", 0, false)

	noWait := b.queue("nowait", queueOpts{})
	b.messages(b.partition(noWait, "n"), 1, old)

	run, err := b.svc.RunEviction(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, []Deleted{{Queue: "ev", Kind: KindEviction, Count: 7}}, run.Deleted)
	require.Equal(t, []string{"leased-1", "leased-2", "leased-3", "mixed-3", "part-1", "part-2"}, b.remaining("ev"))
	require.Equal(t, []string{"n-1"}, b.remaining("nowait"))
	require.Equal(t, []historyRow{{Queue: "ev", Kind: KindEviction, Count: 7, At: t0}}, b.history())

	require.Equal(t, 5, b.cursorAt(part, "slow"), "moved over the evicted 3..5 to the high-water mark")
	require.Equal(t, 5, b.cursorAt(part, "fast"))
	require.Equal(t, 2, b.cursorAt(mixed, "fast"), "moved up to just before the next stored message")
	require.Equal(t, 1, b.cursorAt(leased, "fast"), "a leased cursor is left alone")

	// Eviction is not retention: a retention run has nothing to do here.
	rrun, err := b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.Empty(t, rrun.Deleted)
}

// Old metrics rows go in bounded batches: per-minute worker and queue rows
// after MetricsRetention, system metrics and retention history after
// HistoryRetention.
func TestCleanupDeletesOldMetricsRows(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MetricsRetention: 24 * time.Hour, HistoryRetention: 48 * time.Hour, BatchSize: 2, MaxBatches: 2})
	ctx := t.Context()
	at := func(d time.Duration, i int) time.Time { return t0.Add(-d - time.Duration(i)*time.Minute) }
	for i := range 5 {
		b.exec(`INSERT INTO queen.worker_metrics (bucket, hostname, port, pid) VALUES ($1, 'h', 1, 1)`, at(25*time.Hour, i))
	}
	b.exec(`INSERT INTO queen.worker_metrics (bucket, hostname, port, pid) VALUES ($1, 'h', 1, 1)`, at(23*time.Hour, 0))
	for i := range 3 {
		b.exec(`INSERT INTO queen.queue_lag_metrics (bucket, queue_name, hostname, port, pid) VALUES ($1, 'q', 'h', 1, 1)`, at(25*time.Hour, i))
	}
	b.exec(`INSERT INTO queen.queue_lag_metrics (bucket, queue_name, hostname, port, pid) VALUES ($1, 'q', 'h', 1, 1)`, at(time.Hour, 0))
	for i := range 3 {
		b.exec(`INSERT INTO queen.system_metrics (bucket, hostname, port, pid, sample_count, metrics) VALUES ($1, 'h', 1, 1, 1, '{}')`, at(49*time.Hour, i))
	}
	b.exec(`INSERT INTO queen.system_metrics (bucket, hostname, port, pid, sample_count, metrics) VALUES ($1, 'h', 1, 1, 1, '{}')`, at(25*time.Hour, 0))
	b.exec(`INSERT INTO queen.retention_history (queue_name, retention_type, deleted_count, executed_at) VALUES
		('q', 'retention', 1, $1), ('q', 'retention', 1, $2)`, at(49*time.Hour, 0), at(25*time.Hour, 0))

	run, err := b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Equal(t, []Deleted{
		{Queue: "worker_metrics", Kind: "cleanup", Count: 4}, // 2 batches of 2: the budget
		{Queue: "queue_lag_metrics", Kind: "cleanup", Count: 3},
		{Queue: "system_metrics", Kind: "cleanup", Count: 3},
		{Queue: "retention_history", Kind: "cleanup", Count: 1},
	}, run.Deleted)
	run, err = b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, []Deleted{{Queue: "worker_metrics", Kind: "cleanup", Count: 1}}, run.Deleted)
	run, err = b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.Empty(t, run.Deleted)

	for table, want := range map[string]int{"worker_metrics": 1, "queue_lag_metrics": 1, "system_metrics": 1, "retention_history": 1} {
		require.Equal(t, want, b.count(`SELECT count(*) FROM queen.`+table), table)
	}
	require.Equal(t, 1, b.count(`SELECT count(*) FROM queen.worker_metrics WHERE bucket > $1`, t0.Add(-24*time.Hour)))
}

// While another broker holds a job's advisory lock, the job skips its run
// and touches nothing; the other jobs' locks are independent; the lock is
// never left behind on a pooled connection.
func TestJobsSkipWhileAnotherBrokerHoldsTheLock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := t.Context()
	q := b.queue("q", queueOpts{enabled: true, retention: 60, maxWait: 60})
	b.messages(b.partition(q, "p"), 2, t0.Add(-time.Hour))
	b.exec(`INSERT INTO queen.worker_metrics (bucket, hostname, port, pid) VALUES ($1, 'h', 1, 1)`, t0.Add(-30*24*time.Hour))

	other, err := b.pool.Acquire(ctx) // the other broker's session
	require.NoError(t, err)
	defer other.Release()
	jobs := []struct {
		name string
		key  int64
		run  func(context.Context, time.Time) (Run, error)
	}{
		{"retention", lockRetention, b.svc.RunRetention},
		{"eviction", lockEviction, b.svc.RunEviction},
		{"cleanup", lockCleanup, b.svc.RunCleanup},
	}
	for _, j := range jobs {
		_, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, j.key)
		require.NoError(t, err)
		run, err := j.run(ctx, t0)
		require.NoError(t, err)
		require.True(t, run.Skipped, "%s while its lock is held", j.name)
		require.Empty(t, run.Deleted)
		require.Equal(t, []string{"p-1", "p-2"}, b.remaining("q"))
		require.Equal(t, 1, b.count(`SELECT count(*) FROM queen.worker_metrics`))
		_, err = other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, j.key)
		require.NoError(t, err)
	}

	// With retention's lock held, eviction still runs.
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockRetention)
	require.NoError(t, err)
	run, err := b.svc.RunEviction(ctx, t0)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Equal(t, int64(2), run.Total(KindEviction))
	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockRetention)
	require.NoError(t, err)

	for _, j := range jobs {
		run, err := j.run(ctx, t0)
		require.NoError(t, err)
		require.False(t, run.Skipped, j.name)
	}
	require.Zero(t, b.count(`SELECT count(*) FROM queen.worker_metrics`))
	require.Zero(t, b.advisoryLocks(), "every run unlocked")
}

// Two brokers on one database: while one is inside a retention run, the
// other skips; afterwards a second run finds nothing, so the work is done
// and recorded exactly once. A run that fails still releases its lock.
func TestRetentionRunsOnOneBrokerAtATime(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := setup(t, Config{Pool: poolOn(t, url), Hostname: "a"})
	b := setup(t, Config{Pool: poolOn(t, url), Hostname: "b"})
	ctx := t.Context()
	q := a.queue("q", queueOpts{enabled: true, retention: 60})
	a.messages(a.partition(q, "p"), 4, t0.Add(-time.Hour))

	// Hold a row lock on one expired message: broker a's DELETE waits on
	// it, inside its run, holding the job lock.
	blocker, err := a.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(context.WithoutCancel(ctx)) }()
	_, err = blocker.Exec(ctx, `SELECT 1 FROM queen.messages WHERE transaction_id = 'p-1' FOR UPDATE`)
	require.NoError(t, err)

	type result struct {
		run Run
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		run, err := a.svc.RunRetention(ctx, t0)
		aDone <- result{run, err}
	}()
	eventually(t, "broker a to hold the retention lock and wait on the row", func() bool {
		return a.advisoryLocks() == 1 && a.waitingDeletes() == 1
	})

	// Bounded, so that a broker b that does not skip fails instead of
	// waiting on the row forever.
	bCtx, bCancel := context.WithTimeout(ctx, 10*time.Second)
	run, err := b.svc.RunRetention(bCtx, t0)
	bCancel()
	require.NoError(t, err)
	require.True(t, run.Skipped, "broker b skips while broker a runs")

	require.NoError(t, blocker.Rollback(ctx))
	res := <-aDone
	require.NoError(t, res.err)
	require.False(t, res.run.Skipped)
	require.Equal(t, int64(4), res.run.Total(KindRetention))

	run, err = b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Empty(t, run.Deleted, "nothing left: the work was done once")
	require.Len(t, a.history(), 1)
	require.Empty(t, a.remaining("q"))

	// A run cancelled while it waits fails, and leaves the lock free.
	a.messages(a.partition(q, "p2"), 1, t0.Add(-time.Hour))
	blocker, err = a.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(context.WithoutCancel(ctx)) }()
	_, err = blocker.Exec(ctx, `SELECT 1 FROM queen.messages WHERE transaction_id = 'p2-1' FOR UPDATE`)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		run, err := a.svc.RunRetention(runCtx, t0)
		aDone <- result{run, err}
	}()
	eventually(t, "broker a to wait on the row", func() bool { return a.waitingDeletes() == 1 })
	cancel()
	res = <-aDone
	require.Error(t, res.err)
	require.Zero(t, a.advisoryLocks(), "unlocked before the run returned")
	// pgx gives up on the connection when the context ends; the server may
	// still finish the abandoned DELETE once the row is free.
	require.NoError(t, blocker.Rollback(ctx))
	eventually(t, "the abandoned DELETE to end", func() bool { return a.runningDeletes() == 0 })
	run, err = b.svc.RunRetention(ctx, t0)
	require.NoError(t, err)
	require.False(t, run.Skipped)
	require.Empty(t, a.remaining("q"))
}

// Many concurrent runs on two brokers delete every expired message exactly
// once, and the history adds up to what was deleted.
func TestConcurrentRunsDeleteExactlyOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := setup(t, Config{Pool: poolOn(t, url), Hostname: "a", BatchSize: 3})
	b := setup(t, Config{Pool: poolOn(t, url), Hostname: "b", BatchSize: 3})
	q := a.queue("q", queueOpts{enabled: true, retention: 60})
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		a.messages(a.partition(q, name), 5, t0.Add(-time.Hour))
	}
	a.messages(a.partition(q, "young"), 1, t0)

	start := make(chan struct{})
	var wg sync.WaitGroup
	runs := make([]Run, 8)
	errs := make([]error, len(runs))
	for i := range runs {
		svc := a.svc
		if i%2 == 1 {
			svc = b.svc
		}
		wg.Go(func() {
			<-start
			runs[i], errs[i] = svc.RunRetention(t.Context(), t0)
		})
	}
	close(start)
	wg.Wait()
	var deleted, ran int64
	for i := range runs {
		require.NoError(t, errs[i])
		deleted += runs[i].Total("")
		if !runs[i].Skipped {
			ran++
		}
	}
	require.Positive(t, ran)
	require.Equal(t, int64(20), deleted)
	require.Equal(t, []string{"young-1"}, a.remaining("q"))
	require.Equal(t, 20, a.count(`SELECT COALESCE(sum(deleted_count), 0) FROM queen.retention_history`))
	require.Zero(t, a.advisoryLocks())
}

// Partitions that stored nothing for PartitionRetention go with their
// cursors, counted in partitions_deleted; a partition that still stores a
// message, a young one, and one a push holds locked right now stay.
func TestCleanupDeletesOldEmptyPartitions(t *testing.T) {
	t.Parallel()
	// The triggers stamp partitions_deleted rows with the real clock, years
	// before t0: keep them out of the metrics cleanup.
	b := setup(t, Config{PartitionRetention: 30 * 24 * time.Hour, MetricsRetention: 20 * 365 * 24 * time.Hour, BatchSize: 1, MaxBatches: 10})
	ctx := t.Context()
	q := b.queue("q", queueOpts{})
	old := t0.Add(-40 * 24 * time.Hour)
	emptyNever := b.partition(q, "never-used")
	b.exec(`UPDATE queen.partitions SET created_at = $2 WHERE id = $1`, emptyNever, old)
	emptied := b.partition(q, "emptied")
	b.messages(emptied, 2, old)
	b.cursor(emptied, "g", 2, false)
	b.exec(`DELETE FROM queen.messages WHERE partition_id = $1`, emptied)
	b.exec(`UPDATE queen.partitions SET vacant_seqs = 2, created_at = $2 WHERE id = $1`, emptied, old)
	full := b.partition(q, "full")
	b.messages(full, 1, old)
	b.exec(`UPDATE queen.partitions SET created_at = $2 WHERE id = $1`, full, old)
	young := b.partition(q, "young")
	b.exec(`UPDATE queen.partitions SET created_at = $2 WHERE id = $1`, young, t0.Add(-24*time.Hour))
	held := b.partition(q, "held")
	b.exec(`UPDATE queen.partitions SET created_at = $2 WHERE id = $1`, held, old)

	// A push holds "held" locked while the cleanup runs.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM queen.partitions WHERE id = $1 FOR UPDATE`, held)
	require.NoError(t, err)

	run, err := b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, []Deleted{{Queue: "partitions", Kind: "cleanup", Count: 2}}, run.Deleted)
	require.NoError(t, tx.Rollback(ctx))
	names := func() []string {
		rows, err := b.pool.Query(ctx, `SELECT name FROM queen.partitions ORDER BY name`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	require.Equal(t, []string{"full", "held", "young"}, names())
	require.Zero(t, b.count(`SELECT count(*) FROM queen.partition_consumers WHERE partition_id = $1`, emptied), "cursors go with the partition")
	require.Equal(t, []string{"full-1"}, b.remaining("q"))

	run, err = b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, []Deleted{{Queue: "partitions", Kind: "cleanup", Count: 1}}, run.Deleted, "the held one, once released")
	require.Equal(t, []string{"full", "young"}, names())
	require.Equal(t, 3, b.count(`SELECT COALESCE(sum(partitions_deleted), 0)::int FROM queen.queue_lag_metrics WHERE queue_name = 'q'`))

	run, err = b.svc.RunCleanup(ctx, t0)
	require.NoError(t, err)
	require.Empty(t, run.Deleted)
}
