package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
)

// A long-poll through the proxy is answered when the broker answers: the
// push that wakes it comes well inside the poll's 60 s, and the test's own
// deadline (20 s) would fail a proxy that held the answer to the end.
func TestLongPollAnsweredWhenBrokerAnswers(t *testing.T) {
	t.Parallel()
	for name, env := range map[string][]string{
		"in net/http": {"QUEEN_POP_HOLD=false"},
		// The broker holds the parked pop outside net/http (handlers/longpoll).
		"held": {"QUEEN_POP_HOLD=true"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			longPollAnsweredWhenBrokerAnswers(t, env)
		})
	}
}

func longPollAnsweredWhenBrokerAnswers(t *testing.T, brokerEnv []string) {
	broker := startBroker(t, brokerEnv...)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	key := p.key(cluster, "produce", "consume")
	base := startProxy(t, p)
	host := "acme.proxy.test"

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/pop/queue/lp?wait=true&timeout=60000", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{status: 0, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		got <- answer{status: resp.StatusCode, header: resp.Header, body: raw}
	}()
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, push("lp", 1)).status)
	select {
	case a := <-got:
		require.Equal(t, http.StatusOK, a.status, string(a.body))
		require.Contains(t, string(a.body), `"i":0`)
	case <-ctx.Done():
		t.Fatal("the long-poll was not answered after the push")
	}
}

// A client that leaves cancels its long-poll at the broker: the message
// pushed afterwards is not leased to the dead poll but popped by the next
// client at once. Its parked slot is freed too.
func TestClientGoneCancelsUpstream(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_parked_pops": 1}')`, cluster)
	key := p.key(cluster, "produce", "consume")
	base := startProxy(t, p)
	host := "acme.proxy.test"

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/pop/queue/gone?wait=true&timeout=60000", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	parked := func(n int) func() bool {
		return func() bool {
			m := string(call(t, base, host, "GET", "/metrics/prometheus", "", nil).body)
			return strings.Contains(m, "queen_proxy_parked_long_polls "+strconv.Itoa(n)+"\n")
		}
	}
	require.Eventually(t, parked(1), 10*time.Second, 10*time.Millisecond)
	refused(t, call(t, base, host, "GET", "/api/v1/pop/queue/other?wait=true&timeout=1", key, nil),
		http.StatusTooManyRequests, "rate_limited")
	cancel()
	<-done
	require.Eventually(t, parked(0), 10*time.Second, 10*time.Millisecond, "the slot is freed when the client leaves")
	require.Equal(t, http.StatusNoContent, call(t, base, host, "GET", "/api/v1/pop/queue/other?wait=true&timeout=1", key, nil).status)
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, push("gone", 1)).status)
	a := call(t, base, host, "GET", "/api/v1/pop/queue/gone?batch=1", key, nil)
	require.Equal(t, http.StatusOK, a.status, "the cancelled poll must not have taken the message: %s", a.body)
}

// The broker cannot be reached: 502 bad_gateway. It does not answer within
// the budget: 504 upstream_timeout. It answers an error: passed through.
func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	p.cell("dead", "http://127.0.0.1:"+strconv.Itoa(freePort(t)), nil)
	live := p.cluster("acme", "pro", "cell-1")
	gone := p.cluster("ghost", "pro", "dead")
	base := startProxy(t, p, func(c *proxy.Config) {
		c.LongPollMax = 100 * time.Millisecond
		c.LongPollMargin = 100 * time.Millisecond
	})

	refused(t, call(t, base, "ghost.proxy.test", "GET", "/api/v1/resources/queues", p.key(gone, "read"), nil),
		http.StatusBadGateway, "bad_gateway")
	key := p.key(live, "consume", "produce")
	refused(t, call(t, base, "acme.proxy.test", "GET", "/api/v1/pop/queue/slow?wait=true&timeout=5000", key, nil),
		http.StatusGatewayTimeout, "upstream_timeout")
	a := call(t, base, "acme.proxy.test", "POST", "/api/v1/push", key, map[string]any{"items": "nope"})
	require.Equal(t, http.StatusBadRequest, a.status)
	require.False(t, byProxy(a), "the broker's own 400 passes through: %s", a.body)
}

// With the broker's JWT on, the cell secret is a token the broker accepts;
// the client's API key never reaches it (the broker would refuse it). A cell
// without a secret sends no Authorization, and the broker's 401 passes
// through.
func TestBrokerWithJWT(t *testing.T) {
	t.Parallel()
	secret := "0123456789abcdef0123456789abcdef"
	broker := startBroker(t, "JWT_ENABLED=true", "JWT_ALGORITHM=HS256", "JWT_SECRET="+secret)
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "queen-proxy", "role": "admin", "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	require.NoError(t, err)
	p := newPXDB(t)
	p.cell("jwt", broker, &token)
	p.cell("open", broker, nil)
	withSecret := p.cluster("acme", "pro", "jwt")
	without := p.cluster("globex", "pro", "open")
	base := startProxy(t, p)

	key := p.key(withSecret, "produce", "consume")
	require.Equal(t, http.StatusCreated, call(t, base, "acme.proxy.test", "POST", "/api/v1/push", key, push("j", 2)).status)
	a := call(t, base, "acme.proxy.test", "GET", "/api/v1/pop/queue/j?batch=2", key, nil)
	require.Equal(t, http.StatusOK, a.status, string(a.body))

	a = call(t, base, "globex.proxy.test", "POST", "/api/v1/push", p.key(without, "produce"), push("j", 1))
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.False(t, byProxy(a), "the broker's refusal, not the proxy's: %s", a.body)
}

// The official clients' flows (docs/client-wire-contract.md) through the
// proxy with an API key as their bearer: push, pop with a long-poll, ack
// single and batch, as the JS client sends them (Content-Type on every
// request, the queue interpolated raw into the path).
func TestClientFlowsThroughProxy(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	key := p.key(cluster, "produce", "consume")
	base := startProxy(t, p)
	host := "acme.proxy.test"

	items := []map[string]any{}
	for i := range 3 {
		items = append(items, map[string]any{"queue": "orders", "partition": "Default",
			"payload": map[string]any{"n": i}, "transactionId": fmt.Sprintf("tx-%d", i)})
	}
	a := call(t, base, host, "POST", "/api/v1/push", key, map[string]any{"items": items})
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	var pushed []map[string]any
	require.NoError(t, jsonUnmarshal(a.body, &pushed))
	require.Len(t, pushed, 3)
	for _, r := range pushed {
		require.Equal(t, "queued", r["status"])
	}

	a = call(t, base, host, "GET", "/api/v1/pop/queue/orders?batch=3&wait=true&timeout=30000", key, nil)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	msgs := a.json(t)["messages"].([]any)
	require.Len(t, msgs, 3)
	first := msgs[0].(map[string]any)
	a = call(t, base, host, "POST", "/api/v1/ack", key, map[string]any{
		"transactionId": first["transactionId"], "partitionId": first["partitionId"], "leaseId": first["leaseId"],
		"status": "completed", "error": nil, "consumerGroup": nil,
	})
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	var acks []any
	for _, m := range msgs[1:] {
		mm := m.(map[string]any)
		acks = append(acks, map[string]any{"transactionId": mm["transactionId"], "partitionId": mm["partitionId"],
			"leaseId": mm["leaseId"], "status": "completed", "error": nil})
	}
	a = call(t, base, host, "POST", "/api/v1/ack/batch", key, map[string]any{"acknowledgments": acks, "consumerGroup": nil})
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	var results []map[string]any
	require.NoError(t, jsonUnmarshal(a.body, &results))
	require.Len(t, results, 2, "the JS client needs one result per ack")
	for _, r := range results {
		require.NotEqual(t, false, r["success"], r)
	}
	a = call(t, base, host, "GET", "/api/v1/pop/queue/orders?batch=3&wait=false", key, nil)
	require.Equal(t, http.StatusNoContent, a.status, "everything was acked: %s", a.body)
}
