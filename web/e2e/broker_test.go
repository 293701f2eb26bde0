package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers"
	"github.com/queenforgo/queen/handlers/auth"
	dataplane "github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/jobs"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/web"
)

// The broker side: the real HTTP chain (auth, validation, handlers) with
// the dashboard mounted as cmd/queen mounts it, on a database of its own.

func TestMain(m *testing.M) { pgtest.Main(m) }

const jwtSecret = "dashboard-e2e-secret-0123456789abcdef"

type broker struct {
	t     *testing.T
	url   string
	hs    *httptest.Server
	jobs  *jobs.Services
	token string // Authorization header value for the workload, JWT on
	// tenant, when set, is sent as x-queen-tenant (a broker with tenancy).
	tenant string
}

// startBroker serves a broker with the dashboard; authn nil means JWT off.
// opts adjust the HTTP adapter's settings (tenancy).
func startBroker(t *testing.T, authn *auth.Authenticator, opts ...func(*handlers.Config)) *broker {
	t.Helper()
	pool := pgtest.NewPool(t)
	reg := metrics.New()
	js := jobs.New(jobs.Config{Pool: pool, Metrics: reg, Hostname: "e2e-broker", Port: 6632})
	brk := dataplane.New(dataplane.Config{Pool: pool, Metrics: reg, RepollInterval: 50 * time.Millisecond})
	require.NoError(t, brk.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, brk.Stop(context.Background())) })
	cfg := handlers.Config{
		Broker:         brk,
		Pool:           pool,
		Auth:           authn,
		Dashboard:      web.New(),
		StatsFlushFunc: func(ctx context.Context) error { return js.Flush(ctx, time.Now()) },
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv := handlers.New(cfg)
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain)
	return &broker{t: t, url: hs.URL, hs: hs, jobs: js}
}

func newAuth(t *testing.T) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Config{Secret: jwtSecret, SkipPaths: []string{}})
	require.NoError(t, err)
	return a
}

// signed is an HS256 token for sub with role.
func signed(t *testing.T, sub, role string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "role": role, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(jwtSecret))
	require.NoError(t, err)
	return s
}

// call sends a JSON request and requires status want; out may be nil.
func (b *broker) call(method, path string, body any, want int, out any) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(b.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.tenant != "" {
		req.Header.Set("x-queen-tenant", b.tenant)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	require.Equal(b.t, want, res.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(b.t, json.Unmarshal(raw, out), "%s", raw)
	}
}

type pushed struct {
	Status        string `json:"status"`
	PartitionID   string `json:"partition_id"`
	TransactionID string `json:"transaction_id"`
}

type popped struct {
	LeaseID     string `json:"leaseId"`
	PartitionID string `json:"partitionId"`
	Messages    []struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
	} `json:"messages"`
}

func (b *broker) push(queue, partition, tx string, payload any) pushed {
	b.t.Helper()
	var out []pushed
	b.call("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": queue, "partition": partition, "transactionId": tx, "payload": payload},
	}}, http.StatusCreated, &out)
	require.Len(b.t, out, 1)
	return out[0]
}

func (b *broker) pop(path string) popped {
	b.t.Helper()
	var out popped
	b.call("GET", path, nil, http.StatusOK, &out)
	return out
}

func (b *broker) ack(p popped, tx, status, group, reason string) {
	b.t.Helper()
	body := map[string]any{"transactionId": tx, "partitionId": p.PartitionID, "status": status, "leaseId": p.LeaseID}
	if group != "" {
		body["consumerGroup"] = group
	}
	if reason != "" {
		body["error"] = reason
	}
	b.call("POST", "/api/v1/ack", body, http.StatusOK, nil)
}

// workload leaves, on top of an hour of per-minute metrics from "emails":
//
//	orders (namespace shop, task checkout): partition eu with o-0..o-4, of
//	which the queue-mode group popped o-0..o-2, completed o-0, dead-lettered
//	o-1 ("card declined") and still leases o-2; partition us with o-5, o-6.
//	The group "analytics" read orders too. Trace "checkout-42" has two
//	events, on o-0 and o-1.
//	invoices: i-0, i-1, never consumed.
func (b *broker) workload() {
	b.t.Helper()
	ctx := b.t.Context()
	// An hour of traffic, written as one metrics minute every 5 minutes.
	start := time.Now().Add(-58 * time.Minute)
	for i := range 12 {
		var items []map[string]any
		for j := range 2 + i%4 {
			items = append(items, map[string]any{"queue": "emails", "transactionId": fmt.Sprintf("e-%d-%d", i, j),
				"payload": map[string]any{"to": fmt.Sprintf("user%d@example.com", j)}})
		}
		b.call("POST", "/api/v1/push", map[string]any{"items": items}, http.StatusCreated, nil)
		p := b.pop("/api/v1/pop/queue/emails?batch=10")
		var acks []map[string]any
		for _, m := range p.Messages {
			acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "leaseId": p.LeaseID})
		}
		b.call("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, http.StatusOK, nil)
		require.NoError(b.t, b.jobs.Flush(ctx, start.Add(time.Duration(i)*5*time.Minute)))
	}

	b.call("POST", "/api/v1/configure", map[string]any{"queue": "orders", "namespace": "shop", "task": "checkout"}, http.StatusOK, nil)
	for i := range 5 {
		b.push("orders", "eu", fmt.Sprintf("o-%d", i), map[string]any{"order": i, "customer": "ada", "total": 10.5 * float64(i+1)})
	}
	b.push("orders", "us", "o-5", map[string]any{"order": 5, "customer": "grace"})
	b.push("orders", "us", "o-6", map[string]any{"order": 6, "customer": "grace"})
	p := b.pop("/api/v1/pop/queue/orders/partition/eu?batch=3")
	require.Len(b.t, p.Messages, 3)
	b.ack(p, "o-0", "completed", "", "")
	b.ack(p, "o-1", "dlq", "", "card declined")
	g := b.pop("/api/v1/pop/queue/orders/partition/us?batch=10&consumerGroup=analytics")
	b.ack(g, "o-5", "completed", "analytics", "")
	b.push("invoices", "", "i-0", map[string]any{"invoice": 0})
	b.push("invoices", "", "i-1", map[string]any{"invoice": 1})

	b.call("POST", "/api/v1/traces", map[string]any{"transactionId": "o-0", "partitionId": p.PartitionID,
		"eventType": "info", "traceNames": []string{"checkout-42"}, "data": map[string]any{"text": "charged card"}}, http.StatusCreated, nil)
	b.call("POST", "/api/v1/traces", map[string]any{"transactionId": "o-1", "partitionId": p.PartitionID,
		"eventType": "error", "traceNames": []string{"checkout-42"}, "data": map[string]any{"text": "card declined", "code": 402}}, http.StatusCreated, nil)
	require.NoError(b.t, b.jobs.Flush(ctx, time.Now()))
}
