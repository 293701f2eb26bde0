package handlers

// Wire compatibility with the official clients (JS client-v2, Python queen,
// Go client-go). The clients cannot be installed here, so each test replays
// the exact requests a client builds (method, path, query string, JSON body,
// written out as raw strings where the bytes matter) and decodes the answer
// the way that client does, asserting only on what the client reads. The
// contract is written down in docs/client-wire-contract.md.

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

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
