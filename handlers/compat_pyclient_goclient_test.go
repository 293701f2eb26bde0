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
