package handlers

// Wire compatibility with the official clients (JS client-v2, Python queen,
// Go client-go). The clients cannot be installed here, so each test replays
// the exact requests a client builds (method, path, query string, JSON body,
// written out as raw strings where the bytes matter) and decodes the answer
// the way that client does, asserting only on what the client reads. The
// contract is written down in docs/client-wire-contract.md.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// cwTxID is what every client generates for a push without a transactionId.
func cwTxID() string { return uuid.Must(uuid.NewV7()).String() }

// cwClient selects the headers a client puts on every request.
type cwClient int

const (
	cwJS cwClient = iota // HttpClient.js: Content-Type on every request, GET and DELETE included
	cwPy                 // httpx: Content-Type only when a JSON body is attached
	cwGo                 // http_client.go: Content-Type and Accept on every request
)

// cwDo sends one request with the client's headers and checks the answer
// against openapi.yaml, like testBundle.do.
func (b *testBundle) cwDo(c cwClient, method, path string, body any) (int, []byte) {
	b.t.Helper()
	return b.doWithHeaders(method, path, body, func(req *http.Request) {
		if c != cwPy || body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c == cwGo {
			req.Header.Set("Accept", "application/json")
		}
	})
}

// cwCall replays one JS or Python request; a 2xx body is parsed as untyped
// JSON, an empty one (204) is nil. Both HttpClient.js and http_client.py
// raise on a status >= 400, which fails the flow here.
func (b *testBundle) cwCall(c cwClient, method, path string, body any) any {
	b.t.Helper()
	status, raw := b.cwDo(c, method, path, body)
	require.Less(b.t, status, 400, "%s %s answered %d %s: the client raises", method, path, status, raw)
	require.GreaterOrEqual(b.t, status, 200)
	if status == http.StatusNoContent || len(raw) == 0 {
		return nil
	}
	var v any
	require.NoError(b.t, json.Unmarshal(raw, &v), "%s %s: %s", method, path, raw)
	return v
}

// cwGoCall is http_client.go: >= 400 is an HTTPError; then parseBody: an
// object is the map, a top-level array becomes {"data": [...]}, anything
// else {"raw": body}, an empty body a nil map.
func (b *testBundle) cwGoCall(method, path string, body any) map[string]any {
	b.t.Helper()
	status, raw := b.cwDo(cwGo, method, path, body)
	require.Less(b.t, status, 400, "%s %s answered %d %s: the Go client returns an HTTPError", method, path, status, raw)
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		return m
	}
	var a []any
	if json.Unmarshal(raw, &a) == nil {
		return map[string]any{"data": a}
	}
	return map[string]any{"raw": string(raw)}
}

// cwTruthy is JavaScript/Python truthiness of a decoded JSON value.
func cwTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return true // JS: [] is truthy (Python checks below never meet one)
	default:
		return true
	}
}

// cwStr is the Go client's `m[key].(string)` with the ok-check: "" otherwise.
func cwStr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// cwMessages is QueueBuilder.pop()/consume in JS and Python: no result or no
// messages → [], otherwise the non-null raw message objects.
func cwMessages(result any) []map[string]any {
	m, ok := result.(map[string]any)
	if !ok {
		return nil
	}
	raw, _ := m["messages"].([]any)
	var out []map[string]any
	for _, x := range raw {
		if msg, ok := x.(map[string]any); ok {
			out = append(out, msg)
		}
	}
	return out
}

// cwPushStatuses is PushBuilder (JS and Python): the response must be an
// array; each element is sorted by `status` (queued / duplicate / failed).
func cwPushStatuses(t *testing.T, result any) []string {
	t.Helper()
	arr, ok := result.([]any)
	require.True(t, ok, "push answered %v: not an array, so the client looks for a top-level error instead", result)
	var out []string
	for _, x := range arr {
		el, _ := x.(map[string]any)
		require.NotEqual(t, "failed", cwStr(el, "status"), "%v", el)
		out = append(out, cwStr(el, "status"))
	}
	return out
}

type cwAck struct {
	Success bool
	Error   string
}

// cwJSAckResults is Queen.js parseAckResults + normalizeAckItem: an array of
// exactly `expected` items; success defaults to true, a non-empty error
// string makes it false, success:false without error gets a stock message.
// A non-array with a top-level error fails every item; anything else throws.
func cwJSAckResults(t *testing.T, result any, expected int) []cwAck {
	t.Helper()
	arr, ok := result.([]any)
	if !ok {
		m, _ := result.(map[string]any)
		if e := cwStr(m, "error"); e != "" {
			out := make([]cwAck, expected)
			for i := range out {
				out[i] = cwAck{false, e}
			}
			return out
		}
		t.Fatalf("ack answered %v: the JS client throws 'Unexpected ack response format'", result)
	}
	require.Len(t, arr, expected, "the JS client throws on a misaligned ack response")
	out := make([]cwAck, len(arr))
	for i, x := range arr {
		item, ok := x.(map[string]any)
		require.True(t, ok, "ack item %d is %v: the JS client throws", i, x)
		success := true
		if s, ok := item["success"].(bool); ok {
			success = s
		}
		e := cwStr(item, "error")
		if e != "" {
			success = false
		}
		if !success && e == "" {
			e = "Acknowledgment rejected by server"
		}
		out[i] = cwAck{success, e}
	}
	return out
}

// cwPyAckSingle is Queen.ack for one message in client.py: a list is judged by
// its first element's `success` (error from `.get("error", "ACK failed")`),
// a dict by its `error`, anything else is success.
func cwPyAckSingle(result any) cwAck {
	switch r := result.(type) {
	case []any:
		if len(r) == 0 {
			return cwAck{true, ""}
		}
		first, _ := r[0].(map[string]any)
		if cwTruthy(first["success"]) {
			return cwAck{true, ""}
		}
		e, ok := first["error"]
		if !ok {
			return cwAck{false, "ACK failed"}
		}
		return cwAck{false, fmt.Sprint(e)}
	case map[string]any:
		if cwTruthy(r["error"]) {
			return cwAck{false, fmt.Sprint(r["error"])}
		}
	}
	return cwAck{true, ""}
}

// cwPyAckBatch is the batch branch of client.py: only a dict with a truthy
// error is a failure.
func cwPyAckBatch(result any) cwAck {
	if m, ok := result.(map[string]any); ok && cwTruthy(m["error"]) {
		return cwAck{false, fmt.Sprint(m["error"])}
	}
	return cwAck{true, ""}
}

// cwGoAckSingle is Queen.Ack with one message: only a top-level `error`
// string fails it (an array is wrapped as {"data": ...} and has none).
func cwGoAckSingle(result map[string]any) cwAck {
	if e := cwStr(result, "error"); e != "" {
		return cwAck{false, e}
	}
	return cwAck{true, ""}
}

// cwGoAckBatch is Queen.Ack with several messages: data[i].error.
func cwGoAckBatch(t *testing.T, result map[string]any, n int) []cwAck {
	t.Helper()
	data, ok := result["data"].([]any)
	if !ok {
		r := cwGoAckSingle(result)
		out := make([]cwAck, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	var out []cwAck
	for _, x := range data {
		item, ok := x.(map[string]any)
		if !ok {
			continue
		}
		if e := cwStr(item, "error"); e != "" {
			out = append(out, cwAck{false, e})
		} else {
			out = append(out, cwAck{true, ""})
		}
	}
	return out
}

// cwGoMessage is client-go's Message as parseMessages fills it.
type cwGoMessage struct {
	TransactionID, PartitionID, LeaseID, Queue, Partition, CreatedAt, ErrorMessage, ProducerSub string
	Data                                                                                        map[string]any
	RetryCount                                                                                  int
}

func cwGoParseMessages(result map[string]any) []cwGoMessage {
	raw, _ := result["messages"].([]any)
	var out []cwGoMessage
	for _, x := range raw {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		msg := cwGoMessage{
			TransactionID: cwStr(m, "transactionId"), PartitionID: cwStr(m, "partitionId"),
			LeaseID: cwStr(m, "leaseId"), Queue: cwStr(m, "queue"), Partition: cwStr(m, "partition"),
			CreatedAt: cwStr(m, "createdAt"), ErrorMessage: cwStr(m, "errorMessage"), ProducerSub: cwStr(m, "producerSub"),
		}
		msg.Data, _ = m["data"].(map[string]any)
		if f, ok := m["retryCount"].(float64); ok {
			msg.RetryCount = int(f)
		}
		out = append(out, msg)
	}
	return out
}

// cwGoPush is parsePushResponses: defaults (queued, own transactionId), then
// data[i].status / error / transactionId when present.
func cwGoPush(result map[string]any, sent []string) []cwAck {
	out := make([]cwAck, len(sent))
	statuses := make([]string, len(sent))
	for i := range sent {
		statuses[i] = "queued"
	}
	if data, ok := result["data"].([]any); ok {
		for i, x := range data {
			if i >= len(sent) {
				break
			}
			m, _ := x.(map[string]any)
			if s := cwStr(m, "status"); s != "" {
				statuses[i] = s
			}
			out[i].Error = cwStr(m, "error")
		}
	}
	for i := range out {
		out[i].Success = statuses[i] == "queued"
	}
	return out
}

func cwQuery(kv ...string) string {
	var s string
	for i := 0; i+1 < len(kv); i += 2 {
		if s != "" {
			s += "&"
		}
		s += url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1])
	}
	return s
}

func cwFuture(t *testing.T, layout, s string) {
	t.Helper()
	at, err := time.Parse(layout, s)
	require.NoError(t, err, "expiry %q", s)
	require.True(t, at.After(time.Now()), "expiry %s is not in the future", s)
}

// jsQueueDefaults is QUEUE_DEFAULTS (utils/defaults.js), which create() always
// sends, merged with config(options). Python's snake_case defaults convert to
// the same camelCase keys.
func jsQueueDefaults(retryLimit int) string {
	return fmt.Sprintf(`{"leaseTime":300,"retryLimit":%d,"priority":0,"delayedProcessing":0,"windowBuffer":0,"maxSize":0,"retentionSeconds":0,"completedRetentionSeconds":0,"encryptionEnabled":false}`, retryLimit)
}
