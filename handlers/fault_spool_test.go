package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/sql/pgtest"
)

// Fault tests. The ones that stop PostgreSQL are not parallel: the cluster
// is shared by every test of the process (pgtest.Stop). Each asserts zero
// loss and zero duplicates of what was acknowledged.

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// waitUntil polls cond every few milliseconds, for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	end := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-end:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pushLog is what producers were told, per transactionId.
type pushLog struct {
	mu    sync.Mutex
	acked map[string]string   // txID -> status
	order map[string][]string // partition -> acknowledged txIDs in order
	count map[string]int      // status -> items
	fails int                 // requests answered other than 201
}

func newPushLog() *pushLog {
	return &pushLog{acked: map[string]string{}, order: map[string][]string{}, count: map[string]int{}}
}

func (l *pushLog) n(status string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[status]
}

// produce pushes batches of 5 to partition part of queue until stop.
func (l *pushLog) produce(t *testing.T, url, queue, part string, stop <-chan struct{}) {
	for seq := 0; ; seq += 5 {
		select {
		case <-stop:
			return
		default:
		}
		var items []any
		var ids []string
		for i := range 5 {
			id := fmt.Sprintf("%s-%06d", part, seq+i)
			ids = append(ids, id)
			items = append(items, item(queue, part, id, map[string]any{"id": id}))
		}
		raw, _ := json.Marshal(map[string]any{"items": items})
		resp, err := http.Post(url+"/api/v1/push", "application/json", bytesReader(raw))
		if err != nil {
			t.Errorf("push: %v", err)
			return
		}
		var res []pushed
		status := resp.StatusCode
		if status == http.StatusCreated {
			err = json.NewDecoder(resp.Body).Decode(&res)
		}
		resp.Body.Close()
		l.mu.Lock()
		if status != http.StatusCreated || err != nil {
			l.fails++
			l.mu.Unlock()
			continue
		}
		for i, r := range res {
			l.acked[ids[i]] = r.Status
			l.count[r.Status]++
			l.order[part] = append(l.order[part], ids[i])
		}
		l.mu.Unlock()
	}
}

// drainQueue pops everything (autoAck) and returns deliveries per partition.
func (b *testBundle) drainQueue(queue string) map[string][]string {
	b.t.Helper()
	got := map[string][]string{}
	for {
		p := b.pop("/api/v1/pop/queue/" + queue + "?batch=1000&partitions=64&autoAck=true")
		if p == nil {
			return got
		}
		for _, m := range p.Messages {
			got[m.Partition] = append(got[m.Partition], m.TransactionID)
		}
	}
}

// verify: every acknowledged push delivered exactly once, in order per
// partition; nothing delivered twice.
func (l *pushLog) verify(t *testing.T, delivered map[string][]string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]int{}
	total := 0
	for p, ids := range delivered {
		pos := 0
		for _, id := range ids {
			seen[id]++
			total++
			if _, ok := l.acked[id]; ok {
				for pos < len(l.order[p]) && l.order[p][pos] != id {
					pos++
				}
				require.Less(t, pos, len(l.order[p]), "partition %s: %s out of order", p, id)
			}
		}
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "%s delivered %d times", id, n)
	}
	for id, st := range l.acked {
		require.Equal(t, 1, seen[id], "%s answered %s, delivered %d times", id, st, seen[id])
	}
	return total
}

// PostgreSQL stops during a push load and starts again: pushes during the
// outage are answered `buffered` (spooled, fsynced), none fails, and after
// the restart the spool's replay delivers every one of them exactly once,
// in order per partition, behind the ones that were queued before.
func TestFaultPostgresStoppedDuringPushLoad(t *testing.T) {
	b, sp := setupSpool(t, "")
	b.push(item("outage", "p0", "warm-up", 0)) // the queue exists before the outage
	l := newPushLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() { l.produce(t, b.url, "outage", fmt.Sprintf("p%d", p), stop) })
	}
	waitUntil(t, "queued pushes", func() bool { return l.n("queued") >= 400 })
	pgtest.Stop(t)
	waitUntil(t, "buffered pushes", func() bool { return l.n("buffered") >= 400 })
	var st map[string]any
	b.doJSON("GET", "/api/v1/status/buffers", nil, http.StatusOK, &st)
	require.Equal(t, false, st["dbHealthy"])
	files, _ := filepath.Glob(filepath.Join(sp.Dir(), "queen-*"))
	require.NotEmpty(t, files)
	pgtest.Start(t)
	queuedBefore := l.n("queued")
	waitUntil(t, "queued pushes after the restart", func() bool { return l.n("queued") >= queuedBefore+200 })
	close(stop)
	wg.Wait()
	waitDrained(t, sp)

	require.Zero(t, l.fails, "no push failed: the spool took them")
	got := b.drainQueue("outage")
	total := l.verify(t, got)
	t.Logf("queued %d, buffered %d, delivered %d", l.n("queued"), l.n("buffered"), total)
	var dup int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM (SELECT transaction_id FROM queen.messages GROUP BY partition_id, transaction_id HAVING count(*) > 1) d`).Scan(&dup))
	require.Zero(t, dup)
}

// PostgreSQL restarts while consumers are parked in long-polls: they see
// 5xx or empty answers during the outage, and then receive what is pushed
// after it, without a broker restart; every acknowledged message reaches
// exactly one consumer once.
func TestFaultPostgresRestartWhileLongPolling(t *testing.T) {
	b := setup(t)
	b.configure("lp", &client.QueueOptions{LeaseTime: ptr(5)})
	var mu sync.Mutex
	got := map[string]int{}
	acked := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(b.url + "/api/v1/pop/queue/lp?batch=10&wait=true&timeout=2000")
				if err != nil {
					t.Errorf("pop: %v", err)
					return
				}
				var p popped
				status := resp.StatusCode
				if status == http.StatusOK {
					require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
				}
				resp.Body.Close()
				if status >= 500 {
					select { // paced retry while the database is down
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				if status != http.StatusOK {
					continue
				}
				var acks []map[string]any
				for _, m := range p.Messages {
					acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "leaseId": m.LeaseID})
				}
				raw, _ := json.Marshal(map[string]any{"acknowledgments": acks})
				resp, err = http.Post(b.url+"/api/v1/ack/batch", "application/json", bytesReader(raw))
				require.NoError(t, err)
				resp.Body.Close()
				mu.Lock()
				for _, m := range p.Messages {
					got[m.TransactionID]++
				}
				if resp.StatusCode == http.StatusOK {
					acked += len(p.Messages)
				}
				mu.Unlock()
			}
		})
	}
	deliveredCount := func() int { mu.Lock(); defer mu.Unlock(); return acked }
	var want []string
	for i := range 30 {
		id := fmt.Sprintf("before-%02d", i)
		want = append(want, id)
		b.push(item("lp", fmt.Sprintf("p%d", i%3), id, i))
	}
	waitUntil(t, "the first messages consumed", func() bool { return deliveredCount() == 30 })

	pgtest.Stop(t)
	pgtest.Start(t)
	for i := range 30 {
		id := fmt.Sprintf("after-%02d", i)
		want = append(want, id)
		for { // the first pushes may meet connections the restart broke
			status, raw := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("lp", fmt.Sprintf("p%d", i%3), id, i)}})
			if status == http.StatusCreated {
				break
			}
			require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
		}
	}
	waitUntil(t, "the later messages consumed", func() bool { return deliveredCount() == 60 })
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 60)
	for _, id := range want {
		require.Equal(t, 1, got[id], id)
	}
}

// A consumer dies holding a lease: nothing is lost, the batch is
// redelivered once the lease expires, and after the ack nothing comes back.
func TestFaultConsumerKilledHoldingLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("lease", &client.QueueOptions{LeaseTime: ptr(1)})
	for i := range 10 {
		b.push(item("lease", "", fmt.Sprintf("m%d", i), i))
	}
	// The doomed consumer: a client that pops and vanishes without acking.
	ctx, kill := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", b.url+"/api/v1/pop/queue/lease?batch=10", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var first popped
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&first))
	resp.Body.Close()
	kill()
	require.Len(t, first.Messages, 10)

	// The survivor long-polls; the partition is leased until expiry.
	p := b.pop("/api/v1/pop/queue/lease?batch=10&wait=true&timeout=10000")
	require.NotNil(t, p, "redelivered after the lease expired")
	require.Len(t, p.Messages, 10)
	for i, m := range p.Messages {
		require.Equal(t, fmt.Sprintf("m%d", i), m.TransactionID)
		require.NotEqual(t, first.LeaseID, m.LeaseID)
	}
	var acks []map[string]any
	for _, m := range p.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "leaseId": m.LeaseID})
	}
	b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, http.StatusOK, nil)
	// The dead consumer's late ack is refused: its lease is gone.
	res := b.ack(first.Messages[0].TransactionID, first.Messages[0].PartitionID, "completed", "", first.LeaseID)
	require.False(t, res.Success)
	require.Nil(t, b.pop("/api/v1/pop/queue/lease?batch=10&wait=true&timeout=1500"), "acked: never delivered again")
}

// A spool left by a crash: a finalised file, and an active one whose last
// record was cut mid-write. The next start replays every whole record once
// (one of them was already stored: a duplicate, not a second copy) and
// drops the cut one, which was never acknowledged.
func TestFaultTornSpoolFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := func(id string) spool.Record {
		return spool.Record{Queue: "torn", Partition: "p", TransactionID: id, Payload: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queen-0000000000001-00000000.buf"),
		spool.Encode([]spool.Record{rec("a"), rec("b"), rec("stored")}), 0o640))
	torn := spool.Encode([]spool.Record{rec("c"), rec("d"), rec("cut")})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queen-0000000000002-00000000.tmp"), torn[:len(torn)-9], 0o640))

	pre := setup(t)
	pre.push(item("torn", "p", "stored", 0)) // committed, its answer lost in the crash
	sp := spool.Open(spool.Config{Dir: dir, FlushInterval: 10 * time.Millisecond})
	t.Cleanup(func() { require.NoError(t, sp.Close()) })
	b := pre.sibling(testConfig{Spool: sp})
	waitDrained(t, sp)
	got := b.drainQueue("torn")
	require.Equal(t, []string{"stored", "a", "b", "c", "d"}, got["p"])
	require.Equal(t, "duplicate", b.push(item("torn", "p", "stored", 1))[0].Status)
	failed, _ := os.ReadDir(filepath.Join(dir, spool.FailedDir))
	require.Empty(t, failed, "a cut tail is a crash artefact, not damage")
}
