package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/aggcache"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/handlers/longpoll"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/metrics/exposition"
	"github.com/queenforgo/queen/handlers/migration"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is a broker on its own database, served over real HTTP.
type testBundle struct {
	t      *testing.T
	srv    *Server
	pool   *pgxpool.Pool
	url    string
	router routers.Router
	// api is the client generated from the spec (gen/client): the helpers
	// push, ack and configure go through it. Its transport checks every
	// answer against the spec, as do does; do stays for the requests a
	// test needs to write by hand (malformed bodies, exact bytes, headers).
	api *client.ClientWithResponses
	// tenant, when set, is sent as x-queen-tenant by do (see as).
	tenant string
	// held is the listener the server is served through (Config.LongPolls).
	held *longpoll.Listener
}

// newBundle wraps a served broker for a test.
func newBundle(t *testing.T, srv *Server, pool *pgxpool.Pool, url string) *testBundle {
	t.Helper()
	doc, err := api.GetSpec()
	require.NoError(t, err)
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	b := &testBundle{t: t, srv: srv, pool: pool, url: url, router: router}
	b.api, err = client.NewClientWithResponses(url, client.WithHTTPClient(&http.Client{Transport: specChecked{b}}))
	require.NoError(t, err)
	return b
}

// specChecked is the generated client's transport in the tests: it checks
// every answer against openapi.yaml.
type specChecked struct{ b *testBundle }

func (s specChecked) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	s.b.validate(req, reqBody, resp, body)
	return resp, nil
}

type setupOpts struct {
	repoll time.Duration
	config func(*testConfig) // adjusts the broker's and the server's settings (spool, intervals)
	pool   *pgxpool.Pool     // a database prepared by the test; nil: a fresh migrated one
}

// testConfig is the settings the tests give a broker and its HTTP adapter,
// in one struct: newServer splits them into broker.Config and Config.
type testConfig struct {
	Pool               *pgxpool.Pool
	Logger             *slog.Logger
	Metrics            *metrics.Registry
	Cipher             *crypto.Cipher
	Spool              *spool.Spool
	RepollInterval     time.Duration
	MaintenanceRefresh time.Duration
	MaxBodyBytes       int64
	Auth               *auth.Authenticator
	ServerID           string
	Dashboard          http.Handler
	StatsFlushFunc     func(ctx context.Context) error
	Migration          *migration.Runner
	Tenancy            bool
	DefaultSubMode     string // DEFAULT_SUBSCRIPTION_MODE
	SharedState        SharedState
	AnswerCache        *aggcache.Cache
}

// newServer wires a broker and its HTTP adapter as cmd/queen does, starts
// the broker and stops it when the test ends (after the cleanups the test
// registers later: the HTTP server closes first).
func newServer(t testing.TB, c testConfig) *Server {
	t.Helper()
	validate, err := PushValidator()
	require.NoError(t, err)
	timings := exposition.NewTimings()
	b := broker.New(broker.Config{
		Pool: c.Pool, Logger: c.Logger, Metrics: c.Metrics, Timings: timings, Cipher: c.Cipher, Spool: c.Spool,
		ValidatePushFunc: validate, RepollInterval: c.RepollInterval, MaintenanceRefresh: c.MaintenanceRefresh,
		DefaultSubscriptionMode: c.DefaultSubMode,
	})
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Stop(context.Background())) })
	return New(Config{
		Broker: b, Pool: c.Pool, Logger: c.Logger, MaxBodyBytes: c.MaxBodyBytes, Auth: c.Auth, ServerID: c.ServerID,
		Dashboard: c.Dashboard, StatsFlushFunc: c.StatsFlushFunc, Migration: c.Migration, Tenancy: c.Tenancy, SharedState: c.SharedState,
		Collectors: []prometheus.Collector{timings}, AnswerCache: c.AnswerCache,
	})
}

// parked is the number of pops parked on queue.
func (b *testBundle) parked(queue string) int {
	return b.srv.b.Parked(broker.QueueKey{Tenant: broker.DefaultTenant, Queue: queue})
}

func setup(t *testing.T, opts ...setupOpts) *testBundle {
	t.Helper()
	o := setupOpts{repoll: 50 * time.Millisecond}
	if len(opts) > 0 {
		o = opts[0]
	}
	pool := o.pool
	if pool == nil {
		pool = pgtest.NewPool(t)
	}
	cfg := testConfig{Pool: pool, RepollInterval: o.repoll}
	if o.config != nil {
		o.config(&cfg)
	}
	srv := newServer(t, cfg)
	// Served as cmd/queen serves: long waits are held outside net/http
	// (handlers/longpoll), so every test's long-polls take that path.
	hs := httptest.NewUnstartedServer(nil)
	ln := longpoll.NewListener(hs.Listener, nil)
	hs.Listener = ln
	srv.cfg.LongPolls = ln
	h, err := srv.Handler()
	require.NoError(t, err)
	hs.Config.Handler = h
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain) // end parked long-polls before the server closes
	b := newBundle(t, srv, pool, hs.URL)
	b.held = ln
	return b
}

// do sends a request and checks the answer against openapi.yaml: status
// declared for the operation, body matching its schema.
func (b *testBundle) do(method, path string, body any) (int, []byte) {
	b.t.Helper()
	return b.doWithHeaders(method, path, body, func(req *http.Request) {
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if b.tenant != "" {
			req.Header.Set("x-queen-tenant", b.tenant)
		}
	})
}

// as is the bundle acting for tenant: every helper sends it as
// x-queen-tenant.
func (b *testBundle) as(tenant string) *testBundle {
	c := *b
	c.tenant = tenant
	// The generated client's transport belongs to the copy, so its
	// requests carry the tenant too.
	var err error
	c.api, err = client.NewClientWithResponses(b.url, client.WithHTTPClient(&http.Client{Transport: specChecked{&c}}),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("x-queen-tenant", tenant)
			return nil
		}))
	require.NoError(b.t, err)
	return &c
}

// doWithHeaders is do with the request's headers set by setHeaders.
func (b *testBundle) doWithHeaders(method, path string, body any, setHeaders func(*http.Request)) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	var raw []byte
	if body != nil {
		switch v := body.(type) {
		case string:
			raw = []byte(v)
		case []byte:
			raw = v
		default:
			var err error
			raw, err = json.Marshal(v)
			require.NoError(b.t, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(b.t, err)
	setHeaders(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	b.validate(req, raw, resp, out)
	return resp.StatusCode, out
}

func (b *testBundle) validate(req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	b.t.Helper()
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := b.router.FindRoute(vreq)
	if err != nil {
		// Routes outside the spec (404s) have nothing to validate against.
		require.Equal(b.t, http.StatusNotFound, resp.StatusCode, "route not in spec: %s %s", req.Method, req.URL.Path)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{ExcludeRequestBody: true, ExcludeRequestQueryParams: true},
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	require.NoError(b.t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %s answered %d %s", req.Method, req.URL.Path, resp.StatusCode, body)
}

// doJSON is do for routes that must answer want, decoding the body into out.
func (b *testBundle) doJSON(method, path string, body any, want int, out any) {
	b.t.Helper()
	status, raw := b.do(method, path, body)
	require.Equal(b.t, want, status, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(b.t, json.Unmarshal(raw, out), "%s", raw)
	}
}

type pushed struct {
	Index         int    `json:"index"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id"`
	TransactionID string `json:"transaction_id"`
}

type popped struct {
	Queue       string `json:"queue"`
	LeaseID     string `json:"leaseId"`
	PartitionID string `json:"partitionId"`
	Messages    []struct {
		ID            string          `json:"id"`
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		Partition     string          `json:"partition"`
		Queue         string          `json:"queue"`
		LeaseID       string          `json:"leaseId"`
		Data          json.RawMessage `json:"data"`
		RetryCount    int             `json:"retryCount"`
		CreatedAt     string          `json:"createdAt"`
	} `json:"messages"`
}

type ackResult struct {
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
}

// item is one push item; payload is sent as its JSON (nil: null).
func item(queue, partition, txID string, payload any) client.PushItem {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(err) // a test's own payload
	}
	data := client.AnyJSON(raw)
	it := client.PushItem{Queue: queue, Payload: &data}
	if partition != "" {
		it.Partition = &partition
	}
	if txID != "" {
		it.TransactionId = &txID
	}
	return it
}

// push pushes items through the generated client; it must answer 201.
func (b *testBundle) push(items ...client.PushItem) []pushed {
	b.t.Helper()
	resp, err := b.api.PushMessagesWithResponse(context.Background(), nil, client.PushRequest{Items: items})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusCreated, resp.StatusCode(), "%s", resp.Body)
	out := make([]pushed, len(*resp.JSON201))
	for i, r := range *resp.JSON201 {
		out[i] = pushed{
			Index: r.Index, Status: string(r.Status), MessageID: deref(r.MessageIDSnake, ""),
			PartitionID: deref(r.PartitionId, ""), TransactionID: deref(r.TransactionIDSnake, ""),
		}
	}
	return out
}

// pop returns nil on 204.
func (b *testBundle) pop(path string) *popped {
	b.t.Helper()
	status, raw := b.do("GET", path, nil)
	if status == http.StatusNoContent {
		require.Empty(b.t, raw)
		return nil
	}
	require.Equal(b.t, http.StatusOK, status, "%s", raw)
	var p popped
	require.NoError(b.t, json.Unmarshal(raw, &p))
	return &p
}

// ack acknowledges one message through the generated client.
func (b *testBundle) ack(txID, partitionID, status, group, leaseID string) ackResult {
	b.t.Helper()
	body := client.AckRequest{TransactionId: txID, PartitionId: partitionID, Status: ptr(client.AckStatus(status))}
	if group != "" {
		body.ConsumerGroup = &group
	}
	if leaseID != "" {
		body.LeaseId = &leaseID
	}
	resp, err := b.api.AckMessageWithResponse(context.Background(), nil, body)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
	require.Len(b.t, *resp.JSON200, 1)
	r := (*resp.JSON200)[0]
	return ackResult{Success: r.Success, Error: r.Error, LeaseReleased: r.LeaseReleased, DLQ: r.Dlq}
}

// configure creates queue or replaces its options (nil: the defaults)
// through the generated client.
func (b *testBundle) configure(queue string, options *client.QueueOptions) {
	b.t.Helper()
	resp, err := b.api.ConfigureQueueWithResponse(context.Background(), nil, client.ConfigureRequest{Queue: queue, Options: options})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
}
