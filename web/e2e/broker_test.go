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
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers"
	"github.com/queenforgo/queen/handlers/auth"
	dataplane "github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/jobs"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/migration"
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
	pool  *pgxpool.Pool // the broker's database, for what a test must set up in SQL
	token string        // Authorization header value for the workload, JWT on
	// api is the client generated from the spec: the workload's pushes,
	// pops, acks and traces go through it (with the token when set).
	api *client.ClientWithResponses
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
	src := pool.Config().ConnConfig
	runner := migration.New(migration.Config{Source: migration.Endpoint{
		Host: src.Host, Port: int(src.Port), Database: src.Database, User: src.User, Password: src.Password,
	}})
	t.Cleanup(runner.Stop)
	cfg := handlers.Config{
		Broker:         brk,
		Pool:           pool,
		Auth:           authn,
		Dashboard:      web.New(),
		Migration:      runner,
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
	b := &broker{t: t, url: hs.URL, hs: hs, jobs: js, pool: pool}
	b.api, err = client.NewClientWithResponses(hs.URL, client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		if b.token != "" {
			req.Header.Set("Authorization", "Bearer "+b.token)
		}
		if b.tenant != "" {
			req.Header.Set("x-queen-tenant", b.tenant)
		}
		return nil
	}))
	require.NoError(t, err)
	return b
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
	Status        string
	PartitionID   string
	TransactionID string
}

// jsonOf is v as a JSON value for the generated client's AnyJSON fields.
func (b *broker) jsonOf(v any) *client.AnyJSON {
	b.t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(b.t, err)
	j := client.AnyJSON(raw)
	return &j
}

// pushItems pushes through the generated client; every item must be
// stored.
func (b *broker) pushItems(items ...client.PushItem) []client.PushResult {
	b.t.Helper()
	resp, err := b.api.PushMessagesWithResponse(b.t.Context(), nil, client.PushRequest{Items: items})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusCreated, resp.StatusCode(), "%s", resp.Body)
	return *resp.JSON201
}

func (b *broker) push(queue, partition, tx string, payload any) pushed {
	b.t.Helper()
	out := b.pushItems(client.PushItem{Queue: queue, Partition: &partition, TransactionId: &tx, Payload: b.jsonOf(payload)})
	require.Len(b.t, out, 1)
	return pushed{Status: string(out[0].Status), PartitionID: *out[0].PartitionId, TransactionID: *out[0].TransactionIDSnake}
}

// popQueue pops from any partition of queue; it must deliver.
func (b *broker) popQueue(queue string, params client.PopQueueParams) client.PopResponse {
	b.t.Helper()
	resp, err := b.api.PopQueueWithResponse(b.t.Context(), queue, &params)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
	return *resp.JSON200
}

// popPartition pops from one partition; it must deliver.
func (b *broker) popPartition(queue, partition string, params client.PopPartitionParams) client.PopResponse {
	b.t.Helper()
	resp, err := b.api.PopPartitionWithResponse(b.t.Context(), queue, partition, &params)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
	return *resp.JSON200
}

func (b *broker) ack(p client.PopResponse, tx, status, group, reason string) {
	b.t.Helper()
	body := client.AckRequest{TransactionId: tx, PartitionId: p.PartitionId, Status: ptr(client.AckStatus(status)), LeaseId: &p.LeaseId}
	if group != "" {
		body.ConsumerGroup = &group
	}
	if reason != "" {
		body.Error = &reason
	}
	resp, err := b.api.AckMessageWithResponse(b.t.Context(), nil, body)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
}

// trace records an event named checkout-42 on a message.
func (b *broker) trace(tx, partitionID, eventType string, data any) {
	b.t.Helper()
	names := json.RawMessage(`["checkout-42"]`)
	resp, err := b.api.RecordTraceWithResponse(b.t.Context(), nil, client.TraceRequest{
		TransactionId: tx, PartitionId: partitionID, EventType: &eventType, TraceNames: &names, Data: b.jsonOf(data),
	})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusCreated, resp.StatusCode(), "%s", resp.Body)
}

func ptr[T any](v T) *T { return &v }

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
		var items []client.PushItem
		for j := range 2 + i%4 {
			items = append(items, client.PushItem{Queue: "emails", TransactionId: ptr(fmt.Sprintf("e-%d-%d", i, j)),
				Payload: b.jsonOf(map[string]any{"to": fmt.Sprintf("user%d@example.com", j)})})
		}
		b.pushItems(items...)
		p := b.popQueue("emails", client.PopQueueParams{Batch: ptr(10)})
		var acks []client.AckBatchItem
		for _, m := range p.Messages {
			acks = append(acks, client.AckBatchItem{TransactionId: m.TransactionId, PartitionId: m.PartitionId,
				Status: ptr(client.AckStatus("completed")), LeaseId: &p.LeaseId})
		}
		resp, err := b.api.AckBatchWithResponse(ctx, nil, client.AckBatchRequest{Acknowledgments: acks})
		require.NoError(b.t, err)
		require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
		require.NoError(b.t, b.jobs.Flush(ctx, start.Add(time.Duration(i)*5*time.Minute)))
	}

	conf, err := b.api.ConfigureQueueWithResponse(ctx, nil, client.ConfigureRequest{Queue: "orders", Namespace: ptr("shop"), Task: ptr("checkout")})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, conf.StatusCode(), "%s", conf.Body)
	for i := range 5 {
		b.push("orders", "eu", fmt.Sprintf("o-%d", i), map[string]any{"order": i, "customer": "ada", "total": 10.5 * float64(i+1)})
	}
	b.push("orders", "us", "o-5", map[string]any{"order": 5, "customer": "grace"})
	b.push("orders", "us", "o-6", map[string]any{"order": 6, "customer": "grace"})
	p := b.popPartition("orders", "eu", client.PopPartitionParams{Batch: ptr(3)})
	require.Len(b.t, p.Messages, 3)
	b.ack(p, "o-0", "completed", "", "")
	b.ack(p, "o-1", "dlq", "", "card declined")
	g := b.popPartition("orders", "us", client.PopPartitionParams{Batch: ptr(10), ConsumerGroup: ptr("analytics")})
	b.ack(g, "o-5", "completed", "analytics", "")
	b.push("invoices", "", "i-0", map[string]any{"invoice": 0})
	b.push("invoices", "", "i-1", map[string]any{"invoice": 1})

	b.trace("o-0", p.PartitionId, "info", map[string]any{"text": "charged card"})
	b.trace("o-1", p.PartitionId, "error", map[string]any{"text": "card declined", "code": 402})
	require.NoError(b.t, b.jobs.Flush(ctx, time.Now()))
}
