package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

type clearResult struct {
	Success           bool    `json:"success"`
	Queue             string  `json:"queue"`
	Partition         *string `json:"partition"`
	PartitionsDeleted int     `json:"partitionsDeleted"`
	MessagesDeleted   int     `json:"messagesDeleted"`
}

func (b *testBundle) clear(path string) clearResult {
	b.t.Helper()
	var out clearResult
	b.doJSON("DELETE", path, nil, http.StatusOK, &out)
	require.True(b.t, out.Success)
	return out
}

// count runs a SELECT count(*)-like query.
func (b *testBundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), query, args...).Scan(&n))
	return n
}

func (b *testBundle) messagesIn(queue, partition string) int {
	b.t.Helper()
	return b.count(`SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE ($1 = '' OR q.name = $1) AND ($2 = '' OR p.name = $2)`, queue, partition)
}

func TestQueueClear(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("clr", &client.QueueOptions{LeaseTime: ptr(10)})
	b.push(item("clr", "a", "a1", 1), item("clr", "a", "a2", 2), item("clr", "a", "a3", 3),
		item("clr", "b", "b1", 1), item("clr", "b", "b2", 2), item("keep", "a", "k1", 1))
	// A group that subscribed with mode new before the clear, and cursors,
	// a lease and a dead letter on the partitions that go.
	require.Nil(t, b.pop("/api/v1/pop/queue/clr?consumerGroup=late&subscriptionMode=new"))
	held := b.pop("/api/v1/pop/queue/clr/partition/a?consumerGroup=g")
	require.Len(t, held.Messages, 1)
	pb := b.pop("/api/v1/pop/queue/clr/partition/b?consumerGroup=g")
	require.True(t, b.ack(pb.Messages[0].TransactionID, pb.PartitionID, "dlq", "g", pb.LeaseID).DLQ)
	require.Equal(t, 1, b.count("SELECT count(*) FROM queen.dead_letter_queue"))

	// Bad names are 400, an unknown queue or partition 404; nothing changes.
	for _, path := range []string{
		"/api/v1/queues/clr/clear?partition=a%20b",
		"/api/v1/queues/clr/clear?partition=",
		"/api/v1/queues/a%20b/clear",
	} {
		status, raw := b.do("DELETE", path, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, raw)
	}
	var nf struct{ Error string }
	b.doJSON("DELETE", "/api/v1/queues/missing/clear", nil, http.StatusNotFound, &nf)
	require.Equal(t, "Queue not found", nf.Error)
	b.doJSON("DELETE", "/api/v1/queues/clr/clear?partition=zz", nil, http.StatusNotFound, &nf)
	require.Equal(t, "Partition not found", nf.Error)
	require.Equal(t, 6, b.messagesIn("", ""))

	// One partition: only it goes, with its cursors and lease.
	res := b.clear("/api/v1/queues/clr/clear?partition=a")
	require.Equal(t, clearResult{Success: true, Queue: "clr", Partition: ptr("a"), PartitionsDeleted: 1, MessagesDeleted: 3}, res)
	require.Zero(t, b.messagesIn("clr", "a"))
	require.Equal(t, 2, b.messagesIn("clr", "b"))
	require.Equal(t, 1, b.messagesIn("keep", ""))
	require.Equal(t, 1, b.count("SELECT count(*) FROM queen.dead_letter_queue"))
	require.Zero(t, b.count("SELECT count(*) FROM queen.partition_consumers WHERE partition_id = $1", held.PartitionID))
	require.False(t, b.ack("a1", held.PartitionID, "completed", "g", held.LeaseID).Success, "the lease went with the partition")
	b.doJSON("DELETE", "/api/v1/queues/clr/clear?partition=a", nil, http.StatusNotFound, &nf)

	// The rest of the queue (b, and the empty Default that configure
	// created): the queue itself and its options stay.
	res = b.clear("/api/v1/queues/clr/clear")
	require.Equal(t, clearResult{Success: true, Queue: "clr", PartitionsDeleted: 2, MessagesDeleted: 2}, res)
	require.Zero(t, b.count("SELECT count(*) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'clr'"))
	require.Zero(t, b.count("SELECT count(*) FROM queen.dead_letter_queue"))
	require.Equal(t, 1, b.messagesIn("keep", ""))
	var q struct {
		Options struct {
			LeaseTime int `json:"leaseTime"`
		} `json:"options"`
	}
	b.doJSON("GET", "/api/v1/resources/queues/clr", nil, http.StatusOK, &q)
	require.Equal(t, 10, q.Options.LeaseTime)
	res = b.clear("/api/v1/queues/clr/clear")
	require.Equal(t, clearResult{Success: true, Queue: "clr"}, res, "an empty queue clears to nothing")

	// Pushes re-create the partitions, numbered from 1 again; existing
	// groups, the one subscribed with mode new included, read the new
	// messages exactly once.
	b.push(item("clr", "a", "a1", 1), item("clr", "b", "n1", 1))
	require.Equal(t, 1, b.count("SELECT min(seq) FROM queen.messages WHERE transaction_id = 'a1'"))
	for _, group := range []string{"g", "late", "__QUEUE_MODE__"} {
		p := b.pop("/api/v1/pop/queue/clr?batch=10&partitions=5&consumerGroup=" + group)
		require.NotNil(t, p, group)
		var got []string
		for _, m := range p.Messages {
			got = append(got, m.TransactionID)
			require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", group, p.LeaseID).Success)
		}
		require.ElementsMatch(t, []string{"a1", "n1"}, got, group)
		require.Nil(t, b.pop("/api/v1/pop/queue/clr?batch=10&partitions=5&consumerGroup="+group), group)
	}
}

// A consumer parked in a long-poll before the clear gets what is pushed
// after it, once, and the group's watermark starts over.
func TestQueueClearThenLongPoll(t *testing.T) {
	t.Parallel()
	// Only the push's wake-up can answer the long-poll.
	b := setup(t, setupOpts{repoll: time.Hour})
	b.push(item("lpc", "a", "old", 1))
	p := b.pop("/api/v1/pop/queue/lpc?consumerGroup=g")
	require.True(t, b.ack("old", p.PartitionID, "completed", "g", p.LeaseID).Success)
	require.Nil(t, b.pop("/api/v1/pop/queue/lpc?consumerGroup=g")) // advances the watermark
	require.Equal(t, 1, b.count("SELECT count(*) FROM queen.consumer_watermarks WHERE scan_from > '-infinity'"))

	type answer struct {
		status int
		body   []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		status, body, err := rawDo("GET", b.url+"/api/v1/pop/queue/lpc?consumerGroup=g&batch=10&partitions=5&wait=true&timeout=60000", nil)
		got <- answer{status, body, err}
	}()
	require.Eventually(t, func() bool { return b.parked("lpc") == 1 }, 10*time.Second, 5*time.Millisecond)

	require.Equal(t, 1, b.clear("/api/v1/queues/lpc/clear").MessagesDeleted)
	require.Zero(t, b.count("SELECT count(*) FROM queen.consumer_watermarks WHERE scan_from > '-infinity'"))
	b.push(item("lpc", "a", "new-a", 1), item("lpc", "b", "new-b", 1))

	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the parked long-poll was not woken by the push after the clear")
	}
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var first popped
	require.NoError(t, json.Unmarshal(a.body, &first))
	seen := map[string]int{}
	for _, m := range first.Messages {
		seen[m.TransactionID]++
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "g", first.LeaseID).Success)
	}
	for p := b.pop("/api/v1/pop/queue/lpc?consumerGroup=g&batch=10"); p != nil; p = b.pop("/api/v1/pop/queue/lpc?consumerGroup=g&batch=10") {
		for _, m := range p.Messages {
			seen[m.TransactionID]++
			require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "g", p.LeaseID).Success)
		}
	}
	require.Equal(t, map[string]int{"new-a": 1, "new-b": 1}, seen)
}

// Multi-partition pushes and ack-and-push transactions race clears of the
// whole queue and of single partitions. No request fails (a deadlock would
// be a 500), and every message a push was told was queued is either counted
// by a clear as deleted or still stored, exactly once.
func TestQueueClearRacesPushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		pushers    = 3
		minBatches = 4 // per pusher, and pushers go on until the clears are done
		clearCount = 6
		partitions = 4
	)
	var (
		mu       sync.Mutex
		queued   = map[string]bool{}
		deleted  int
		clears   int
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// recordPush takes (status, transaction id) pairs from a push's answer.
	recordPush := func(raw []byte, results ...[2]string) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r[0] != "queued" || queued[r[1]] {
				failures = append(failures, fmt.Sprintf("push result %v in %s", r, raw))
			}
			queued[r[1]] = true
		}
	}

	start := make(chan struct{})
	firstPush := make(chan struct{}) // a push was acknowledged
	var once sync.Once
	cleared := make(chan struct{}) // the clearer is done
	pushed := make(chan struct{})  // the pushers are done
	var producers, others sync.WaitGroup
	for w := range pushers {
		producers.Add(1)
		go func() {
			defer producers.Done()
			<-start
			for i := 0; ; i++ {
				last := false // a batch pushed after every clear, which must survive
				if i >= minBatches {
					select {
					case <-cleared:
						last = true
					default:
					}
				}
				var items []client.PushItem
				for p := range partitions {
					if (i+p+w)%3 != 0 { // a changing subset, several partitions per push
						items = append(items, item("race", fmt.Sprintf("p%d", p), fmt.Sprintf("w%d-%d-%d", w, i, p), i))
					}
				}
				status, raw, err := rawDo("POST", b.url+"/api/v1/push", map[string]any{"items": items})
				if err != nil || status != http.StatusCreated {
					fail("push: %d %v %s", status, err, raw)
					return
				}
				var res []struct {
					Status        string `json:"status"`
					TransactionID string `json:"transaction_id"`
				}
				if err := json.Unmarshal(raw, &res); err != nil || len(res) != len(items) {
					fail("push answer %s: %v", raw, err)
					return
				}
				for _, r := range res {
					recordPush(raw, [2]string{r.Status, r.TransactionID})
				}
				once.Do(func() { close(firstPush) })
				if last {
					return
				}
			}
		}()
	}
	go func() { producers.Wait(); close(pushed) }()

	// The clearer alternates whole-queue and single-partition clears while
	// the pushers push.
	others.Add(1)
	go func() {
		defer others.Done()
		defer close(cleared)
		select {
		case <-firstPush:
		case <-pushed: // every pusher failed; the failures say why
			return
		}
		for i := range clearCount {
			path := "/api/v1/queues/race/clear"
			if i%2 == 1 {
				path += fmt.Sprintf("?partition=p%d", i%partitions)
			}
			status, raw, err := rawDo("DELETE", b.url+path, nil)
			var res clearResult
			switch {
			case err != nil || (status != http.StatusOK && status != http.StatusNotFound):
				fail("clear %s: %d %v %s", path, status, err, raw)
				return
			case status == http.StatusOK:
				if err := json.Unmarshal(raw, &res); err != nil {
					fail("clear answer %s: %v", raw, err)
					return
				}
				mu.Lock()
				deleted += res.MessagesDeleted
				clears++
				mu.Unlock()
			}
		}
	}()

	// A consumer acks what it pops and pushes a follow-up into the same
	// queue in one transaction: it holds cursor rows while it locks a
	// partition, the other lock order a clear must not deadlock with.
	others.Add(1)
	go func() {
		defer others.Done()
		<-start
		for n := 0; ; n++ {
			select {
			case <-pushed:
				return
			default:
			}
			status, raw, err := rawDo("GET", b.url+"/api/v1/pop/queue/race?consumerGroup=c&batch=5&partitions=2&wait=true&timeout=250", nil)
			if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
				fail("pop: %d %v %s", status, err, raw)
				return
			}
			if status == http.StatusNoContent {
				continue
			}
			var p popped
			if err := json.Unmarshal(raw, &p); err != nil {
				fail("pop answer %s: %v", raw, err)
				return
			}
			ops := []any{}
			for _, m := range p.Messages {
				ops = append(ops, map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "consumerGroup": "c"})
			}
			txID := fmt.Sprintf("c-%d", n)
			ops = append(ops, map[string]any{"type": "push", "items": []any{item("race", "p0", txID, n)}})
			status, raw, err = rawDo("POST", b.url+"/api/v1/transaction", map[string]any{"operations": ops})
			if err != nil || status != http.StatusOK {
				fail("transaction: %d %v %s", status, err, raw)
				return
			}
			var res txResponse
			if err := json.Unmarshal(raw, &res); err != nil {
				fail("transaction answer %s: %v", raw, err)
				return
			}
			if res.Success { // else a partition went under the consumer: nothing was committed
				recordPush(raw, [2]string{res.Results[len(res.Results)-1].Status, txID})
			}
		}
	}()

	close(start)
	<-pushed
	others.Wait()
	require.Empty(t, failures)
	require.Positive(t, clears)
	require.Positive(t, deleted, "the first clear follows an acknowledged push")

	rows, err := b.pool.Query(t.Context(), `SELECT m.transaction_id FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'race'`)
	require.NoError(t, err)
	stored := map[string]int{}
	for rows.Next() {
		var tx string
		require.NoError(t, rows.Scan(&tx))
		stored[tx]++
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, stored, "the pushers' last batches follow every clear")
	for tx, n := range stored {
		require.Equal(t, 1, n, "%s stored twice", tx)
		require.True(t, queued[tx], "%s stored but never acknowledged", tx)
	}
	require.Equal(t, len(queued), deleted+len(stored), "acknowledged pushes = deleted by clears + still stored")
	t.Logf("%d clears deleted %d of %d queued messages", clears, deleted, len(queued))
}

// rawDo is an HTTP round trip for goroutines other than the test's, which
// must not call require.
func rawDo(method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
