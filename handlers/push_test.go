package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

func TestPushCreatesQueueAndDedups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("orders.eu.created", "p1", "tx-1", map[string]any{"n": 1}),
		item("orders.eu.created", "p1", "tx-1", map[string]any{"n": 2}),
		item("orders.eu.created", "", "", json.RawMessage("12345678901234567890")))
	require.Len(t, out, 3)
	require.Equal(t, "queued", out[0].Status)
	require.Equal(t, "duplicate", out[1].Status)
	require.Equal(t, out[0].MessageID, out[1].MessageID)
	require.Equal(t, "queued", out[2].Status)
	require.NotEmpty(t, out[2].TransactionID, "a transactionId is generated when absent")

	again := b.push(item("orders.eu.created", "p1", "tx-1", nil))
	require.Equal(t, "duplicate", again[0].Status)
	require.Equal(t, out[0].MessageID, again[0].MessageID)

	// Same transactionId in another partition is a new message.
	other := b.push(item("orders.eu.created", "p2", "tx-1", nil))
	require.Equal(t, "queued", other[0].Status)

	var q struct {
		Namespace string `json:"namespace"`
		Task      string `json:"task"`
		Totals    struct {
			Partitions int `json:"partitions"`
			Total      int `json:"total"`
		} `json:"totals"`
	}
	b.doJSON("GET", "/api/v1/resources/queues/orders.eu.created", nil, http.StatusOK, &q)
	require.Equal(t, "orders", q.Namespace)
	require.Equal(t, "eu", q.Task)
	require.Equal(t, 3, q.Totals.Partitions)
	require.Equal(t, 3, q.Totals.Total)

	// Big integers and any JSON come back byte for byte.
	p := b.pop("/api/v1/pop/queue/orders.eu.created/partition/Default")
	require.NotNil(t, p)
	require.Equal(t, "12345678901234567890", string(p.Messages[0].Data))
}

// Every push result element carries trace_id: the item's traceId, or null
// when it had none (clients read the key, so it is never left out).
func TestPushResultTraceID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trace := "0192f1c8-7b00-7c3d-8e4f-5a6b7c8d9e0f"
	traced := item("q", "", "a", 1)
	traced.TraceId = &trace
	status, raw := b.do("POST", "/api/v1/push", map[string]any{"items": []any{traced, item("q", "", "b", 2)}})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var out []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &out))
	require.Len(t, out, 2)
	require.JSONEq(t, `"`+trace+`"`, string(out[0]["trace_id"]))
	got, ok := out[1]["trace_id"]
	require.True(t, ok, "trace_id is present without a traceId: %s", raw)
	require.Equal(t, "null", string(got))
}

func TestPushEmptyItems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, body := b.do("POST", "/api/v1/push", map[string]any{"items": []any{}})
	require.Equal(t, http.StatusCreated, status)
	require.JSONEq(t, "[]", string(body))
}

func TestPushRejectsBadInputAndStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("a", 256)
	many := make([]client.PushItem, 1001)
	for i := range many {
		many[i] = item("q", "", "", i)
	}
	cases := map[string]struct {
		body any
		want string
	}{
		"empty body":         {"", "Empty request body"},
		"malformed json":     {"{", "Invalid JSON"},
		"no items":           {map[string]any{}, "items"},
		"items not array":    {map[string]any{"items": "x"}, "items"},
		"queue missing":      {map[string]any{"items": []any{map[string]any{"payload": 1}}}, "queue"},
		"queue not string":   {map[string]any{"items": []any{map[string]any{"queue": 5}}}, "queue"},
		"queue bad chars":    {map[string]any{"items": []any{item("a/b", "", "", 1)}}, "queue"},
		"queue empty":        {map[string]any{"items": []any{item("", "", "", 1)}}, "queue"},
		"queue too long":     {map[string]any{"items": []any{item(long, "", "", 1)}}, "queue"},
		"partition bad":      {map[string]any{"items": []any{item("q", "p p", "", 1)}}, "partition"},
		"trace not uuid":     {map[string]any{"items": []any{map[string]any{"queue": "q", "traceId": "nope"}}}, "traceId"},
		"batch over 1000":    {map[string]any{"items": many}, "items"},
		"one bad item fails": {map[string]any{"items": []any{item("good", "", "", 1), item("b a d", "", "", 1)}}, "queue"},
	}
	for name, c := range cases {
		status, body := b.do("POST", "/api/v1/push", c.body)
		require.Equal(t, http.StatusBadRequest, status, name)
		require.Contains(t, string(body), c.want, name)
		require.Contains(t, string(body), `"error"`, name)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages").Scan(&n))
	require.Zero(t, n, "rejected pushes store nothing")
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.queues").Scan(&n))
	require.Zero(t, n)
}

func TestUnknownAPIRouteIsJSON404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, body := b.do("GET", "/api/v1/nope", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, string(body), `"error"`)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var h struct{ Status, Database string }
	b.doJSON("GET", "/health", nil, http.StatusOK, &h)
	require.Equal(t, "healthy", h.Status)
	b.srv.Drain()
	b.doJSON("GET", "/health", nil, http.StatusServiceUnavailable, &h)
	require.Equal(t, "draining", h.Status)
}
