package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/sql/migrations"
)

// Tests of the lag and pending counts by sequence arithmetic (migration
// 0021): every count the admin routes show must equal what a count of the
// stored messages gives, after the operations that leave numbers vacant
// (deletes, retention) and those that do not (duplicates, acks, dead
// letters, partial batches).

// pairLag is what a group has left in one partition, counted from the
// messages themselves.
type pairLag struct {
	group, queue, partition string
	pending                 int64
	oldest                  pgtype.Timestamptz
}

// countedLags counts, for every (group, partition) pair of the queues a
// group reads (a cursor on one of its partitions, or a subscription), the
// stored messages past the group's cursor there, or without a cursor those
// stored after its subscription time (all when none), and the oldest of
// them: what queen.consumer_lag means, without its arithmetic.
func (b *testBundle) countedLags() []pairLag {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `
		WITH reads AS (
			SELECT DISTINCT pc.consumer_group, p.queue_id
			FROM queen.partition_consumers pc JOIN queen.partitions p ON p.id = pc.partition_id
			UNION
			SELECT s.consumer_group, q.id FROM queen.consumer_groups_metadata s
			JOIN queen.queues q ON q.tenant_id = s.tenant_id AND q.name = s.queue_name
		), pairs AS (
			SELECT r.consumer_group, q.name AS queue, p.id, p.name,
			       (SELECT c.last_seq FROM queen.partition_consumers c
			         WHERE c.partition_id = p.id AND c.consumer_group = r.consumer_group) AS cursor,
			       (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
			         WHERE s.tenant_id = q.tenant_id AND s.consumer_group = r.consumer_group AND s.queue_name = q.name
			           AND s.partition_name IN (p.name, '')
			         ORDER BY s.partition_name DESC LIMIT 1) AS start
			FROM reads r JOIN queen.queues q ON q.id = r.queue_id JOIN queen.partitions p ON p.queue_id = q.id
		)
		SELECT x.consumer_group, x.queue, x.name, count(m.id), min(m.created_at)
		FROM pairs x
		LEFT JOIN queen.messages m ON m.partition_id = x.id
		     AND m.seq > COALESCE(x.cursor, 0)
		     AND (x.cursor IS NOT NULL OR x.start IS NULL OR m.created_at > x.start)
		GROUP BY 1, 2, 3
		ORDER BY 1, 2, 3`)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []pairLag
	for rows.Next() {
		var l pairLag
		require.NoError(b.t, rows.Scan(&l.group, &l.queue, &l.partition, &l.pending, &l.oldest))
		out = append(out, l)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// requireLagsCounted compares every admin count with countedLags: the
// view's rows, the consumer-group listing, the overview's offset lag, and
// the queue-mode group's pending counts of the partition and queue
// listings and of the status.
func (b *testBundle) requireLagsCounted() {
	b.t.Helper()
	want := b.countedLags()
	require.NotEmpty(b.t, want)

	// The view: a row per pair with something left (or no cursor).
	rows, err := b.pool.Query(b.t.Context(), `
		SELECT l.consumer_group, l.queue_name, p.name, l.offset_lag, l.oldest_unconsumed_at
		FROM queen.consumer_lag l JOIN queen.partitions p ON p.id = l.partition_id
		ORDER BY 1, 2, 3`)
	require.NoError(b.t, err)
	viewed := map[[3]string]pairLag{}
	for rows.Next() {
		var l pairLag
		require.NoError(b.t, rows.Scan(&l.group, &l.queue, &l.partition, &l.pending, &l.oldest))
		viewed[[3]string{l.group, l.queue, l.partition}] = l
	}
	rows.Close()
	require.NoError(b.t, rows.Err())
	type sums struct {
		total, withLag int
		oldest         time.Time
	}
	perGroup := map[[2]string]*sums{}
	var offsets []lagCount
	qmPending := map[[2]string]int64{}
	for _, w := range want {
		got := viewed[[3]string{w.group, w.queue, w.partition}]
		require.Equal(b.t, w.pending, got.pending, "offset lag of %s on %s/%s", w.group, w.queue, w.partition)
		require.Equal(b.t, w.oldest, got.oldest, "oldest left for %s on %s/%s", w.group, w.queue, w.partition)
		s := perGroup[[2]string{w.group, w.queue}]
		if s == nil {
			s = &sums{}
			perGroup[[2]string{w.group, w.queue}] = s
		}
		s.total += int(w.pending)
		if w.oldest.Valid {
			s.withLag++
			if s.oldest.IsZero() || w.oldest.Time.Before(s.oldest) {
				s.oldest = w.oldest.Time
			}
		}
		offsets = append(offsets, lagCount{lag: w.pending, pairs: 1})
		if w.group == queueModeGroup {
			qmPending[[2]string{w.queue, w.partition}] = w.pending
		}
	}

	var groups []wireGroup
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &groups)
	require.Len(b.t, groups, len(perGroup))
	for _, g := range groups {
		s := perGroup[[2]string{g.Name, g.QueueName}]
		require.NotNil(b.t, s, "%s on %s", g.Name, g.QueueName)
		require.Equal(b.t, s.total, g.TotalLag, "%s on %s", g.Name, g.QueueName)
		require.Equal(b.t, s.withLag, g.PartitionsWithLag, "%s on %s", g.Name, g.QueueName)
		if s.oldest.IsZero() {
			require.Zero(b.t, g.MaxTimeLag)
		} else {
			require.InDelta(b.t, time.Since(s.oldest).Seconds(), g.MaxTimeLag, 2, "%s on %s", g.Name, g.QueueName)
		}
	}

	var ov struct {
		Lag struct {
			Offset struct{ Avg, Median, Min, Max float64 } `json:"offset"`
			Time   struct{ Avg, Median, Min, Max float64 } `json:"time"`
		} `json:"lag"`
		Messages wireCounts `json:"messages"`
	}
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	ws := lagStats(offsets)
	require.Equal(b.t, ws.Avg, ov.Lag.Offset.Avg)
	require.Equal(b.t, ws.Median, ov.Lag.Offset.Median)
	require.Equal(b.t, ws.Min, ov.Lag.Offset.Min)
	require.Equal(b.t, ws.Max, ov.Lag.Offset.Max)
	// The time lag, whole seconds since the oldest message left (0 when
	// none), within the seconds between the two readings.
	var ages []lagCount
	for _, w := range want {
		var age int64
		if w.oldest.Valid {
			age = max(int64(time.Since(w.oldest.Time)/time.Second), 0)
		}
		ages = append(ages, lagCount{lag: age, pairs: 1})
	}
	wt := lagStats(ages)
	require.InDelta(b.t, wt.Avg, ov.Lag.Time.Avg, 2)
	require.InDelta(b.t, wt.Median, ov.Lag.Time.Median, 2)
	require.InDelta(b.t, wt.Min, ov.Lag.Time.Min, 2)
	require.InDelta(b.t, wt.Max, ov.Lag.Time.Max, 2)

	// The listings count the queue-mode group: a queue it reads pends what
	// it has left, as above, any other what it stores; the overview sums
	// them.
	var page struct{ Partitions []wirePartition }
	b.doJSON("GET", "/api/v1/resources/partitions?limit=1000", nil, http.StatusOK, &page)
	queueTotals := map[string]int64{}
	var all int64
	for _, p := range page.Partitions {
		all += int64(p.Pending) // in-flight ones included, unlike the queue listing's
		left, read := qmPending[[2]string{p.Queue, p.Partition}]
		if !read {
			require.Equal(b.t, p.Total, p.Pending, "%s/%s: a queue the queue-mode group does not read pends whole", p.Queue, p.Partition)
			continue
		}
		require.Equal(b.t, left, int64(p.Pending), "queue-mode pending of %s/%s", p.Queue, p.Partition)
		queueTotals[p.Queue] += left
	}
	for queue, left := range queueTotals {
		c := b.queueCountsOf(queue).Messages
		require.Equal(b.t, left, int64(c.Pending+c.Processing), "queue-mode pending of %s", queue)
	}
	require.Equal(b.t, all, int64(ov.Messages.Pending+ov.Messages.Processing))
}

// requireDenseAboveVacantTop checks the invariant the arithmetic stands on:
// every number above a partition's vacant_top, up to its last_seq, holds a
// message.
func (b *testBundle) requireDenseAboveVacantTop() {
	b.t.Helper()
	var holes []string
	rows, err := b.pool.Query(b.t.Context(), `
		SELECT q.name || '/' || p.name || ' #' || s
		FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		CROSS JOIN LATERAL generate_series(p.vacant_top + 1, p.last_seq) AS s
		WHERE NOT EXISTS (SELECT 1 FROM queen.messages m WHERE m.partition_id = p.id AND m.seq = s)`)
	require.NoError(b.t, err)
	for rows.Next() {
		var h string
		require.NoError(b.t, rows.Scan(&h))
		holes = append(holes, h)
	}
	rows.Close()
	require.NoError(b.t, rows.Err())
	require.Empty(b.t, holes, "vacant numbers above vacant_top")
}

func TestLagArithmeticMatchesTheMessages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, adminOpts{batchSize: 10})
	ctx := t.Context()
	b.configure("ar", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(60)})

	// Nobody has read "fresh"; "dups" got duplicates (no number vacated).
	b.pushN("ar", "fresh", "f", 4)
	b.pushN("ar", "dups", "u", 2)
	out := b.push(item("ar", "dups", "u1", 0), item("ar", "dups", "u2", 0), item("ar", "dups", "u0", 0))
	require.Equal(t, []string{"duplicate", "queued", "duplicate"}, []string{out[0].Status, out[1].Status, out[2].Status})

	// A partial batch: three delivered, two acked, one still leased.
	b.pushN("ar", "partial", "p", 6)
	p := b.pop("/api/v1/pop/queue/ar/partition/partial?batch=3")
	require.Len(t, p.Messages, 3)
	require.True(t, b.ack("p0", p.PartitionID, "completed", "", p.LeaseID).Success)
	require.True(t, b.ack("p1", p.PartitionID, "completed", "", p.LeaseID).Success)

	// A dead letter: the cursor passes it.
	b.pushN("ar", "dlq", "d", 3)
	p = b.pop("/api/v1/pop/queue/ar/partition/dlq?batch=1")
	require.True(t, b.ack("d0", p.PartitionID, "dlq", "", p.LeaseID).Success)

	// The newest message deleted while the queue-mode group is behind: its
	// cursor is below vacant_top, and last_seq - cursor would count one too
	// many. Group g read it all before.
	out = b.push(item("ar", "taildel", "h0", 0), item("ar", "taildel", "h1", 1), item("ar", "taildel", "h2", 2),
		item("ar", "taildel", "h3", 3), item("ar", "taildel", "h4", 4))
	hid := out[0].PartitionID
	require.Len(t, b.pop("/api/v1/pop/queue/ar/partition/taildel?consumerGroup=g&autoAck=true&batch=10").Messages, 5)
	p = b.pop("/api/v1/pop/queue/ar/partition/taildel?batch=1")
	require.True(t, b.ack("h0", hid, "completed", "", p.LeaseID).Success)
	var r struct{ Success bool }
	b.doJSON("DELETE", "/api/v1/messages/"+hid+"/h4", nil, http.StatusOK, &r)
	require.True(t, r.Success)

	// A consumed message deleted below the cursor, then a new one pushed:
	// the cursor is above vacant_top again.
	b.pushN("ar", "below", "s", 4)
	require.Equal(t, 4, b.drain("ar", "below"))
	var belowID string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT p.id::text FROM queen.partitions p WHERE p.name = 'below'`).Scan(&belowID))
	b.doJSON("DELETE", "/api/v1/messages/"+belowID+"/s1", nil, http.StatusOK, &r)
	require.True(t, r.Success)
	b.push(item("ar", "below", "s4", 4))

	// Retention takes the two oldest of "ret", pushed before the others:
	// r0, which the queue-mode group consumed, and r1, the next it would
	// get. Its cursor stays below the vacated numbers, and the groups
	// without a cursor there count from r2, younger than the partition.
	b.pushN("ar", "ret", "r", 2)
	b.exec(`UPDATE queen.partitions SET created_at = created_at - interval '1 second' WHERE name = 'ret'`)
	b.exec(`UPDATE queen.messages m SET created_at = p.created_at FROM queen.partitions p
		WHERE p.id = m.partition_id AND p.name = 'ret'`)
	b.push(item("ar", "ret", "r2", 2), item("ar", "ret", "r3", 3))
	p = b.pop("/api/v1/pop/queue/ar/partition/ret?batch=1")
	require.True(t, b.ack("r0", p.PartitionID, "completed", "", p.LeaseID).Success)
	b.age("ar", 2*time.Minute, "r0", "r1")
	run, err := b.jobs.RunRetention(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(2), run.Total(""))

	// A group that subscribed for new messages only, then a new partition.
	require.Nil(t, b.pop("/api/v1/pop/queue/ar?consumerGroup=late&subscriptionMode=new"))
	b.pushN("ar", "newer", "n", 2)

	// Another queue, so that one queue's counts are told from every
	// queue's.
	b.pushN("other", "o", "o", 3)

	b.requireExactTotals()
	b.requireDenseAboveVacantTop()
	b.requireLagsCounted()
	b.requireQueueCountsCounted()

	// Without vacant_top the cursors there would count a vacated number as
	// a message left, and look for its time where there is none.
	require.Equal(t, 3, b.partitionCounts("ar", "taildel").Pending, "h1..h3")
	require.Equal(t, int64(5), b.seqsTop("ar", "taildel"))
	require.Equal(t, 2, b.partitionCounts("ar", "ret").Pending, "r2, r3")
	require.Equal(t, int64(2), b.seqsTop("ar", "ret"))

	// Draining everything leaves no lag anywhere.
	for _, part := range []string{"fresh", "dups", "dlq", "taildel", "below", "ret", "newer"} {
		b.drain("ar", part)
	}
	b.requireLagsCounted()
	b.requireQueueCountsCounted()
}

// seqsTop reads a partition's vacant_top.
func (b *testBundle) seqsTop(queue, partition string) int64 {
	b.t.Helper()
	var top int64
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), `
		SELECT p.vacant_top FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 AND p.name = $2`, queue, partition).Scan(&top))
	return top
}

// TestDeletersRaiseVacantTop: each statement that deletes messages raises
// vacant_top to the highest number it vacated, and pushes, pops and acks
// leave it alone.
func TestDeletersRaiseVacantTop(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, adminOpts{batchSize: 10})
	ctx := t.Context()
	b.configure("vt", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(60)})
	out := b.push(item("vt", "p", "a0", 0), item("vt", "p", "a1", 1), item("vt", "p", "a2", 2), item("vt", "p", "a3", 3))
	pid := out[0].PartitionID
	b.push(item("vt", "p", "a3", 3), item("vt", "p", "a4", 4))
	require.Equal(t, 5, b.drain("vt", "p"))
	require.Zero(t, b.seqsTop("vt", "p"), "pushes, duplicates, pops and acks vacate nothing")

	var r struct{ Success bool }
	b.doJSON("DELETE", "/api/v1/messages/"+pid+"/a2", nil, http.StatusOK, &r)
	require.Equal(t, int64(3), b.seqsTop("vt", "p"))
	b.doJSON("DELETE", "/api/v1/messages/"+pid+"/a0", nil, http.StatusOK, &r)
	require.Equal(t, int64(3), b.seqsTop("vt", "p"), "never lowered")

	b.age("vt", 2*time.Minute, "a3", "a4")
	run, err := b.jobs.RunRetention(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(2), run.Total(""))
	require.Equal(t, int64(5), b.seqsTop("vt", "p"))
	b.requireDenseAboveVacantTop()
}

// TestMigrationBackfillsVacantTop runs migration 0021's backfill: a
// partition with vacant numbers from before the column gets vacant_top at
// its last_seq (every cursor below probes, as before), the others 0.
func TestMigrationBackfillsVacantTop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN("old", "p", "o", 4)
	b.pushN("old", "q", "x", 2)
	b.exec(`DELETE FROM queen.messages WHERE transaction_id = 'o1'`)
	b.exec(`UPDATE queen.partitions SET vacant_seqs = 1 WHERE name = 'p'`)
	b.exec(`UPDATE queen.partitions SET vacant_top = 0`)

	raw, err := migrations.FS.ReadFile("0021_lag_by_arithmetic.up.sql")
	require.NoError(t, err)
	sql := string(raw)
	start := strings.Index(sql, "UPDATE queen.partitions SET vacant_top")
	require.Positive(t, start)
	b.exec(sql[start : start+strings.Index(sql[start:], ";")])

	require.Equal(t, int64(4), b.seqsTop("old", "p"))
	require.Zero(t, b.seqsTop("old", "q"))
	b.requireDenseAboveVacantTop()
	require.Equal(t, 3, b.partitionCounts("old", "p").Pending, "o0, o2, o3")
}

// TestOldestUnreadWalksPastCursorsAndDeletes: queen.oldest_unread finds the
// oldest message a group has left in the partitions it holds no cursor on,
// past more than one batch of its walk, with partitions created together,
// cursors on the oldest and the first messages of one deleted.
func TestOldestUnreadWalksPastCursorsAndDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var items []client.PushItem
	for i := range 250 {
		items = append(items, item("ou", fmt.Sprintf("p%03d", i), fmt.Sprintf("m%d", i), i))
	}
	b.push(items...)
	var qid string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT id::text FROM queen.queues WHERE name = 'ou'`).Scan(&qid))
	// Creation times spread over the partitions, newest first by name, with
	// groups of equal times.
	b.exec(`UPDATE queen.partitions p SET created_at = now() - make_interval(secs => 1000 - (r.n / 3))
		FROM (SELECT id, row_number() OVER (ORDER BY name) AS n FROM queen.partitions) r WHERE r.id = p.id`)
	b.exec(`UPDATE queen.messages m SET created_at = p.created_at FROM queen.partitions p WHERE p.id = m.partition_id`)
	oldest := func(group string) (got, want pgtype.Timestamptz) {
		t.Helper()
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT queen.oldest_unread($1, $2)`, qid, group).Scan(&got))
		require.NoError(t, b.pool.QueryRow(t.Context(), `
			SELECT min(m.created_at) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
			WHERE p.queue_id = $1 AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers c
			                                      WHERE c.partition_id = p.id AND c.consumer_group = $2)`, qid, group).Scan(&want))
		return got, want
	}
	got, want := oldest("g")
	require.True(t, want.Valid)
	require.Equal(t, want, got, "nobody read anything")

	// Cursors of g on the 150 oldest partitions: the walk passes them.
	b.exec(`INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq)
		SELECT id, 'g', 1 FROM queen.partitions ORDER BY created_at, name LIMIT 150`)
	got, want = oldest("g")
	require.Equal(t, want, got, "past 150 cursors")

	// The oldest partition g has not read loses its message and gets a
	// younger one: it is probed, and the next one is older.
	var pid string
	require.NoError(t, b.pool.QueryRow(t.Context(), `
		SELECT p.id::text FROM queen.partitions p
		WHERE NOT EXISTS (SELECT 1 FROM queen.partition_consumers c WHERE c.partition_id = p.id AND c.consumer_group = 'g')
		ORDER BY p.created_at, p.name LIMIT 1`).Scan(&pid))
	b.exec(`DELETE FROM queen.messages WHERE partition_id = $1`, pid)
	b.exec(`UPDATE queen.partitions SET vacant_seqs = 1, vacant_top = 1, last_seq = 2 WHERE id = $1`, pid)
	b.exec(`INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload, created_at)
		VALUES (gen_random_uuid(), $1, 2, 'late', '{}', now())`, pid)
	got, want = oldest("g")
	require.Equal(t, want, got, "a probed partition")

	// Every partition read: nothing left.
	b.exec(`INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq)
		SELECT id, 'g', 0 FROM queen.partitions ON CONFLICT DO NOTHING`)
	got, _ = oldest("g")
	require.False(t, got.Valid)

	// The listings agree with a count of the messages for every group.
	b.requireLagsCounted()
}
