package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The push route through the whole chain (fast decoder) answers every body
// as the generated strict handler alone does, each on its own database:
// the same status, the same error text, the same results (ids aside).
func TestPushFastPathAnswersAsGenerated(t *testing.T) {
	t.Parallel()
	fast := newServer(t, testConfig{Pool: pgtest.NewPool(t)})
	chain, err := fast.Handler()
	require.NoError(t, err)
	slow := newServer(t, testConfig{Pool: pgtest.NewPool(t)})
	_, err = slow.Handler() // its validator
	require.NoError(t, err)
	generated := api.NewStrictHandlerWithOptions(slow, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: slow.requestError, ResponseErrorHandlerFunc: slow.responseError,
	})

	bodies := map[string]string{}
	for _, c := range pushDecodeCases {
		bodies[c.name] = c.body
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf(`{"queue":"q","transactionId":"m-%d"}`, i)
	}
	for name, body := range map[string]string{
		"over 1000 items":         `{"items":[` + strings.Join(many, ",") + `]}`,
		"1000 items":              `{"items":[` + strings.Join(many[:1000], ",") + `]}`,
		"queue bad chars":         `{"items":[{"queue":"a/b"}]}`,
		"queue dot":               `{"items":[{"queue":"."}]}`,
		"queue too long":          `{"items":[{"queue":"` + strings.Repeat("a", 256) + `"}]}`,
		"partition bad":           `{"items":[{"queue":"q","partition":"p p"}]}`,
		"transactionId too long":  `{"items":[{"queue":"q","transactionId":"` + strings.Repeat("é", 256) + `"}]}`,
		"trace not a uuid":        `{"items":[{"queue":"q","traceId":"nope"}]}`,
		"second item bad":         `{"items":[{"queue":"good","transactionId":"a"},{"queue":"b a d"}]}`,
		"repeat inside one push":  `{"items":[{"queue":"q","partition":"p","transactionId":"x","payload":1},{"queue":"q","partition":"p","transactionId":"x","payload":2}]}`,
		"repeat of a stored item": `{"items":[{"queue":"q","partition":"p","transactionId":"x","payload":3}]}`,
		"payload jsonb refuses":   `{"items":[{"queue":"q","payload":"\u0000"}]}`,
		"several queues":          `{"items":[{"queue":"q1","transactionId":"a"},{"queue":"q2","partition":"p","transactionId":"b","traceId":"0195a8c6-0000-7000-8000-000000000000"}]}`,
	} {
		bodies[name] = body
	}

	for name, body := range bodies {
		send := func(h func(http.ResponseWriter, *http.Request)) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/api/v1/push", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h(rec, req)
			return rec
		}
		got := send(chain.ServeHTTP)
		want := send(func(w http.ResponseWriter, r *http.Request) { generated.PushMessages(w, r, api.PushMessagesParams{}) })
		require.Equal(t, want.Code, got.Code, "%s: %s / %s", name, want.Body, got.Body)
		require.Equal(t, want.Header().Get("Content-Type"), got.Header().Get("Content-Type"), name)
		if want.Code != http.StatusCreated {
			require.Equal(t, want.Body.String(), got.Body.String(), name)
			continue
		}
		require.Equal(t, withoutIDs(t, want.Body.Bytes()), withoutIDs(t, got.Body.Bytes()), name)
	}
}

// withoutIDs is a push answer without what differs between two databases:
// message and partition ids, and generated transactionIds (checked to be
// UUIDs).
func withoutIDs(t *testing.T, answer []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	require.NoError(t, json.Unmarshal(answer, &out), "%s", answer)
	for _, r := range out {
		delete(r, "messageId")
		delete(r, "message_id")
		delete(r, "partition_id")
		if tx, _ := r["transactionId"].(string); strings.Count(tx, "-") == 4 && len(tx) == 36 {
			_, err := uuid.Parse(tx)
			require.NoError(t, err)
			r["transactionId"], r["transaction_id"] = "uuid", "uuid"
		}
	}
	return out
}

// A body larger than the limit answers 413 on the fast path too, whether
// its length is declared or it arrives chunked.
func TestPushFastPathBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.MaxBodyBytes = 100 }})
	body := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 200) + `"}]}`
	requireBodyTooLarge(t, b.url+"/api/v1/push", body)
	// Within the limit the same route stores the push.
	status, got := b.do("POST", "/api/v1/push", json.RawMessage(`{"items":[{"queue":"q","payload":1}]}`))
	require.Equal(t, http.StatusCreated, status, "%s", got)
	require.True(t, bytes.Contains(got, []byte(`"status":"queued"`)), "%s", got)
}

// benchPushSeq numbers the benchmark's transactionIds across its runs.
var benchPushSeq atomic.Int64

// BenchmarkPushRoute is a push of 100 messages of 64 bytes to one partition,
// as queen-bench sends it, stored on the test harness's PostgreSQL: through
// the generated strict handler alone, and through the whole chain (the fast
// decoder). Per op: the broker's whole push path, the statement included.
func BenchmarkPushRoute(b *testing.B) {
	srv := newServer(b, testConfig{Pool: pgtest.NewPool(b)})
	chain, err := srv.Handler()
	require.NoError(b, err)
	strict := api.NewStrictHandlerWithOptions(srv, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: srv.requestError, ResponseErrorHandlerFunc: srv.responseError,
	})
	generated := func(w http.ResponseWriter, r *http.Request) { strict.PushMessages(w, r, api.PushMessagesParams{}) }
	pad := strings.Repeat("x", 64-34)
	for name, h := range map[string]http.HandlerFunc{"generated": generated, "fast": chain.ServeHTTP} {
		b.Run(name, func(b *testing.B) {
			var body []byte
			b.ReportAllocs()
			for b.Loop() {
				body = body[:0]
				body = append(body, `{"items":[`...)
				for i := range 100 {
					if i > 0 {
						body = append(body, ',')
					}
					seq := benchPushSeq.Add(1)
					body = fmt.Appendf(body, `{"queue":"bench","partition":"p-%d","transactionId":"%s-%d","payload":{"t":1764740000000000000,"pad":"%s"}}`, seq/100%16, name, seq, pad)
				}
				body = append(body, "]}"...)
				req := httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body))
				rec := httptest.NewRecorder()
				h(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// requireBodyTooLarge posts body to url twice, with its length declared and
// chunked (no length known), and requires the 413 answer both times.
func requireBodyTooLarge(t *testing.T, url, body string) {
	t.Helper()
	for name, r := range map[string]io.Reader{
		"declared": strings.NewReader(body),
		"chunked":  io.MultiReader(strings.NewReader(body)),
	} {
		req, err := http.NewRequest("POST", url, r)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s: %s", name, got)
		require.JSONEq(t, `{"error":"request body too large"}`, string(got), name)
	}
}
