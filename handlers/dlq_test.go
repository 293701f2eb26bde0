package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/sql/pgtest"
)

// wireDeadLetter is one row of GET /api/v1/dlq.
type wireDeadLetter struct {
	ID            string `json:"id"`
	DlqID         string `json:"dlqId"`
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	ConsumerGroup string `json:"consumerGroup"`
}

// wireReplay is the answer of a replay (RetryResponse).
type wireReplay struct {
	Success               bool   `json:"success"`
	Result                string `json:"result"`
	Queue                 string `json:"queue"`
	Partition             string `json:"partition"`
	ConsumerGroup         string `json:"consumerGroup"`
	DlqID                 string `json:"dlqId"`
	OriginalTransactionID string `json:"originalTransactionId"`
	DlqRowRemoved         bool   `json:"dlqRowRemoved"`
	ReplayedAs            struct {
		MessageID     string `json:"message_id"`
		TransactionID string `json:"transaction_id"`
		PartitionID   string `json:"partition_id"`
		QueueName     string `json:"queueName"`
		Status        string `json:"status"`
	} `json:"replayedAs"`
}

// deadLetters lists the dead-letter rows of a query string ("" for all).
func (b *testBundle) deadLetters(query string) []wireDeadLetter {
	b.t.Helper()
	var page struct {
		Messages []wireDeadLetter `json:"messages"`
		Total    int              `json:"total"`
	}
	b.doJSON("GET", "/api/v1/dlq?"+query, nil, http.StatusOK, &page)
	require.Len(b.t, page.Messages, page.Total)
	return page.Messages
}

// deadLetter pushes one message to queue/partition and dead-letters it for
// group with the "move to DLQ" action; it returns the message's partition id.
func (b *testBundle) deadLetter(queue, partition, txID, group string, payload any) string {
	b.t.Helper()
	pid := b.push(item(queue, partition, txID, payload))[0].PartitionID
	b.doJSON("POST", "/api/v1/messages/"+pid+"/"+url.PathEscape(txID)+"/dlq",
		map[string]any{"consumerGroup": group}, http.StatusOK, nil)
	return pid
}

func TestReplayDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.push(item("rp", "", "m0", "zero"), item("rp", "", "m1", "one"))
	pid := out[0].PartitionID
	p := b.pop("/api/v1/pop/queue/rp")
	require.True(t, b.ack("m0", pid, "dlq", "", p.LeaseID).DLQ)
	dl := b.deadLetters("queue=rp")
	require.Len(t, dl, 1)
	require.Equal(t, out[0].MessageID, dl[0].ID, "id stays the message id")
	require.NotEqual(t, dl[0].ID, dl[0].DlqID)
	replay := "/api/v1/dlq/" + dl[0].DlqID + "/replay"

	// Bad input: 400, the row stays.
	for _, tc := range []struct {
		path string
		body any
	}{
		{"/api/v1/dlq/not-a-uuid/replay", nil},
		{replay, `{"queue":`},
		{replay, `[]`},
		{replay, map[string]any{"queue": 5}},
		{replay, map[string]any{"queue": "no spaces"}},
		{replay, map[string]any{"partition": ""}},
		{replay, map[string]any{"queu": "elsewhere"}},
	} {
		status, raw := b.do("POST", tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, status, "%v: %s", tc.body, raw)
		require.Contains(t, string(raw), `"error"`)
	}
	// An id that is no dead-letter row.
	status, raw := b.do("POST", "/api/v1/dlq/"+uuid.NewString()+"/replay", nil)
	require.Equal(t, http.StatusNotFound, status, "%s", raw)
	require.JSONEq(t, `{"error":"Dead-letter entry not found"}`, string(raw))
	// A replay is a push: refused while pushes go to the spool.
	b.setSwitch("/api/v1/system/maintenance", true)
	status, raw = b.do("POST", replay, map[string]any{})
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
	require.Contains(t, string(raw), `"result":"maintenance"`)
	b.setSwitch("/api/v1/system/maintenance", false)
	require.Len(t, b.deadLetters("queue=rp"), 1, "nothing changed")

	// In place: same queue and partition, after what was queued.
	var r wireReplay
	b.doJSON("POST", replay, map[string]any{}, http.StatusOK, &r)
	require.True(t, r.Success)
	require.Equal(t, "moved", r.Result)
	require.Equal(t, "rp", r.Queue)
	require.Equal(t, "Default", r.Partition)
	require.Equal(t, queueModeGroup, r.ConsumerGroup)
	require.Equal(t, dl[0].DlqID, r.DlqID)
	require.Equal(t, "m0", r.OriginalTransactionID)
	require.True(t, r.DlqRowRemoved)
	require.Equal(t, "queued", r.ReplayedAs.Status)
	require.Equal(t, "dlq:"+dl[0].DlqID, r.ReplayedAs.TransactionID)
	require.Equal(t, pid, r.ReplayedAs.PartitionID)
	require.Empty(t, b.deadLetters("queue=rp"))
	p = b.pop("/api/v1/pop/queue/rp?batch=10")
	require.Len(t, p.Messages, 2)
	require.Equal(t, "m1", p.Messages[0].TransactionID)
	require.Equal(t, r.ReplayedAs.TransactionID, p.Messages[1].TransactionID)
	require.Equal(t, r.ReplayedAs.MessageID, p.Messages[1].ID)
	require.JSONEq(t, `"zero"`, string(p.Messages[1].Data))

	// The row is gone: a second replay is a 404, with or without a body.
	for _, body := range []any{nil, map[string]any{}} {
		status, raw := b.do("POST", replay, body)
		require.Equal(t, http.StatusNotFound, status, "%s", raw)
	}
}

func TestReplayDeadLetterElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deadLetter("src", "p1", "a", "g1", map[string]any{"n": 1})
	b.deadLetter("src", "p1", "b", "g1", map[string]any{"n": 2})
	b.deadLetter("src", "p1", "c", "g1", map[string]any{"n": 3})
	byTx := map[string]wireDeadLetter{}
	for _, d := range b.deadLetters("queue=src") {
		byTx[d.TransactionID] = d
	}
	require.Len(t, byTx, 3)

	// To another queue (created as a push would) and partition.
	var r wireReplay
	b.doJSON("POST", "/api/v1/dlq/"+byTx["a"].DlqID+"/replay", map[string]any{"queue": "dst", "partition": "x"}, http.StatusOK, &r)
	require.Equal(t, "moved", r.Result)
	require.Equal(t, "dst", r.Queue)
	require.Equal(t, "x", r.Partition)
	require.Equal(t, "dst", r.ReplayedAs.QueueName)
	require.Equal(t, "g1", r.ConsumerGroup)
	p := b.pop("/api/v1/pop/queue/dst/partition/x")
	require.Len(t, p.Messages, 1)
	require.Equal(t, "dlq:"+byTx["a"].DlqID, p.Messages[0].TransactionID)
	require.JSONEq(t, `{"n":1}`, string(p.Messages[0].Data))
	require.True(t, b.ack(p.Messages[0].TransactionID, p.Messages[0].PartitionID, "completed", "", p.LeaseID).Success)

	// Partition only: same queue.
	b.doJSON("POST", "/api/v1/dlq/"+byTx["b"].DlqID+"/replay", map[string]any{"partition": "p2"}, http.StatusOK, &r)
	require.Equal(t, "src", r.Queue)
	require.Equal(t, "p2", r.Partition)
	p = b.pop("/api/v1/pop/queue/src/partition/p2")
	require.Len(t, p.Messages, 1)
	require.JSONEq(t, `{"n":2}`, string(p.Messages[0].Data))

	// The replay's transaction id is already in the destination partition:
	// a dedup duplicate, nothing stored twice, and the row goes.
	txID := "dlq:" + byTx["c"].DlqID
	b.push(item("dst", "x", txID, "first"))
	b.doJSON("POST", "/api/v1/dlq/"+byTx["c"].DlqID+"/replay", map[string]any{"queue": "dst", "partition": "x"}, http.StatusOK, &r)
	require.Equal(t, "duplicate", r.Result)
	require.Equal(t, "duplicate", r.ReplayedAs.Status)
	require.True(t, r.DlqRowRemoved)
	require.Empty(t, b.deadLetters("queue=src"))
	p = b.pop("/api/v1/pop/queue/dst/partition/x?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, txID, p.Messages[0].TransactionID)
	require.JSONEq(t, `"first"`, string(p.Messages[0].Data))
}

// ENC-4 for the replay: the stored snapshot is opened, then sealed as the
// destination queue's flag asks.
func TestReplayDeadLetterSealsForTheDestination(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.Cipher = testCipher(t, 0x33) }})
	b.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	b.configure("vault2", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	payload := map[string]any{"secret": secretMarker}
	b.deadLetter("vault", "", "s1", "", payload)
	b.deadLetter("vault", "", "s2", "", payload)
	require.True(t, b.stored("vault")["s1"].encrypted)
	ids := map[string]string{}
	for _, d := range b.deadLetters("queue=vault") {
		ids[d.TransactionID] = d.DlqID
	}

	b.doJSON("POST", "/api/v1/dlq/"+ids["s1"]+"/replay", map[string]any{"queue": "plain"}, http.StatusOK, nil)
	row := b.stored("plain")["dlq:"+ids["s1"]]
	require.False(t, row.encrypted, "the destination is not flagged")
	require.JSONEq(t, `{"secret":"`+secretMarker+`"}`, row.payload)

	b.doJSON("POST", "/api/v1/dlq/"+ids["s2"]+"/replay", map[string]any{"queue": "vault2"}, http.StatusOK, nil)
	row = b.stored("vault2")["dlq:"+ids["s2"]]
	require.True(t, row.encrypted)
	require.True(t, crypto.IsEnvelope([]byte(row.payload)), row.payload)
	require.NotContains(t, row.payload, secretMarker)
	p := b.pop("/api/v1/pop/queue/vault2")
	require.JSONEq(t, `{"secret":"`+secretMarker+`"}`, string(p.Messages[0].Data), "sealed once, opened once")
}

func TestPurgeDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.deadLetter("pa", "", "a1", "g1", 1)
	b.deadLetter("pa", "", "a2", "g1", 2)
	b.deadLetter("pa", "", "a1", "g2", 1) // pushed again: a duplicate of a1, dead-lettered for g2
	b.deadLetter("pb", "", "b1", "g1", 3)
	require.Len(t, b.deadLetters(""), 4)

	// Bad input: 400, nothing deleted.
	for _, q := range []string{"", "?consumerGroup=g1", "?queue=", "?queue=no%20spaces", "?queue=pa&consumerGroup=a%2Fb"} {
		status, raw := b.do("DELETE", "/api/v1/dlq"+q, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", q, raw)
	}
	require.Len(t, b.deadLetters(""), 4)

	var r struct {
		Success       bool    `json:"success"`
		Deleted       int     `json:"deleted"`
		Queue         string  `json:"queue"`
		ConsumerGroup *string `json:"consumerGroup"`
	}
	b.doJSON("DELETE", "/api/v1/dlq?queue=pa&consumerGroup=g2", nil, http.StatusOK, &r)
	require.True(t, r.Success)
	require.Equal(t, 1, r.Deleted)
	require.Equal(t, "pa", r.Queue)
	require.Equal(t, "g2", *r.ConsumerGroup)
	require.Len(t, b.deadLetters("queue=pa"), 2)

	b.doJSON("DELETE", "/api/v1/dlq?queue=pa", nil, http.StatusOK, &r)
	require.Equal(t, 2, r.Deleted)
	require.Nil(t, r.ConsumerGroup)
	require.Empty(t, b.deadLetters("queue=pa"))
	require.Len(t, b.deadLetters("queue=pb"), 1, "other queues keep theirs")

	// Unknown queue, or nothing left: 200 with 0.
	b.doJSON("DELETE", "/api/v1/dlq?queue=nope", nil, http.StatusOK, &r)
	require.Zero(t, r.Deleted)

	// The messages stay, no longer dead-lettered.
	var msg struct {
		Status string `json:"status"`
	}
	b.doJSON("GET", "/api/v1/messages/"+pid+"/a1", nil, http.StatusOK, &msg)
	require.NotEqual(t, "dead_letter", msg.Status)
}

// With PostgreSQL down the DLQ routes answer 503 and change nothing; they
// never fall back to the disk spool. Not parallel: it stops the cluster.
func TestDeadLetterRoutesDuringOutage(t *testing.T) {
	b, sp := setupSpool(t, "")
	b.deadLetter("outq", "", "o1", "", "x")
	dl := b.deadLetters("")
	require.Len(t, dl, 1)

	pgtest.Stop(t)
	status, raw := b.do("POST", "/api/v1/dlq/"+dl[0].DlqID+"/replay", map[string]any{})
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
	var e map[string]any
	require.NoError(t, json.Unmarshal(raw, &e))
	require.NotEmpty(t, e["error"])
	status, raw = b.do("DELETE", "/api/v1/dlq?queue=outq", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
	require.Zero(t, sp.Pending(), "nothing went to the spool")
	pgtest.Start(t)

	require.Len(t, b.deadLetters(""), 1, "the row is still there")
	var r wireReplay
	b.doJSON("POST", "/api/v1/dlq/"+dl[0].DlqID+"/replay", nil, http.StatusOK, &r)
	require.Equal(t, "moved", r.Result)
}
