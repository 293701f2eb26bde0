package queen_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/sdk/brokertest"
	"github.com/queenforgo/queen/sdk/queen"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The tests run the real broker binary on a database of their own and talk
// to it only through the SDK.

func TestMain(m *testing.M) { pgtest.Main(m) }

// waitFor bounds every wait of these tests; a broker that answers needs far
// less, so it only turns a hang into a failure.
const waitFor = 30 * time.Second

type testBundle struct {
	broker *brokertest.Broker
	c      *queen.Client
	reqs   *countingTransport
}

func setup(t *testing.T, env ...string) *testBundle {
	t.Helper()
	b := brokertest.Start(t, pgtest.NewDB(t), env...)
	reqs := &countingTransport{next: http.DefaultTransport}
	c, err := queen.New(b.URL, client.WithHTTPClient(&http.Client{Transport: reqs}))
	require.NoError(t, err)
	return &testBundle{broker: b, c: c, reqs: reqs}
}

// countingTransport counts the pops a client starts and the lease
// extensions the broker granted.
type countingTransport struct {
	next    http.RoundTripper
	pops    atomic.Int64
	extends atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/api/v1/pop/") {
		c.pops.Add(1)
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && resp.StatusCode == http.StatusOK && strings.HasSuffix(req.URL.Path, "/extend") {
		c.extends.Add(1)
	}
	return resp, err
}

func (tb *testBundle) configure(t *testing.T, queue string, opts client.QueueOptions) {
	t.Helper()
	resp, err := tb.c.API().ConfigureQueueWithResponse(t.Context(), nil, client.ConfigureRequest{Queue: queue, Options: &opts})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
}

// popNow pops without waiting; nil is an empty answer.
func (tb *testBundle) popNow(t *testing.T, queue, group string) *client.PopResponse {
	t.Helper()
	wait, batch := false, 10
	p := &client.PopQueueParams{Wait: &wait, Batch: &batch}
	if group != "" {
		p.ConsumerGroup = &group
	}
	resp, err := tb.c.API().PopQueueWithResponse(t.Context(), queue, p)
	require.NoError(t, err)
	if resp.StatusCode() == http.StatusNoContent {
		return nil
	}
	require.NotNil(t, resp.JSON200, "pop: %d %s", resp.StatusCode(), resp.Body)
	return resp.JSON200
}

// consume runs Consume on its own goroutine and returns its stop function,
// which cancels it and returns what Consume returned.
func consume(t *testing.T, c *queen.Client, cfg queen.ConsumerConfig, h queen.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, cfg, h) }()
	stopped := false
	var result error
	stop = func() error {
		t.Helper()
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(waitFor):
			t.Fatal("Consume did not return after its context ended")
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestPushThenConsumeInOrder(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()

	var msgs []queen.Message
	for i := range 25 {
		part := "p" + strconv.Itoa(i%2)
		msgs = append(msgs, queen.Message{Queue: "orders", Partition: part, TransactionID: "tx-" + strconv.Itoa(i),
			Payload: map[string]any{"n": i, "part": part}})
	}
	results, err := tb.c.Push(ctx, msgs...)
	require.NoError(t, err)
	require.Len(t, results, 25)
	for i, r := range results {
		require.Equal(t, client.PushResultStatus("queued"), r.Status, "item %d", i)
	}
	// A repeat is a duplicate, not an error.
	again, err := tb.c.Push(ctx, msgs[0])
	require.NoError(t, err)
	require.Equal(t, client.PushResultStatus("duplicate"), again[0].Status)

	got := make(chan client.PoppedMessage, 100)
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "orders", Batch: 4, Wait: time.Second},
		func(_ context.Context, m client.PoppedMessage) error { got <- m; return nil })
	lastByPart := map[string]int{}
	for range 25 {
		var m client.PoppedMessage
		select {
		case m = <-got:
		case <-time.After(waitFor):
			t.Fatal("messages stopped arriving")
		}
		var p struct {
			N    int    `json:"n"`
			Part string `json:"part"`
		}
		require.NotNil(t, m.Data)
		require.NoError(t, json.Unmarshal(*m.Data, &p))
		require.Equal(t, p.Part, m.Partition)
		if last, ok := lastByPart[p.Part]; ok {
			require.Greater(t, p.N, last, "partition order")
		}
		lastByPart[p.Part] = p.N
	}
	require.NoError(t, stop())
	require.Nil(t, tb.popNow(t, "orders", ""), "every message was acked")
}

func TestConsumeFailedMessageRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	tb.configure(t, "jobs", client.QueueOptions{RetryLimit: ptr(1)})
	_, err := tb.c.Push(ctx,
		queen.Message{Queue: "jobs", TransactionID: "good-1", Payload: "ok"},
		queen.Message{Queue: "jobs", TransactionID: "bad", Payload: "boom"},
		queen.Message{Queue: "jobs", TransactionID: "good-2", Payload: "ok"},
	)
	require.NoError(t, err)

	var attempts atomic.Int64
	completed := make(chan string, 10)
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "jobs", Wait: time.Second},
		func(_ context.Context, m client.PoppedMessage) error {
			if m.TransactionId == "bad" {
				attempts.Add(1)
				return errors.New("cannot process bad")
			}
			completed <- m.TransactionId
			return nil
		})
	var order []string
	for len(order) < 2 {
		select {
		case tx := <-completed:
			order = append(order, tx)
		case <-time.After(waitFor):
			t.Fatalf("completed so far: %v", order)
		}
	}
	require.Equal(t, []string{"good-1", "good-2"}, order, "good-2 waits until bad is dead-lettered")
	require.NoError(t, stop())
	require.EqualValues(t, 2, attempts.Load(), "the first delivery and one retry")

	limit := 10
	dl, err := tb.c.API().ListDeadLettersWithResponse(ctx, &client.ListDeadLettersParams{Queue: ptr("jobs"), Limit: &limit})
	require.NoError(t, err)
	require.NotNil(t, dl.JSON200, "%s", dl.Body)
	require.Len(t, dl.JSON200.Messages, 1)
	require.Equal(t, "bad", dl.JSON200.Messages[0].TransactionId)
	require.Equal(t, "cannot process bad", *dl.JSON200.Messages[0].ErrorMessage)
}

func TestConsumeRenewsTheLeaseWhileTheHandlerRuns(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	tb.configure(t, "slow", client.QueueOptions{LeaseTime: ptr(1)})
	_, err := tb.c.Push(ctx, queen.Message{Queue: "slow", TransactionID: "long-job", Payload: 1})
	require.NoError(t, err)

	started := make(chan struct{})
	release := make(chan struct{})
	handled := make(chan string, 10)
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "slow", Wait: time.Second, RenewEvery: 200 * time.Millisecond, ExtendBy: time.Second},
		func(_ context.Context, m client.PoppedMessage) error {
			handled <- m.TransactionId
			if m.TransactionId == "long-job" {
				close(started)
				<-release
			}
			return nil
		})
	<-started
	// Eight renewals 200 ms apart outlast the 1 s lease several times over;
	// without them the message would be poppable again by now.
	require.Eventually(t, func() bool { return tb.reqs.extends.Load() >= 8 }, waitFor, 20*time.Millisecond)
	require.Nil(t, tb.popNow(t, "slow", ""), "the renewed lease still holds the message")
	close(release)

	// The ack after the long handler succeeded: nothing is redelivered.
	_, err = tb.c.Push(ctx, queen.Message{Queue: "slow", TransactionID: "next", Payload: 2})
	require.NoError(t, err)
	require.Equal(t, "long-job", <-handled)
	select {
	case tx := <-handled:
		require.Equal(t, "next", tx, "long-job must not be redelivered")
	case <-time.After(waitFor):
		t.Fatal("the next message never arrived")
	}
	require.NoError(t, stop())
}

func TestConsumeCancelsTheHandlerWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	_, err := tb.c.Push(ctx, queen.Message{Queue: "doomed", TransactionID: "x", Payload: 1})
	require.NoError(t, err)

	started := make(chan struct{})
	cause := make(chan error, 1)
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "doomed", Wait: time.Second, RenewEvery: 100 * time.Millisecond},
		func(hctx context.Context, m client.PoppedMessage) error {
			close(started)
			<-hctx.Done()
			cause <- context.Cause(hctx)
			return hctx.Err()
		})
	<-started
	// Deleting the queue deletes the lease with it: the next renewal is
	// refused and the handler is told.
	del, err := tb.c.API().DeleteQueueWithResponse(ctx, "doomed", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, del.StatusCode(), "%s", del.Body)
	select {
	case err := <-cause:
		require.ErrorIs(t, err, queen.ErrLeaseLost)
	case <-time.After(waitFor):
		t.Fatal("the handler was not cancelled after its lease was lost")
	}
	require.NoError(t, stop())
}

func TestConsumeStopReleasesUnfinishedMessages(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	_, err := tb.c.Push(ctx,
		queen.Message{Queue: "stop", TransactionID: "a", Payload: 1},
		queen.Message{Queue: "stop", TransactionID: "b", Payload: 2},
		queen.Message{Queue: "stop", TransactionID: "c", Payload: 3},
	)
	require.NoError(t, err)

	inB := make(chan struct{})
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "stop", Batch: 3, Wait: time.Second},
		func(hctx context.Context, m client.PoppedMessage) error {
			if m.TransactionId == "a" {
				return nil
			}
			close(inB)
			<-hctx.Done() // a handler that honours its context
			return hctx.Err()
		})
	<-inB
	require.NoError(t, stop())

	// a was acked; b (interrupted) and c (never started) were released at
	// once, without counting a retry.
	p := tb.popNow(t, "stop", "")
	require.NotNil(t, p, "released messages are poppable at once")
	var txs []string
	for _, m := range p.Messages {
		txs = append(txs, m.TransactionId)
		require.Zero(t, m.RetryCount, "%s: a stop is not a failure", m.TransactionId)
	}
	require.Equal(t, []string{"b", "c"}, txs)
}

func TestConsumeStopsDuringALongPoll(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	// The pop waits ten minutes on the broker, far longer than stop waits
	// for Consume to return: only cancelling the request ends it in time.
	stop := consume(t, tb.c, queen.ConsumerConfig{Queue: "idle", Wait: 10 * time.Minute},
		func(context.Context, client.PoppedMessage) error { return nil })
	require.Eventually(t, func() bool { return tb.reqs.pops.Load() > 0 }, waitFor, 10*time.Millisecond)
	require.NoError(t, stop())
}

func TestConsumeReturnsTheErrorOfABadQueueName(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	err := tb.c.Consume(t.Context(), queen.ConsumerConfig{Queue: "no spaces"}, func(context.Context, client.PoppedMessage) error { return nil })
	var apiErr *queen.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)

	_, err = tb.c.Push(t.Context(), queen.Message{Queue: "no spaces", Payload: 1})
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.Contains(t, apiErr.Message, "queue")
}

func TestWithTokenAuthenticates(t *testing.T) {
	t.Parallel()
	const secret = "sdk-test-secret-0123456789abcdef0123"
	tb := setup(t, "JWT_ENABLED=true", "JWT_ALGORITHM=HS256", "JWT_SECRET="+secret)
	_, err := tb.c.Push(t.Context(), queen.Message{Queue: "auth", Payload: 1})
	var apiErr *queen.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusUnauthorized, apiErr.Status)

	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "sdk-test", "role": "read-write", "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	require.NoError(t, err)
	c, err := queen.New(tb.broker.URL, queen.WithToken(token))
	require.NoError(t, err)
	res, err := c.Push(t.Context(), queen.Message{Queue: "auth", Payload: 1})
	require.NoError(t, err)
	require.Equal(t, client.PushResultStatus("queued"), res[0].Status)
}

func ptr[T any](v T) *T { return &v }

func TestWithTenantScopesTheQueues(t *testing.T) {
	t.Parallel()
	tb := setup(t, "QUEEN_TENANCY_HEADER=true", "QUEEN_TENANCY_TRUSTED_PROXY=true")
	const acme, globex = "7d0e4c1a-2b3f-4a5e-8c9d-0e1f2a3b4c5d", "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"
	a, err := queen.New(tb.broker.URL, queen.WithTenant(acme))
	require.NoError(t, err)
	g, err := queen.New(tb.broker.URL, queen.WithTenant(globex))
	require.NoError(t, err)
	_, err = a.Push(t.Context(), queen.Message{Queue: "shared-name", Payload: "acme's"})
	require.NoError(t, err)

	// The same queue name is another queue for another tenant: nothing to pop.
	wait := false
	resp, err := g.API().PopQueueWithResponse(t.Context(), "shared-name", &client.PopQueueParams{Wait: &wait})
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode(), "%s", resp.Body)
	resp, err = a.API().PopQueueWithResponse(t.Context(), "shared-name", &client.PopQueueParams{Wait: &wait})
	require.NoError(t, err)
	require.NotNil(t, resp.JSON200, "%d %s", resp.StatusCode(), resp.Body)
	require.Len(t, resp.JSON200.Messages, 1)
}
