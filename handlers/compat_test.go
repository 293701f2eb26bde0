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

func TestJSClientWireFlows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noError := func(result any) { // OperationBuilder: `result && result.error` throws
		t.Helper()
		if m, ok := result.(map[string]any); ok {
			require.False(t, cwTruthy(m["error"]), "%v", m)
		}
	}
	ackBody := func(msg map[string]any, status, errJSON, groupJSON string) string {
		return fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":%q,"error":%s,"consumerGroup":%s,"leaseId":%q}`,
			msg["transactionId"], msg["partitionId"], status, errJSON, groupJSON, msg["leaseId"])
	}
	batchAckBody := func(msgs []map[string]any, status, groupJSON string) string {
		s := `{"acknowledgments":[`
		for i, m := range msgs {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":%q,"error":null,"leaseId":%q}`, m["transactionId"], m["partitionId"], status, m["leaseId"])
		}
		return s + `],"consumerGroup":` + groupJSON + `}`
	}

	// configure: queue(name).create() sends the whole QUEUE_DEFAULTS and
	// null namespace/task; config({...}) merges over the defaults.
	noError(b.cwCall(cwJS, "POST", "/api/v1/configure", `{"queue":"js-orders","namespace":null,"task":null,"options":`+jsQueueDefaults(3)+`}`))
	noError(b.cwCall(cwJS, "POST", "/api/v1/configure", `{"queue":"js-retry","namespace":null,"task":null,"options":`+jsQueueDefaults(1)+`}`))
	noError(b.cwCall(cwJS, "POST", "/api/v1/configure", `{"queue":"js-invoices","namespace":"billing","task":"invoices","options":`+jsQueueDefaults(3)+`}`))

	// push: one item, then a batch with a traceId, then a duplicate.
	tx1 := cwTxID()
	require.Equal(t, []string{"queued"}, cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push",
		fmt.Sprintf(`{"items":[{"queue":"js-orders","partition":"Default","payload":{"orderId":1},"transactionId":%q}]}`, tx1))))
	tx2, tx3, tx4, trace := cwTxID(), cwTxID(), cwTxID(), uuid.NewString()
	require.Equal(t, []string{"queued", "queued", "queued"}, cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push", fmt.Sprintf(
		`{"items":[{"queue":"js-orders","partition":"Default","payload":{"orderId":2},"transactionId":%q},`+
			`{"queue":"js-orders","partition":"Default","payload":{"orderId":3},"transactionId":%q,"traceId":%q},`+
			`{"queue":"js-orders","partition":"Default","payload":"plain string","transactionId":%q}]}`, tx2, tx3, trace, tx4))))
	require.Equal(t, []string{"duplicate"}, cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push",
		fmt.Sprintf(`{"items":[{"queue":"js-orders","partition":"Default","payload":{"orderId":1},"transactionId":%q}]}`, tx1))))

	// pop(): POP defaults are batch=1, wait=true, timeout=30000 (autoAck is
	// never sent: autoAck(true) equals CONSUME_DEFAULTS and maps to false).
	msgs := cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders?batch=1&wait=true&timeout=30000", nil))
	require.Len(t, msgs, 1)
	m1 := msgs[0]
	require.Equal(t, tx1, m1["transactionId"])
	require.Equal(t, map[string]any{"orderId": float64(1)}, m1["data"])
	require.NotEmpty(t, cwStr(m1, "partitionId"))
	require.NotEmpty(t, cwStr(m1, "leaseId"))

	// ack(message, true): consumerGroup null, error null, leaseId.
	acks := cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(m1, "completed", "null", "null")), 1)
	require.True(t, acks[0].Success, acks[0].Error)
	// The same ack again: the lease is spent, and the JS client must see it.
	acks = cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(m1, "completed", "null", "null")), 1)
	require.False(t, acks[0].Success)
	require.NotEmpty(t, acks[0].Error)

	// pop().batch(10).wait(false), renew(messages), ack(messages, true).
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders?batch=10&wait=false&timeout=30000", nil))
	require.Len(t, msgs, 3)
	require.Equal(t, []any{tx2, tx3, tx4}, []any{msgs[0]["transactionId"], msgs[1]["transactionId"], msgs[2]["transactionId"]})
	require.Equal(t, trace, msgs[1]["traceId"])
	require.Equal(t, "plain string", msgs[2]["data"])
	lease := cwStr(msgs[0], "leaseId")
	renew, ok := b.cwCall(cwJS, "POST", "/api/v1/lease/"+lease+"/extend", `{}`).(map[string]any)
	require.True(t, ok, "renew: the JS client reads fields of an object")
	expiry := renew["lease_expires_at"]
	if cwTruthy(renew["leaseId"]) {
		expiry = renew["newExpiresAt"]
	}
	es, _ := expiry.(string)
	cwFuture(t, time.RFC3339Nano, es)
	for _, a := range cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack/batch", batchAckBody(msgs, "completed", "null")), 3) {
		require.True(t, a.Success, a.Error)
	}

	// Empty pops: 204 → null → []; a long-poll ends before the client's
	// timeout + 5000 ms.
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders?batch=1&wait=false&timeout=30000", nil))
	start := time.Now()
	require.Empty(t, cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders?batch=1&wait=true&timeout=300", nil)))
	require.Less(t, time.Since(start), 5300*time.Millisecond)
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-missing?batch=1&wait=false&timeout=30000", nil))

	// partition('eu').pop(): the targeted route.
	require.Equal(t, []string{"queued"}, cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push",
		fmt.Sprintf(`{"items":[{"queue":"js-orders","partition":"eu","payload":{"region":"eu"},"transactionId":%q}]}`, cwTxID()))))
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders/partition/eu?batch=1&wait=false&timeout=30000", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, "eu", msgs[0]["partition"])
	require.True(t, cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", "null")), 1)[0].Success)

	// consume(): ConsumerManager params are batch, wait, timeout,
	// consumerGroup, ... (never autoAck); a batch handler is acked with one
	// /ack/batch carrying the group at the top level.
	e1, e2, e3 := cwTxID(), cwTxID(), cwTxID()
	require.Len(t, cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push", fmt.Sprintf(
		`{"items":[{"queue":"js-events","partition":"Default","payload":{"e":1},"transactionId":%q},`+
			`{"queue":"js-events","partition":"Default","payload":{"e":2},"transactionId":%q},`+
			`{"queue":"js-events","partition":"Default","payload":{"e":3},"transactionId":%q}]}`, e1, e2, e3))), 3)
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-events?batch=5&wait=true&timeout=30000&consumerGroup=js-workers", nil))
	require.Len(t, msgs, 3)
	// msg.trace(): traceNames null when no name is given.
	tr, ok := b.cwCall(cwJS, "POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"js-workers","traceNames":null,"eventType":"info","data":{"text":"Started processing"}}`, msgs[0]["transactionId"], msgs[0]["partitionId"])).(map[string]any)
	require.True(t, ok)
	require.NotEqual(t, false, tr["success"], "{success:true, ...response} would turn false")
	b.cwCall(cwJS, "POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"js-workers","traceNames":["tenant-acme","chat-room-123"],"eventType":"step","data":{"orderId":123}}`, msgs[1]["transactionId"], msgs[1]["partitionId"]))
	for _, a := range cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack/batch", batchAckBody(msgs, "completed", `"js-workers"`)), 3) {
		require.True(t, a.Success, a.Error)
	}

	// consume().each(): ack the first, then a stop hands the rest back with a
	// `retry` batch ack; the next pop starts with the handed-back message.
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-events?batch=2&wait=true&timeout=30000&consumerGroup=js-each", nil))
	require.Len(t, msgs, 2)
	require.True(t, cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", `"js-each"`)), 1)[0].Success)
	require.True(t, cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack/batch", batchAckBody(msgs[1:], "retry", `"js-each"`)), 1)[0].Success)
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-events?batch=1&wait=true&timeout=30000&consumerGroup=js-each", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, e2, msgs[0]["transactionId"])

	// consume() with pop autopilot (newer client-v2, the default): batch and
	// partitions are omitted and autopilot=true is sent; a broker without
	// autopilot must ignore it and apply its own default batch.
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-events?autopilot=true&wait=true&timeout=30000&consumerGroup=js-auto", nil))
	require.NotEmpty(t, msgs)
	require.Equal(t, e1, msgs[0]["transactionId"])
	require.True(t, cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", `"js-auto"`)), 1)[0].Success)

	// A throwing handler: ack(message, false, {group, error}) until the
	// queue's retryLimit (1) is spent, then the message is in the DLQ.
	r1 := cwTxID()
	cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"js-retry","partition":"Default","payload":{"poison":true},"transactionId":%q}]}`, r1)))
	for range 2 {
		msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-retry?batch=1&wait=true&timeout=30000&consumerGroup=js-dlq-workers", nil))
		require.Len(t, msgs, 1)
		require.Equal(t, r1, msgs[0]["transactionId"])
		a := cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(msgs[0], "failed", `"handler exploded"`, `"js-dlq-workers"`)), 1)[0]
		require.True(t, a.Success, a.Error)
	}
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-retry?batch=1&wait=false&timeout=30000&consumerGroup=js-dlq-workers", nil))

	// queue(name).dlq(group).from(iso).to(iso).get(): queue, limit, offset,
	// consumerGroup, from, to; the client reads messages and total.
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") } // Date#toISOString
	for _, q := range []string{
		cwQuery("queue", "js-retry", "limit", "100", "offset", "0"),
		cwQuery("queue", "js-retry", "limit", "100", "offset", "0", "consumerGroup", "js-dlq-workers",
			"from", iso(time.Now().Add(-time.Hour)), "to", iso(time.Now().Add(time.Hour))),
	} {
		dlq, ok := b.cwCall(cwJS, "GET", "/api/v1/dlq?"+q, nil).(map[string]any)
		require.True(t, ok)
		require.Equal(t, float64(1), dlq["total"], q)
		list := cwMessages(dlq)
		require.Len(t, list, 1, q)
		require.Equal(t, r1, list[0]["transactionId"])
		require.Equal(t, "handler exploded", list[0]["errorMessage"])
	}

	// transaction().ack(msg).queue(q).push([...]).queue(q).partition(p).push(...).commit()
	in := cwTxID()
	cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"js-tx-in","partition":"Default","payload":{"step":1},"transactionId":%q}]}`, in)))
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-tx-in?batch=1&wait=false&timeout=30000", nil))
	require.Len(t, msgs, 1)
	out1, out2 := cwTxID(), cwTxID()
	res, ok := b.cwCall(cwJS, "POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[`+
		`{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed"},`+
		`{"type":"push","items":[{"queue":"js-tx-out","payload":{"step":2},"transactionId":%q}]},`+
		`{"type":"push","items":[{"queue":"js-tx-out","payload":{"step":3},"transactionId":%q,"partition":"p9"}]}],`+
		`"requiredLeases":[%q]}`, in, msgs[0]["partitionId"], out1, out2, msgs[0]["leaseId"])).(map[string]any)
	require.True(t, ok)
	require.True(t, cwTruthy(res["success"]), "commit throws %v", res["error"])
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-tx-in?batch=1&wait=false&timeout=30000", nil))
	require.Equal(t, out1, cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-tx-out/partition/Default?batch=1&wait=false&timeout=30000", nil))[0]["transactionId"])
	require.Equal(t, out2, cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-tx-out/partition/p9?batch=1&wait=false&timeout=30000", nil))[0]["transactionId"])
	// A commit the broker rolls back: 200, success false, error → the client throws result.error.
	res, ok = b.cwCall(cwJS, "POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[`+
		`{"type":"ack","transactionId":"no-such-message","partitionId":%q,"status":"completed","consumerGroup":"js-workers"},`+
		`{"type":"push","items":[{"queue":"js-tx-lost","payload":{},"transactionId":%q}]}],"requiredLeases":[]}`, msgs[0]["partitionId"], cwTxID())).(map[string]any)
	require.True(t, ok)
	require.False(t, cwTruthy(res["success"]))
	require.True(t, cwTruthy(res["error"]))
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-tx-lost?batch=1&wait=false&timeout=30000", nil))

	// namespace('billing').task('invoices').pop()
	cwPushStatuses(t, b.cwCall(cwJS, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"js-invoices","partition":"Default","payload":{"invoice":7},"transactionId":%q}]}`, cwTxID())))
	msgs = cwMessages(b.cwCall(cwJS, "GET", "/api/v1/pop?batch=1&wait=false&timeout=30000&namespace=billing&task=invoices", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, "js-invoices", msgs[0]["queue"])
	require.True(t, cwJSAckResults(t, b.cwCall(cwJS, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", "null")), 1)[0].Success)

	// updateConsumerGroupTimestamp / deleteConsumerGroup: any 2xx.
	b.cwCall(cwJS, "POST", "/api/v1/consumer-groups/"+url.PathEscape("js-workers")+"/subscription", fmt.Sprintf(`{"subscriptionTimestamp":%q}`, iso(time.Now())))
	b.cwCall(cwJS, "DELETE", "/api/v1/consumer-groups/"+url.PathEscape("js-workers")+"?deleteMetadata=true", nil)
	b.cwCall(cwJS, "DELETE", "/api/v1/consumer-groups/js-each?deleteMetadata=false", nil)

	// queue(name).delete()
	noError(b.cwCall(cwJS, "DELETE", "/api/v1/resources/queues/"+url.PathEscape("js-orders"), nil))
	require.Nil(t, b.cwCall(cwJS, "GET", "/api/v1/pop/queue/js-orders?batch=1&wait=false&timeout=30000", nil))
}

func TestPythonClientWireFlows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noError := func(result any) { // OperationBuilder: a dict with a truthy error raises
		t.Helper()
		if m, ok := result.(map[string]any); ok {
			require.False(t, cwTruthy(m["error"]), "%v", m)
		}
	}
	ackBody := func(msg map[string]any, status, errJSON, groupJSON string) string {
		return fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":%q,"error":%s,"consumerGroup":%s,"leaseId":%q}`,
			msg["transactionId"], msg["partitionId"], status, errJSON, groupJSON, msg["leaseId"])
	}
	batchAckBody := func(msgs []map[string]any, status, groupJSON string) string {
		s := `{"acknowledgments":[`
		for i, m := range msgs {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":%q,"error":null,"leaseId":%q}`, m["transactionId"], m["partitionId"], status, m["leaseId"])
		}
		return s + `],"consumerGroup":` + groupJSON + `}`
	}
	push := func(queue, partition string, txIDs ...string) {
		t.Helper()
		s := `{"items":[`
		for i, tx := range txIDs {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`{"queue":%q,"partition":%q,"payload":{"n":%d},"transactionId":%q}`, queue, partition, i, tx)
		}
		st := cwPushStatuses(t, b.cwCall(cwPy, "POST", "/api/v1/push", s+`]}`))
		require.Len(t, st, len(txIDs))
	}
	// datetime.now(timezone.utc).isoformat()
	pyISO := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000-07:00") }

	// create(): snake_case QUEUE_DEFAULTS converted to camelCase, None namespace/task.
	noError(b.cwCall(cwPy, "POST", "/api/v1/configure", `{"queue":"py-orders","namespace":null,"task":null,"options":`+jsQueueDefaults(3)+`}`))
	noError(b.cwCall(cwPy, "POST", "/api/v1/configure", `{"queue":"py-retry","namespace":"ops","task":null,"options":`+jsQueueDefaults(1)+`}`))

	// push + pop(): Python's pop() starts from CONSUME_DEFAULTS too, so
	// wait=true is sent: batch, wait, timeout in that order.
	p1, p2, p3 := cwTxID(), cwTxID(), cwTxID()
	push("py-orders", "Default", p1, p2, p3)
	msgs := cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=1&wait=true&timeout=30000", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, p1, msgs[0]["transactionId"])

	// renew(message): client.py posts `{}`, but http_client.py only attaches
	// a body when it is truthy, so the request goes out with NO body and no
	// Content-Type. The answer must be a dict: result.get("newExpiresAt").
	renew, ok := b.cwCall(cwPy, "POST", "/api/v1/lease/"+cwStr(msgs[0], "leaseId")+"/extend", nil).(map[string]any)
	require.True(t, ok, "renew: Python calls .get on the result; anything but a dict is a failed renewal")
	expiry, _ := renew["newExpiresAt"].(string)
	if expiry == "" {
		expiry, _ = renew["lease_expires_at"].(string)
	}
	cwFuture(t, time.RFC3339Nano, expiry)

	// ack(message): status True → "completed", error/consumerGroup None.
	a := cwPyAckSingle(b.cwCall(cwPy, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", "null")))
	require.True(t, a.Success, a.Error)
	a = cwPyAckSingle(b.cwCall(cwPy, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", "null")))
	require.False(t, a.Success, "a spent lease must read as a failed ack")

	// pop().batch(10).wait(False) then ack(list): /ack/batch, consumerGroup None.
	msgs = cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=10&wait=false&timeout=30000", nil))
	require.Len(t, msgs, 2)
	require.True(t, cwPyAckBatch(b.cwCall(cwPy, "POST", "/api/v1/ack/batch", batchAckBody(msgs, "completed", "null"))).Success)
	require.Empty(t, cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=1&wait=false&timeout=30000", nil)))

	// consume() with subscription_mode("new") and timeout_millis(500): the
	// first long-poll times out empty, a later push is delivered, the old
	// backlog is not.
	start := time.Now()
	require.Empty(t, cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=1&wait=true&timeout=500&consumerGroup=py-new&subscriptionMode=new", nil)))
	require.Less(t, time.Since(start), 5500*time.Millisecond)
	pNew := cwTxID()
	push("py-orders", "Default", pNew)
	msgs = cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=10&wait=true&timeout=500&consumerGroup=py-new&subscriptionMode=new", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, pNew, msgs[0]["transactionId"])
	require.True(t, cwPyAckSingle(b.cwCall(cwPy, "POST", "/api/v1/ack", ackBody(msgs[0], "completed", "null", `"py-new"`))).Success)

	// msg["trace"]({...}) from a consumer with a group.
	tr, ok := b.cwCall(cwPy, "POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"py-new","traceNames":["order-42"],"eventType":"info","data":{"stage":"done"}}`, msgs[0]["transactionId"], msgs[0]["partitionId"])).(map[string]any)
	require.True(t, ok)
	require.NotEqual(t, false, tr["success"])

	// A failing handler with auto_ack: ack(message, False, {group, error}).
	r1 := cwTxID()
	push("py-retry", "Default", r1)
	for range 2 {
		msgs = cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-retry?batch=1&wait=true&timeout=30000&consumerGroup=py-workers", nil))
		require.Len(t, msgs, 1)
		require.Equal(t, r1, msgs[0]["transactionId"])
		a = cwPyAckSingle(b.cwCall(cwPy, "POST", "/api/v1/ack", ackBody(msgs[0], "failed", `"ValueError: bad row"`, `"py-workers"`)))
		require.True(t, a.Success, a.Error)
	}
	require.Nil(t, b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-retry?batch=1&wait=false&timeout=30000&consumerGroup=py-workers", nil))

	// dlq("py-workers").from_(...).to(...).get(): urlencode(queue, limit,
	// offset, consumerGroup, from, to) with +00:00 offsets.
	for _, q := range []string{
		cwQuery("queue", "py-retry", "limit", "100", "offset", "0", "consumerGroup", "py-workers"),
		cwQuery("queue", "py-retry", "limit", "100", "offset", "0", "consumerGroup", "py-workers",
			"from", pyISO(time.Now().Add(-time.Hour)), "to", pyISO(time.Now().Add(time.Hour))),
	} {
		dlq, ok := b.cwCall(cwPy, "GET", "/api/v1/dlq?"+q, nil).(map[string]any)
		require.True(t, ok)
		require.Equal(t, float64(1), dlq["total"], q)
		list := cwMessages(dlq)
		require.Len(t, list, 1)
		require.Equal(t, "ValueError: bad row", list[0]["errorMessage"])
	}

	// transaction().ack(msg, "completed", {"consumer_group": g}).queue(q).push([...]).commit()
	push("py-orders", "Default", cwTxID())
	msgs = cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-orders?batch=1&wait=true&timeout=30000&consumerGroup=py-new", nil))
	require.Len(t, msgs, 1)
	out := cwTxID()
	res, ok := b.cwCall(cwPy, "POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[`+
		`{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed","consumerGroup":"py-new"},`+
		`{"type":"push","items":[{"queue":"py-out","payload":{"ok":true},"transactionId":%q}]}],"requiredLeases":[%q]}`,
		msgs[0]["transactionId"], msgs[0]["partitionId"], out, msgs[0]["leaseId"])).(map[string]any)
	require.True(t, ok)
	require.True(t, cwTruthy(res["success"]), "commit raises %v", res["error"])
	require.Equal(t, out, cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop/queue/py-out?batch=1&wait=false&timeout=30000", nil))[0]["transactionId"])

	// namespace("ops").pop(): task None is not sent.
	push("py-retry", "Default", cwTxID())
	msgs = cwMessages(b.cwCall(cwPy, "GET", "/api/v1/pop?batch=1&wait=false&timeout=30000&namespace=ops", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, "py-retry", msgs[0]["queue"])

	// update_consumer_group_timestamp / delete_consumer_group (quote()d
	// name, deleteMetadata lower-cased bool); any 2xx (None → {"success": True}).
	b.cwCall(cwPy, "POST", "/api/v1/consumer-groups/"+url.PathEscape("py-new")+"/subscription", fmt.Sprintf(`{"subscriptionTimestamp":%q}`, pyISO(time.Now())))
	b.cwCall(cwPy, "DELETE", "/api/v1/consumer-groups/py-new?deleteMetadata=true", nil)

	// queue(name).delete(): the name goes into the path as is.
	noError(b.cwCall(cwPy, "DELETE", "/api/v1/resources/queues/py-orders", nil))
}

func TestGoClientWireFlows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pushBody := func(queue, partition string, items ...[2]string) string { // (transactionId, traceId)
		s := `{"items":[`
		for i, it := range items {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`{"queue":%q,"partition":%q,"payload":{"n":%d},"transactionId":%q`, queue, partition, i, it[0])
			if it[1] != "" {
				s += fmt.Sprintf(`,"traceId":%q`, it[1])
			}
			s += "}"
		}
		return s + "]}"
	}
	push := func(queue, partition string, txIDs ...string) {
		t.Helper()
		items := make([][2]string, len(txIDs))
		for i, tx := range txIDs {
			items[i] = [2]string{tx, ""}
		}
		for _, r := range cwGoPush(b.cwGoCall("POST", "/api/v1/push", pushBody(queue, partition, items...)), txIDs) {
			require.True(t, r.Success, r.Error)
		}
	}
	// ackRequest: leaseId, error and consumerGroup are omitempty.
	ackReq := func(m cwGoMessage, status, errMsg string) string {
		s := fmt.Sprintf(`{"transactionId":%q,"partitionId":%q`, m.TransactionID, m.PartitionID)
		if m.LeaseID != "" {
			s += fmt.Sprintf(`,"leaseId":%q`, m.LeaseID)
		}
		s += fmt.Sprintf(`,"status":%q`, status)
		if errMsg != "" {
			s += fmt.Sprintf(`,"error":%q`, errMsg)
		}
		return s
	}
	ackOne := func(m cwGoMessage, status, errMsg, group string) string {
		s := ackReq(m, status, errMsg)
		if group != "" {
			s += fmt.Sprintf(`,"consumerGroup":%q`, group)
		}
		return s + "}"
	}
	ackBatch := func(msgs []cwGoMessage, status, group string) string {
		s := `{"acknowledgments":[`
		for i, m := range msgs {
			if i > 0 {
				s += ","
			}
			s += ackReq(m, status, "") + "}"
		}
		s += "]"
		if group != "" {
			s += fmt.Sprintf(`,"consumerGroup":%q`, group)
		}
		return s + "}"
	}

	// Queue(name).Create(): no Config → no options; with Config only the
	// non-zero options, and namespace/task only when set.
	b.cwGoCall("POST", "/api/v1/configure", `{"queue":"go-orders"}`)
	b.cwGoCall("POST", "/api/v1/configure", `{"queue":"go-retry","namespace":"ops","task":"alerts","options":{"leaseTime":60,"retryLimit":1}}`)

	// Push: every item carries a generated transactionId; the response array
	// is read as data[i].status/error/transactionId.
	g1, g2, g3, trace := cwTxID(), cwTxID(), cwTxID(), uuid.NewString()
	res := cwGoPush(b.cwGoCall("POST", "/api/v1/push", pushBody("go-orders", "Default", [2]string{g1, trace}, [2]string{g2, ""}, [2]string{g3, ""})), []string{g1, g2, g3})
	for _, r := range res {
		require.True(t, r.Success, r.Error)
	}
	dup := cwGoPush(b.cwGoCall("POST", "/api/v1/push", pushBody("go-orders", "Default", [2]string{g1, ""})), []string{g1})
	require.False(t, dup[0].Success, "a duplicate is not `queued`")

	// Pop(): url.Values.Encode() sorts the keys; wait=false by default.
	msgs := cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?batch=1&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, g1, m.TransactionID)
	require.Equal(t, "go-orders", m.Queue)
	require.Equal(t, "Default", m.Partition)
	require.Equal(t, map[string]any{"n": float64(0)}, m.Data)
	require.NotEmpty(t, m.LeaseID)
	require.NotEmpty(t, m.PartitionID)
	_, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
	require.NoError(t, err)

	// Renew(msg): POST `{}`; newExpiresAt parsed with time.RFC3339.
	renew := b.cwGoCall("POST", "/api/v1/lease/"+m.LeaseID+"/extend", map[string]any{})
	cwFuture(t, time.RFC3339, cwStr(renew, "newExpiresAt"))

	// Ack(msg, true, AckOptions{}): only a top-level `error` would fail it,
	// so check the effect too: the next pop gets the next message.
	require.True(t, cwGoAckSingle(b.cwGoCall("POST", "/api/v1/ack", ackOne(m, "completed", "", ""))).Success)
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?batch=10&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 2)
	require.Equal(t, g2, msgs[0].TransactionID)
	// Renew([]*Message): deduped to one call per leaseId.
	cwFuture(t, time.RFC3339, cwStr(b.cwGoCall("POST", "/api/v1/lease/"+msgs[0].LeaseID+"/extend", map[string]any{}), "newExpiresAt"))
	for _, a := range cwGoAckBatch(t, b.cwGoCall("POST", "/api/v1/ack/batch", ackBatch(msgs, "completed", "")), 2) {
		require.True(t, a.Success, a.Error)
	}
	require.Empty(t, cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?batch=1&timeout=30000&wait=false", nil)))

	// AutoAck(true).Pop(): autoAck is sent; no lease, the cursor moves.
	a1, a2 := cwTxID(), cwTxID()
	push("go-orders", "Default", a1, a2)
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?autoAck=true&batch=1&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, a1, msgs[0].TransactionID)
	require.Empty(t, msgs[0].LeaseID)
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?autoAck=true&batch=1&timeout=30000&wait=false", nil))
	require.Equal(t, a2, msgs[0].TransactionID)

	// Partition("eu-west.1").Pop(): targeted route, url.PathEscape'd.
	push("go-orders", "eu-west.1", cwTxID())
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/"+url.PathEscape("go-orders")+"/partition/"+url.PathEscape("eu-west.1")+"?batch=1&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, "eu-west.1", msgs[0].Partition)
	require.True(t, cwGoAckSingle(b.cwGoCall("POST", "/api/v1/ack", ackOne(msgs[0], "completed", "", ""))).Success)

	// ConsumeBatch with Group, Batch(10), Partitions(2): buildParams, sorted.
	push("go-multi", "p1", cwTxID(), cwTxID())
	push("go-multi", "p2", cwTxID())
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-multi?batch=10&consumerGroup=go-workers&partitions=2&timeout=30000&wait=true", nil))
	require.Len(t, msgs, 3)
	for _, x := range msgs {
		require.Equal(t, msgs[0].LeaseID, x.LeaseID, "one lease for every claimed partition")
	}
	cwFuture(t, time.RFC3339, cwStr(b.cwGoCall("POST", "/api/v1/lease/"+msgs[0].LeaseID+"/extend", map[string]any{}), "newExpiresAt"))
	// msg.Trace(ctx, TraceConfig{TraceName, Data}): consumerGroup from the
	// consumer, eventType "info" by default, traceNames omitted when empty.
	b.cwGoCall("POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"go-workers","traceNames":["order-1"],"eventType":"info","data":{"step":"validated"}}`, msgs[0].TransactionID, msgs[0].PartitionID))
	b.cwGoCall("POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"go-workers","eventType":"info","data":{"step":"saved"}}`, msgs[1].TransactionID, msgs[1].PartitionID))
	for _, a := range cwGoAckBatch(t, b.cwGoCall("POST", "/api/v1/ack/batch", ackBatch(msgs, "completed", "go-workers")), 3) {
		require.True(t, a.Success, a.Error)
	}
	require.Empty(t, cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-multi?batch=10&consumerGroup=go-workers&partitions=2&timeout=200&wait=true", nil)))

	// Consume with a failing handler (autoAck): Ack(msg, false,
	// {ConsumerGroup, Error}) until retryLimit (1) is spent.
	r1 := cwTxID()
	push("go-retry", "Default", r1)
	for range 2 {
		msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-retry?batch=1&consumerGroup=go-workers&timeout=30000&wait=true", nil))
		require.Len(t, msgs, 1)
		require.Equal(t, r1, msgs[0].TransactionID)
		require.True(t, cwGoAckSingle(b.cwGoCall("POST", "/api/v1/ack", ackOne(msgs[0], "failed", "handler: timeout talking to db", "go-workers"))).Success)
	}
	require.Empty(t, cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-retry?batch=1&consumerGroup=go-workers&timeout=30000&wait=false", nil)))

	// Queue("go-retry").DLQ("go-workers").Limit(10).Get(): partition is left
	// out while it is Default; total is read as a float64.
	dlq := b.cwGoCall("GET", "/api/v1/dlq?consumerGroup=go-workers&limit=10&queue=go-retry", nil)
	total, _ := dlq["total"].(float64)
	require.Equal(t, 1, int(total))
	list := cwGoParseMessages(dlq)
	require.Len(t, list, 1)
	require.Equal(t, r1, list[0].TransactionID)
	require.Equal(t, "handler: timeout talking to db", list[0].ErrorMessage)
	require.Equal(t, "go-retry", list[0].Queue)
	// With From/To (RFC 3339 strings from the caller).
	dlq = b.cwGoCall("GET", "/api/v1/dlq?"+url.Values{"queue": {"go-retry"}, "from": {time.Now().Add(-time.Hour).Format(time.RFC3339)}, "to": {time.Now().Add(time.Hour).Format(time.RFC3339)}}.Encode(), nil)
	total, _ = dlq["total"].(float64)
	require.Equal(t, 1, int(total))

	// Transaction().Ack(msg, "completed", {ConsumerGroup}).Queue(q).Push(p).Commit()
	in := cwTxID()
	push("go-tx-in", "Default", in)
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-tx-in?batch=1&consumerGroup=go-workers&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 1)
	out := cwTxID()
	tx := b.cwGoCall("POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[`+
		`{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed","consumerGroup":"go-workers"},`+
		`{"type":"push","items":[{"queue":"go-tx-out","partition":"Default","payload":{"from":%q},"transactionId":%q}]}],"requiredLeases":[%q]}`,
		msgs[0].TransactionID, msgs[0].PartitionID, in, out, msgs[0].LeaseID))
	success := true
	if s, ok := tx["success"].(bool); ok {
		success = s
	}
	require.True(t, success && cwStr(tx, "error") == "", "%v", tx)
	require.Equal(t, out, cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-tx-out?batch=1&timeout=30000&wait=false", nil))[0].TransactionID)
	// A transaction with no leases sends an empty array, never null.
	tx = b.cwGoCall("POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[{"type":"push","items":[{"queue":"go-tx-out","partition":"Default","payload":{},"transactionId":%q}]}],"requiredLeases":[]}`, cwTxID()))
	require.Equal(t, true, tx["success"])

	// Queue("").Namespace("ops").Task("alerts").Pop(): /api/v1/pop.
	push("go-retry", "Default", cwTxID())
	msgs = cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop?batch=1&namespace=ops&task=alerts&timeout=30000&wait=false", nil))
	require.Len(t, msgs, 1)
	require.Equal(t, "go-retry", msgs[0].Queue, "the Go client acks and renews with the per-message queue")

	// UpdateConsumerGroupTimestamp (time.RFC3339) and DeleteConsumerGroup
	// (name not escaped): only the HTTP status matters.
	b.cwGoCall("POST", "/api/v1/consumer-groups/go-workers/subscription", fmt.Sprintf(`{"subscriptionTimestamp":%q}`, time.Now().Add(-time.Minute).Format(time.RFC3339)))
	b.cwGoCall("DELETE", "/api/v1/consumer-groups/go-workers?deleteMetadata=true", nil)

	// Queue(name).Delete().Execute(): url.PathEscape'd name.
	b.cwGoCall("DELETE", "/api/v1/resources/queues/"+url.PathEscape("go-orders"), nil)
	require.Empty(t, cwGoParseMessages(b.cwGoCall("GET", "/api/v1/pop/queue/go-orders?batch=1&timeout=30000&wait=false", nil)))
}
