package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/sql/migrations"
)

// Tests of the live counts kept without reading every partition's messages
// (migration 0008): a partition stores last_seq - vacant_seqs messages, and
// only partitions with something past the cursor are probed.

// seqState is a partition's sequence bookkeeping next to what it stores.
type seqState struct {
	LastSeq, Vacant, Stored, Cursor int64
}

// seqs reads a partition's bookkeeping and its queue-mode cursor (0 when
// none).
func (b *testBundle) seqs(queue, partition string) seqState {
	b.t.Helper()
	var s seqState
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), `
		SELECT p.last_seq, p.vacant_seqs,
		       (SELECT count(*) FROM queen.messages m WHERE m.partition_id = p.id),
		       COALESCE((SELECT c.last_seq FROM queen.partition_consumers c
		                  WHERE c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'), 0)
		FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 AND p.name = $2`, queue, partition).Scan(&s.LastSeq, &s.Vacant, &s.Stored, &s.Cursor))
	return s
}

// requireExactTotals checks the invariant behind every total: each
// partition stores exactly last_seq - vacant_seqs messages.
func (b *testBundle) requireExactTotals() {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `
		SELECT q.name || '/' || p.name, p.last_seq, p.vacant_seqs,
		       (SELECT count(*) FROM queen.messages m WHERE m.partition_id = p.id)
		FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id`)
	require.NoError(b.t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		var last, vacant, stored int64
		require.NoError(b.t, rows.Scan(&name, &last, &vacant, &stored))
		require.Equal(b.t, stored, last-vacant, "%s: last_seq %d, vacant %d", name, last, vacant)
	}
	require.NoError(b.t, rows.Err())
}

// partitionCounts reads one partition's line of /resources/partitions.
func (b *testBundle) partitionCounts(queue, partition string) wirePartition {
	b.t.Helper()
	var page struct{ Partitions []wirePartition }
	b.doJSON("GET", "/api/v1/resources/partitions?limit=1000&queue="+url.QueryEscape(queue), nil, http.StatusOK, &page)
	for _, p := range page.Partitions {
		if p.Partition == partition {
			return p
		}
	}
	b.t.Fatalf("no partition %s/%s", queue, partition)
	return wirePartition{}
}

// queueCounts reads one queue's line of /resources/queues.
func (b *testBundle) queueCountsOf(queue string) wireQueue {
	b.t.Helper()
	var list struct{ Queues []wireQueue }
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &list)
	for _, q := range list.Queues {
		if q.Name == queue {
			return q
		}
	}
	b.t.Fatalf("no queue %s", queue)
	return wireQueue{}
}

// drain pops and acks everything the queue-mode group can get from a
// partition.
func (b *testBundle) drain(queue, partition string) int {
	b.t.Helper()
	n := 0
	for {
		p := b.pop("/api/v1/pop/queue/" + queue + "/partition/" + partition + "?batch=100")
		if p == nil {
			return n
		}
		for _, m := range p.Messages {
			require.True(b.t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
			n++
		}
	}
}

func TestCountsFullyConsumedPartitionsPendNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN("fc", "done", "d", 3)
	b.pushN("fc", "half", "h", 4)
	b.pushN("fc", "fresh", "f", 2)
	require.Equal(t, 3, b.drain("fc", "done"))
	p := b.pop("/api/v1/pop/queue/fc/partition/half?batch=2")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}

	require.Equal(t, seqState{LastSeq: 3, Stored: 3, Cursor: 3}, b.seqs("fc", "done"))
	done := b.partitionCounts("fc", "done")
	require.Equal(t, 3, done.Total)
	require.Zero(t, done.Pending)
	require.Zero(t, done.LagSeconds)
	half := b.partitionCounts("fc", "half")
	require.Equal(t, 4, half.Total)
	require.Equal(t, 2, half.Pending)
	fresh := b.partitionCounts("fc", "fresh")
	require.Equal(t, 2, fresh.Total)
	require.Equal(t, 2, fresh.Pending, "no queue-mode cursor: everything")

	require.Equal(t, wireCounts{Total: 9, Pending: 4}, b.queueCountsOf("fc").Messages)
	var status struct {
		Queues []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
			Messages   struct {
				Total, Pending, Completed int
			} `json:"messages"`
		} `json:"queues"`
	}
	b.doJSON("GET", "/api/v1/status/queues", nil, http.StatusOK, &status)
	require.Len(t, status.Queues, 1)
	require.Equal(t, 3, status.Queues[0].Partitions)
	require.Equal(t, 9, status.Queues[0].Messages.Total)
	require.Equal(t, 4, status.Queues[0].Messages.Pending)
	require.Equal(t, 5, status.Queues[0].Messages.Completed)

	// The overview reads the same counts along with the lag: a queue the
	// queue-mode group never read pends whole, and one message of half is
	// being processed.
	b.pushN("unread", "", "u", 3)
	lease := b.pop("/api/v1/pop/queue/fc/partition/half?batch=1")
	require.Len(t, lease.Messages, 1)
	var ov struct {
		Partitions int
		Messages   struct{ Total, Pending, Processing, Completed int }
		Lag        struct {
			Offset struct{ Avg, Median, Min, Max float64 }
		}
	}
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, 4, ov.Partitions)
	require.Equal(t, 12, ov.Messages.Total)
	require.Equal(t, 1, ov.Messages.Processing)
	require.Equal(t, 7-1, ov.Messages.Pending, "half 2, fresh 2, unread 3, less the one in flight")
	require.Equal(t, 5, ov.Messages.Completed)
	// Pairs of the queue-mode group, which reads fc only: done 0, half 2,
	// fresh 2.
	require.InDelta(t, 4.0/3, ov.Lag.Offset.Avg, 1e-9)
	require.Equal(t, 2.0, ov.Lag.Offset.Median)
	require.Equal(t, 2.0, ov.Lag.Offset.Max)
	require.Equal(t, wireCounts{Total: 9, Pending: 3, Processing: 1}, b.queueCountsOf("fc").Messages)
}

func TestCountsAfterDuplicatePushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN("dup", "p", "a", 2) // a0, a1: 1..2

	// Only duplicates: no number is reserved.
	require.Equal(t, "duplicate", b.push(item("dup", "p", "a1", 0))[0].Status)
	require.Equal(t, seqState{LastSeq: 2, Stored: 2}, b.seqs("dup", "p"))

	// A duplicate before a new message: duplicates are found before numbers
	// are reserved, so the new message takes the next number and none is
	// left vacant.
	out := b.push(item("dup", "p", "a0", 0), item("dup", "p", "a2", 0))
	require.Equal(t, []string{"duplicate", "queued"}, []string{out[0].Status, out[1].Status})
	require.Equal(t, seqState{LastSeq: 3, Stored: 3}, b.seqs("dup", "p"))

	// A duplicate after a new message, and another partition in the same
	// push.
	out = b.push(item("dup", "p", "a3", 0), item("dup", "q", "b0", 0), item("dup", "p", "a2", 0))
	require.Equal(t, []string{"queued", "queued", "duplicate"}, []string{out[0].Status, out[1].Status, out[2].Status})
	require.Equal(t, seqState{LastSeq: 4, Stored: 4}, b.seqs("dup", "p"))
	require.Equal(t, seqState{LastSeq: 1, Stored: 1}, b.seqs("dup", "q"))
	// Repeated inside one push: no number is reserved for the repeat.
	b.push(item("dup", "q", "b1", 0), item("dup", "q", "b1", 0))
	require.Equal(t, seqState{LastSeq: 2, Stored: 2}, b.seqs("dup", "q"))

	p := b.partitionCounts("dup", "p")
	require.Equal(t, 4, p.Total)
	require.Equal(t, 4, p.Pending)
	b.requireExactTotals()

	// Consumed to the end, the partition is no pop candidate any more: no
	// number past its newest message is left empty.
	require.Equal(t, 4, b.drain("dup", "p"))
	require.Equal(t, seqState{LastSeq: 4, Stored: 4, Cursor: 4}, b.seqs("dup", "p"))
	require.Zero(t, b.partitionCounts("dup", "p").Pending)
	require.Equal(t, "duplicate", b.push(item("dup", "p", "a3", 0))[0].Status)
	require.Equal(t, seqState{LastSeq: 4, Stored: 4, Cursor: 4}, b.seqs("dup", "p"))
	require.Nil(t, b.pop("/api/v1/pop/queue/dup/partition/p"))
	require.Equal(t, wireCounts{Total: 6, Pending: 2}, b.queueCountsOf("dup").Messages)
}

func TestCountsAfterMessageDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("del", "p", "m0", 0), item("del", "p", "m1", 1), item("del", "p", "m2", 2),
		item("del", "p", "m3", 3), item("del", "p", "m4", 4))
	pid := out[0].PartitionID
	p := b.pop("/api/v1/pop/queue/del/partition/p?batch=1")
	require.True(t, b.ack("m0", pid, "completed", "", p.LeaseID).Success)

	del := func(txID string) {
		t.Helper()
		var r struct{ Success bool }
		b.doJSON("DELETE", "/api/v1/messages/"+pid+"/"+txID, nil, http.StatusOK, &r)
		require.True(t, r.Success)
	}
	// The next message to consume: the cursor moves over its number.
	del("m1")
	require.Equal(t, seqState{LastSeq: 5, Vacant: 1, Stored: 4, Cursor: 2}, b.seqs("del", "p"))
	c := b.partitionCounts("del", "p")
	require.Equal(t, 4, c.Total)
	require.Equal(t, 3, c.Pending, "m2..m4")
	// The newest: the span ends at the newest stored message.
	del("m4")
	c = b.partitionCounts("del", "p")
	require.Equal(t, 3, c.Total, "m0, m2, m3")
	require.Equal(t, 2, c.Pending, "m2, m3")
	// An already consumed one: only the total changes.
	del("m0")
	c = b.partitionCounts("del", "p")
	require.Equal(t, 2, c.Total)
	require.Equal(t, 2, c.Pending)
	b.requireExactTotals()

	// Consumed to the end, then the newest message deleted: nothing pends.
	require.Equal(t, 2, b.drain("del", "p"))
	b.push(item("del", "p", "m5", 5))
	require.Equal(t, 1, b.partitionCounts("del", "p").Pending)
	del("m5")
	require.Equal(t, seqState{LastSeq: 6, Vacant: 4, Stored: 2, Cursor: 6}, b.seqs("del", "p"),
		"the cursor passed the deleted newest number")
	c = b.partitionCounts("del", "p")
	require.Equal(t, 2, c.Total)
	require.Zero(t, c.Pending)
	require.Nil(t, b.pop("/api/v1/pop/queue/del/partition/p"))
	b.requireExactTotals()
}

func TestCountsAfterRetentionAndEviction(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, adminOpts{batchSize: 2})
	ctx := t.Context()

	b.configure("ret", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(60)})
	b.pushN("ret", "p", "r", 5)
	b.pushN("ret", "q", "s", 3)
	p := b.pop("/api/v1/pop/queue/ret/partition/p?batch=2")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}
	b.age("ret", 2*time.Minute, "r0", "r1", "r2", "s0", "s1", "s2")

	b.configure("done", &client.QueueOptions{RetentionEnabled: ptr(true), CompletedRetentionSeconds: ptr(60)})
	b.pushN("done", "", "d", 4)
	p = b.pop("/api/v1/pop/queue/done?batch=3")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}
	b.age("done", 2*time.Minute)

	b.configure("wait", &client.QueueOptions{MaxWaitTimeSeconds: ptr(60)})
	b.pushN("wait", "", "w", 3)
	b.age("wait", 2*time.Minute, "w0", "w1")

	run, err := b.jobs.RunRetention(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(9), run.Total(""), "r0..r2, s0..s2 and d0..d2")
	run, err = b.jobs.RunEviction(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(2), run.Total(""))
	b.requireExactTotals()

	c := b.partitionCounts("ret", "p")
	require.Equal(t, 2, c.Total, "r3, r4")
	require.Equal(t, 2, c.Pending)
	c = b.partitionCounts("ret", "q")
	require.Zero(t, c.Total)
	require.Zero(t, c.Pending)
	require.Equal(t, wireCounts{Total: 2, Pending: 2}, b.queueCountsOf("ret").Messages)
	require.Equal(t, wireCounts{Total: 1, Pending: 1}, b.queueCountsOf("done").Messages)
	require.Equal(t, wireCounts{Total: 1, Pending: 1}, b.queueCountsOf("wait").Messages)

	// What remains is still delivered, and then nothing pends.
	require.Equal(t, 2, b.drain("ret", "p"))
	require.Zero(t, b.partitionCounts("ret", "p").Pending)
	require.Equal(t, 1, b.drain("wait", "Default"))
	require.Equal(t, wireCounts{Total: 1}, b.queueCountsOf("wait").Messages)
}

func TestCountsAfterQueueDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configureTagged("gone", "shop", "a")
	b.configureTagged("kept", "shop", "b")
	b.pushN("gone", "p", "g", 3)
	b.pushN("kept", "p", "k", 2)
	b.pushN("kept", "q", "l", 1)
	b.doJSON("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK, nil)

	var ov struct {
		Queues, Partitions int
		Messages           struct{ Total, Pending int }
	}
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, 1, ov.Queues)
	require.Equal(t, 3, ov.Partitions, "kept: Default, p, q")
	require.Equal(t, 3, ov.Messages.Total)
	require.Equal(t, 3, ov.Messages.Pending)
	var ns struct {
		Namespaces []struct {
			Queues, Partitions int
			Messages           wireCounts
		}
	}
	b.doJSON("GET", "/api/v1/resources/namespaces", nil, http.StatusOK, &ns)
	require.Len(t, ns.Namespaces, 1)
	require.Equal(t, 1, ns.Namespaces[0].Queues)
	require.Equal(t, 3, ns.Namespaces[0].Partitions)
	require.Equal(t, wireCounts{Total: 3, Pending: 3}, ns.Namespaces[0].Messages)
}

// TestVacantSeqsExactUnderConcurrency pushes to many partitions at once,
// with duplicates, while retention deletes whatever is stored and an
// operator deletes single messages: no statement deadlocks, and every
// partition still stores exactly last_seq - vacant_seqs messages.
func TestVacantSeqsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, adminOpts{batchSize: 7})
	ctx := t.Context()
	b.configure("busy", &client.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(1)})

	// send is b.do for other goroutines: it reports instead of failing.
	send := func(method, path string, body any) error {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, method, b.url+path, bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return nil
	}

	const pushers, rounds, parts = 4, 15, 8
	errs := make(chan error, pushers*rounds+2*rounds)
	var wg sync.WaitGroup
	for w := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				// Every pusher writes every partition, starting at a
				// different one; pushers 0 and 2 (1 and 3) send the same
				// ids, so half of what arrives is a duplicate.
				var items []client.PushItem
				for i := range parts {
					part := (i + w) % parts
					items = append(items, item("busy", fmt.Sprintf("p%d", part), fmt.Sprintf("r%d-%d-%d", r, part, w%2), i))
				}
				if err := send("POST", "/api/v1/push", map[string]any{"items": items}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range rounds {
			// An hour from now everything stored is past its retention.
			if _, err := b.jobs.RunRetention(ctx, time.Now().Add(time.Hour)); err != nil {
				errs <- err
			}
		}
	}()
	go func() {
		defer wg.Done()
		for r := range rounds {
			var pid string
			err := b.pool.QueryRow(ctx, `SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
				WHERE q.name = 'busy' AND p.name = $1`, fmt.Sprintf("p%d", r%parts)).Scan(&pid)
			if err != nil {
				continue // not created yet
			}
			if err := send("DELETE", "/api/v1/messages/"+pid+"/"+url.PathEscape(fmt.Sprintf("r%d-%d-0", r, r%parts)), nil); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b.requireExactTotals()
}

// TestMigrationBackfillsVacantSeqs runs migration 0008's backfill on
// partitions whose numbers went empty before the column existed.
func TestMigrationBackfillsVacantSeqs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN("old", "p", "o", 4)
	b.pushN("old", "q", "x", 2)
	b.configure("empty", nil)
	b.exec(`DELETE FROM queen.messages WHERE transaction_id IN ('o1', 'o3', 'x0', 'x1')`)
	b.exec(`UPDATE queen.partitions SET vacant_seqs = 0`)

	raw, err := migrations.FS.ReadFile("0008_partition_counts.up.sql")
	require.NoError(t, err)
	sql := string(raw)
	start := strings.Index(sql, "UPDATE queen.partitions p SET vacant_seqs")
	require.Positive(t, start)
	b.exec(sql[start : start+strings.Index(sql[start:], ";")])

	require.Equal(t, seqState{LastSeq: 4, Vacant: 2, Stored: 2}, b.seqs("old", "p"))
	require.Equal(t, seqState{LastSeq: 2, Vacant: 2}, b.seqs("old", "q"))
	b.requireExactTotals()
}

// TestOverviewFromMetricsRows checks the overview's numbers that come from
// the per-minute rows: ack failures, the ack rate and their age.
func TestOverviewFromMetricsRows(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	var ov struct {
		Messages struct {
			Failed int `json:"failed"`
		} `json:"messages"`
		Throughput struct {
			ProcessedPerSecond float64 `json:"processedPerSecond"`
		} `json:"throughput"`
		StatsAge int `json:"statsAge"`
	}
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, -1, ov.StatsAge, "no metrics written yet")

	workload(b, time.Now().UTC().Truncate(time.Minute))
	b.doJSON("POST", "/api/v1/stats/refresh", nil, http.StatusOK, nil)
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, 2, ov.Messages.Failed, "the dlq and the failed ack")
	require.InDelta(t, 10.0/300, ov.Throughput.ProcessedPerSecond, 1e-9, "10 acks in the last 5 minutes")
	require.GreaterOrEqual(t, ov.StatsAge, 0)
}
