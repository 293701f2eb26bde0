package handlers

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

func TestPopEmptyOutcomesAre204(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Nil(t, b.pop("/api/v1/pop/queue/missing"))
	require.Nil(t, b.pop("/api/v1/pop/queue/missing/partition/p"))
	b.push(item("q1", "p", "", 1))
	require.Nil(t, b.pop("/api/v1/pop/queue/q1/partition/other"))
	p := b.pop("/api/v1/pop/queue/q1/partition/p")
	require.NotNil(t, p)
	// Lease held by that consumer: the same group gets nothing.
	require.Nil(t, b.pop("/api/v1/pop/queue/q1/partition/p"))
	require.Nil(t, b.pop("/api/v1/pop/queue/q1"))
	// Another group is independent.
	require.NotNil(t, b.pop("/api/v1/pop/queue/q1?consumerGroup=g2"))
}

func TestPopBatchOrderAndAckReleasesLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		b.push(item("q", "p", fmt.Sprintf("m%d", i), i))
	}
	p := b.pop("/api/v1/pop/queue/q?batch=3")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 3)
	for i, m := range p.Messages {
		require.Equal(t, fmt.Sprintf("m%d", i), m.TransactionID)
		require.Equal(t, "q", m.Queue)
		require.Equal(t, p.LeaseID, m.LeaseID)
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, m.CreatedAt)
	}
	r := b.ack("m0", p.PartitionID, "completed", "", p.LeaseID)
	require.True(t, r.Success)
	require.False(t, r.LeaseReleased, "the batch is not fully acked")
	var res []ackResult
	b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": "m1", "partitionId": p.PartitionID, "leaseId": p.LeaseID},
		map[string]any{"transactionId": "m2", "partitionId": p.PartitionID, "leaseId": p.LeaseID},
	}}, http.StatusOK, &res)
	require.True(t, res[1].Success)
	require.True(t, res[1].LeaseReleased)

	p2 := b.pop("/api/v1/pop/queue/q?batch=10")
	require.NotNil(t, p2)
	require.Len(t, p2.Messages, 2)
	require.Equal(t, "m3", p2.Messages[0].TransactionID)
	// A stale lease is refused.
	r = b.ack("m3", p.PartitionID, "completed", "", p.LeaseID)
	require.False(t, r.Success)
	require.Equal(t, errInvalidLease, *r.Error)
}

func TestPopAutoAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "a", 1), item("q", "", "b", 2))
	p := b.pop("/api/v1/pop/queue/q?batch=10&autoAck=true")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 2)
	require.Empty(t, p.LeaseID)
	require.Nil(t, b.pop("/api/v1/pop/queue/q?batch=10"))
}

func TestPopMultiplePartitionsShareLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 4 {
		b.push(item("q", fmt.Sprintf("p%d", i), "", i))
	}
	p := b.pop("/api/v1/pop/queue/q?batch=10&partitions=3")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 3)
	seen := map[string]bool{}
	for _, m := range p.Messages {
		seen[m.PartitionID] = true
	}
	require.Len(t, seen, 3)
	var ext struct {
		Success  bool `json:"success"`
		Renewed  int  `json:"renewed"`
		NewExpAt any  `json:"newExpiresAt"`
	}
	b.doJSON("POST", "/api/v1/lease/"+p.LeaseID+"/extend", map[string]any{"seconds": 120}, http.StatusOK, &ext)
	require.True(t, ext.Success)
	require.Equal(t, 3, ext.Renewed)
	b.doJSON("POST", "/api/v1/lease/nope/extend", map[string]any{}, http.StatusOK, &ext)
	require.False(t, ext.Success)
}

// A lease extension moves the expiry to now + seconds, never earlier than
// it was; without seconds it extends by the queue's lease time.
func TestLeaseExtendSecondsAndQueueDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "a", 1))
	p := b.pop("/api/v1/pop/queue/q")
	require.NotNil(t, p)
	extend := func(body any) time.Time {
		t.Helper()
		var ext struct {
			Success      bool   `json:"success"`
			NewExpiresAt string `json:"newExpiresAt"`
		}
		b.doJSON("POST", "/api/v1/lease/"+p.LeaseID+"/extend", body, http.StatusOK, &ext)
		require.True(t, ext.Success)
		at, err := time.Parse(time.RFC3339Nano, ext.NewExpiresAt)
		require.NoError(t, err)
		return at
	}
	// The clock is the database's: compare with a margin far wider than a
	// request, far narrower than the differences between the cases.
	near := func(want, got time.Time) {
		t.Helper()
		require.WithinDuration(t, want, got, time.Minute)
	}
	near(time.Now().Add(20*time.Minute), extend(map[string]any{"seconds": 1200}))
	// Shorter than what is left: unchanged.
	first := extend(map[string]any{"seconds": 1200})
	require.Equal(t, first, extend(map[string]any{"seconds": 5}))

	// Without seconds: the queue's leaseTime as it is now, from now (not
	// the 60 s of the reference, not the lease the pop took).
	b.configure("q2", &client.QueueOptions{LeaseTime: ptr(120)})
	b.push(item("q2", "", "a", 1))
	p = b.pop("/api/v1/pop/queue/q2")
	require.NotNil(t, p)
	b.configure("q2", &client.QueueOptions{LeaseTime: ptr(3600)})
	near(time.Now().Add(time.Hour), extend(map[string]any{}))
	near(time.Now().Add(time.Hour), extend(nil))
	near(time.Now().Add(2*time.Hour), extend(map[string]any{"seconds": 7200}))
}

func TestConsumerGroupsAreIndependent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "a", 1), item("q", "", "b", 2))
	for _, g := range []string{"g1", "g2"} {
		p := b.pop("/api/v1/pop/queue/q?batch=10&consumerGroup=" + g)
		require.NotNil(t, p, g)
		require.Len(t, p.Messages, 2, g)
		for _, m := range p.Messages {
			require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", g, p.LeaseID).Success)
		}
		require.Nil(t, b.pop("/api/v1/pop/queue/q?consumerGroup="+g))
	}
	// Queue mode still has everything.
	p := b.pop("/api/v1/pop/queue/q?batch=10")
	require.Len(t, p.Messages, 2)
}

func TestSubscriptionModeNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("q", "", "old", 1))
	require.Nil(t, b.pop("/api/v1/pop/queue/q?consumerGroup=fresh&subscriptionMode=new"))
	b.push(item("q", "", "new", 2))
	p := b.pop("/api/v1/pop/queue/q?consumerGroup=fresh&batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "new", p.Messages[0].TransactionID)
	// A group with mode all sees both.
	p = b.pop("/api/v1/pop/queue/q?consumerGroup=everything&batch=10&subscriptionMode=all")
	require.Len(t, p.Messages, 2)
}

func TestNamespaceTaskPop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("billing.invoices", "", "", 1), item("billing.refunds", "", "", 2), item("shipping.labels", "", "", 3))
	status, _ := b.do("GET", "/api/v1/pop", nil)
	require.Equal(t, http.StatusBadRequest, status)
	p := b.pop("/api/v1/pop?namespace=billing&batch=10&partitions=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 2)
	p = b.pop("/api/v1/pop?task=labels&batch=10")
	require.Len(t, p.Messages, 1)
	require.Equal(t, "shipping.labels", p.Messages[0].Queue)
}

func TestDelayedProcessingAndWindowBuffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("delayed", &client.QueueOptions{DelayedProcessing: ptr(3600)})
	b.push(item("delayed", "", "", 1))
	require.Nil(t, b.pop("/api/v1/pop/queue/delayed"))
	require.Nil(t, b.pop("/api/v1/pop/queue/delayed/partition/Default"))
	b.configure("windowed", &client.QueueOptions{WindowBuffer: ptr(3600)})
	b.push(item("windowed", "", "", 1))
	require.Nil(t, b.pop("/api/v1/pop/queue/windowed"))
	require.Nil(t, b.pop("/api/v1/pop/queue/windowed/partition/Default"))
}

func TestPopRejectsBadParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{
		"/api/v1/pop/queue/q?batch=0",
		"/api/v1/pop/queue/q?batch=1001",
		"/api/v1/pop/queue/q?batch=abc",
		"/api/v1/pop/queue/q?wait=maybe",
		"/api/v1/pop/queue/q?consumerGroup=a%20b",
		"/api/v1/pop/queue/q?subscriptionFrom=yesterday",
		"/api/v1/pop/queue/q?subscriptionMode=sometimes",
		"/api/v1/pop/queue/a%20b",
	} {
		status, body := b.do("GET", path, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, body)
	}
}

func TestLongPollWakesOnPush(t *testing.T) {
	t.Parallel()
	// A fallback re-poll far longer than the test: only the wake-up by the
	// push's commit can answer the pop.
	b := setup(t, setupOpts{repoll: time.Hour})
	got := make(chan *popped, 1)
	go func() { got <- b.pop("/api/v1/pop/queue/lp?wait=true&timeout=60000") }()
	require.Eventually(t, func() bool { return b.parked("lp") == 1 }, 10*time.Second, 5*time.Millisecond)
	b.push(item("lp", "", "wake", 1))
	select {
	case p := <-got:
		require.NotNil(t, p)
		require.Equal(t, "wake", p.Messages[0].TransactionID)
	case <-time.After(30 * time.Second):
		t.Fatal("long-poll was not woken by the push")
	}
}

func TestLongPollTimesOutEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Nil(t, b.pop("/api/v1/pop/queue/nothing?wait=true&timeout=100"))
}

func TestLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("short", &client.QueueOptions{LeaseTime: ptr(1)})
	b.push(item("short", "", "m", 1))
	first := b.pop("/api/v1/pop/queue/short")
	require.NotNil(t, first)
	// The consumer dies without acking. A long-poll gets the message again
	// once the one-second lease has expired.
	second := b.pop("/api/v1/pop/queue/short?wait=true&timeout=10000")
	require.NotNil(t, second)
	require.Equal(t, "m", second.Messages[0].TransactionID)
	require.NotEqual(t, first.LeaseID, second.LeaseID)
	r := b.ack("m", second.PartitionID, "completed", "", first.LeaseID)
	require.False(t, r.Success, "the expired lease may not ack")
	require.True(t, b.ack("m", second.PartitionID, "completed", "", second.LeaseID).Success)
}

// Sixteen producers and two consumers on one partition: every message is
// delivered exactly once and in the order the partition committed them.
func TestConcurrentProducersConsumersExactlyOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const producers, perProducer = 16, 40
	const total = producers * perProducer
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProducer; i += 4 {
				var items []client.PushItem
				for j := i; j < i+4; j++ {
					items = append(items, item("conc", "one", fmt.Sprintf("p%02d-%03d", p, j), map[string]any{"p": p, "i": j}))
				}
				b.push(items...)
			}
		}()
	}
	var mu sync.Mutex
	var delivered []string
	done := make(chan struct{})
	var cwg sync.WaitGroup
	for range 2 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				p := b.pop("/api/v1/pop/queue/conc/partition/one?batch=7&wait=true&timeout=200")
				if p == nil {
					continue
				}
				var acks []any
				mu.Lock()
				for _, m := range p.Messages {
					delivered = append(delivered, m.TransactionID)
					acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
				}
				n := len(delivered)
				mu.Unlock()
				var res []ackResult
				b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, http.StatusOK, &res)
				for _, r := range res {
					require.True(t, r.Success)
				}
				if n >= total {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) >= total
	}, 60*time.Second, 10*time.Millisecond)
	close(done)
	cwg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, delivered, total, "exactly once")
	seen := map[string]bool{}
	for _, tx := range delivered {
		require.False(t, seen[tx], "duplicate delivery of %s", tx)
		seen[tx] = true
	}
	// Delivery order is the partition's sequence order.
	rows, err := b.pool.Query(t.Context(), "SELECT transaction_id FROM queen.messages ORDER BY seq")
	require.NoError(t, err)
	var stored []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		stored = append(stored, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, stored, delivered)
	// And each producer's own messages stay in the order it pushed them.
	last := map[string]string{}
	for _, tx := range delivered {
		prod := tx[:3]
		require.Less(t, last[prod], tx)
		last[prod] = tx
	}
}

// from_beginning, the JS and Python clients' spelling of "all", starts a new
// group at the beginning on all three pop routes, also on a broker whose
// DEFAULT_SUBSCRIPTION_MODE is "new"; a value nobody documents is a 400.
func TestSubscriptionModeFromBeginning(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.DefaultSubMode = "new" }})
	b.configureTagged("fb", "hist", "")
	b.push(item("fb", "p", "old", 1))

	// The server default applies to a group that names no mode.
	require.Nil(t, b.pop("/api/v1/pop/queue/fb?consumerGroup=defaulted"))
	for group, path := range map[string]string{
		"queue":     "/api/v1/pop/queue/fb?consumerGroup=queue&subscriptionMode=from_beginning",
		"partition": "/api/v1/pop/queue/fb/partition/p?consumerGroup=partition&subscriptionMode=from_beginning",
		"namespace": "/api/v1/pop?namespace=hist&consumerGroup=namespace&subscriptionMode=from_beginning",
	} {
		p := b.pop(path)
		require.NotNil(t, p, group)
		require.Len(t, p.Messages, 1, group)
		require.Equal(t, "old", p.Messages[0].TransactionID, group)
	}

	status, body := b.do("GET", "/api/v1/pop/queue/fb?consumerGroup=typo&subscriptionMode=from-beginning", nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "subscriptionMode")
	require.Contains(t, string(body), "from_beginning", "the error names the accepted values: %s", body)
}

// The validator remembers the body-less requests that passed (validate_
// passed.go): the same request passes again without being validated, and
// one that differs in anything the spec checks (a parameter's value, the
// path) is validated as if nothing had passed before; a refused request is
// refused again.
func TestPopValidationRemembersOnlyWhatPassed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 2 {
		for _, path := range []string{"/api/v1/pop/queue/q?batch=10", "/api/v1/pop/queue/q?batch=10&wait=false"} {
			status, body := b.do("GET", path, nil)
			require.Equal(t, http.StatusNoContent, status, "%s: %s", path, body)
		}
		for _, path := range []string{
			"/api/v1/pop/queue/q?batch=1001",
			"/api/v1/pop/queue/q?batch=10&wait=maybe",
			"/api/v1/pop/queue/q?wait=false&batch=10&batch=abc",
			"/api/v1/pop/queue/a%20b?batch=10",
		} {
			status, body := b.do("GET", path, nil)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, body)
		}
	}
	v, err := sharedValidator()
	require.NoError(t, err)
	req := httptest.NewRequest("GET", "/api/v1/pop/queue/q?batch=10", nil)
	req.Pattern = "GET /api/v1/pop/queue/{queue}"
	key, ok := v.passed.key(nil, req)
	require.True(t, ok)
	require.True(t, v.passed.has(key), "a request that passed is remembered")
	req = httptest.NewRequest("GET", "/api/v1/pop/queue/q?batch=1001", nil)
	req.Pattern = "GET /api/v1/pop/queue/{queue}"
	key, ok = v.passed.key(nil, req)
	require.True(t, ok)
	require.False(t, v.passed.has(key), "a refused one is not")
	req.Header.Set("X-Queen-Tenant", "x")
	other, ok := v.passed.key(nil, req)
	require.True(t, ok)
	require.NotEqual(t, key, other, "the header parameters are part of the key")
}
