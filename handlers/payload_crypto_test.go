package handlers

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/sql/pgtest"
)

// secretMarker is in every payload these tests encrypt: it must never be
// found in the stored bytes of an encrypted queue, nor in the log.
const secretMarker = "s3cr3t-marker-7d1f"

// logBuffer collects a server's log lines; servers log from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func testCipher(t *testing.T, fill byte) *crypto.Cipher {
	t.Helper()
	c, err := crypto.New(bytes.Repeat([]byte{fill}, crypto.KeySize))
	require.NoError(t, err)
	return c
}

// storedRow is a message as PostgreSQL holds it.
type storedRow struct {
	payload   string
	encrypted bool
}

// stored reads the raw rows of a queue by transaction id.
func (b *testBundle) stored(queue string) map[string]storedRow {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `
		SELECT m.transaction_id, m.payload::text, m.is_encrypted
		FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1`, queue)
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[string]storedRow{}
	for rows.Next() {
		var tx string
		var r storedRow
		require.NoError(b.t, rows.Scan(&tx, &r.payload, &r.encrypted))
		out[tx] = r
	}
	require.NoError(b.t, rows.Err())
	return out
}

type wireMessageDetail struct {
	Payload     json.RawMessage `json:"payload"`
	Data        json.RawMessage `json:"data"`
	IsEncrypted bool            `json:"isEncrypted"`
}

// ENC-1, ENC-2, ENC-4, ENC-6: with a key, a flagged queue stores envelopes
// on every write path (push, transaction), and every read path (pop,
// message detail, DLQ, traces) serves the plaintext. Unflagged and
// push-created queues store plaintext. Ids stay in clear.
func TestEncryptionAtRestWriteAndReadPaths(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := setupWith(t, testConfig{Cipher: testCipher(t, 0x11), Logger: logs.logger()})
	b.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	b.configure("open", &client.QueueOptions{EncryptionEnabled: ptr(false)})
	payload := map[string]any{"secret": secretMarker, "n": 1}
	want, err := json.Marshal(payload)
	require.NoError(t, err)

	for _, p := range b.push(item("vault", "", "v1", payload), item("open", "", "o1", payload), item("auto", "", "a1", payload)) {
		require.Equal(t, "queued", p.Status)
	}
	var res txResponse
	b.doJSON("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{item("vault", "", "v2", payload)}},
		map[string]any{"type": "push", "queue": "vault", "transactionId": "v3", "payload": payload},
	}}, http.StatusOK, &res)
	require.True(t, res.Success, res.Error)

	vault := b.stored("vault")
	require.Len(t, vault, 3)
	for tx, r := range vault {
		require.True(t, r.encrypted, tx)
		require.True(t, crypto.IsEnvelope([]byte(r.payload)), "%s: %s", tx, r.payload)
		require.NotContains(t, r.payload, secretMarker, tx)
	}
	// ENC-6: what encryption does not cover stays readable in the row.
	var clearTx int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages WHERE transaction_id IN ('v1','v2','v3')").Scan(&clearTx))
	require.Equal(t, 3, clearTx)
	for _, q := range []string{"open", "auto"} {
		for tx, r := range b.stored(q) {
			require.False(t, r.encrypted, tx)
			require.JSONEq(t, string(want), r.payload, tx)
		}
	}

	// Pop.
	p := b.pop("/api/v1/pop/queue/vault?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 3)
	for _, m := range p.Messages {
		require.JSONEq(t, string(want), string(m.Data), m.TransactionID)
	}
	// Message detail.
	var d wireMessageDetail
	b.doJSON("GET", "/api/v1/messages/"+p.PartitionID+"/v1", nil, http.StatusOK, &d)
	require.JSONEq(t, string(want), string(d.Payload))
	require.JSONEq(t, string(want), string(d.Data))
	require.True(t, d.IsEncrypted)
	// Traces by name carry the message payload.
	b.trace(p.PartitionID, "v1", map[string]any{"step": 1}, "enc-trace")
	var traces struct {
		Traces []wireTrace `json:"traces"`
	}
	b.doJSON("GET", "/api/v1/traces/by-name/enc-trace", nil, http.StatusOK, &traces)
	require.Len(t, traces.Traces, 1)
	require.JSONEq(t, string(want), string(traces.Traces[0].MessagePayload))
	// DLQ.
	require.True(t, b.ack("v1", p.PartitionID, "dlq", "", p.LeaseID).DLQ)
	var dlq struct {
		Messages []struct {
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	b.doJSON("GET", "/api/v1/dlq?queue=vault", nil, http.StatusOK, &dlq)
	require.Len(t, dlq.Messages, 1)
	require.JSONEq(t, string(want), string(dlq.Messages[0].Data))

	require.NotContains(t, logs.String(), secretMarker)
	require.NotContains(t, logs.String(), "cannot be decrypted")
}

// ENC-1: a flagged queue without a key stores plaintext and the push
// succeeds; a warning names the queue (never the payload).
func TestEncryptionFlagWithoutKeyStoresPlaintext(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := setupWith(t, testConfig{Logger: logs.logger()})
	b.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	payload := map[string]any{"secret": secretMarker}
	for _, p := range b.push(item("vault", "", "v1", payload), item("vault", "", "v2", payload)) {
		require.Equal(t, "queued", p.Status)
	}
	for tx, r := range b.stored("vault") {
		require.False(t, r.encrypted, tx)
		require.Contains(t, r.payload, secretMarker, tx)
	}
	p := b.pop("/api/v1/pop/queue/vault")
	require.NotNil(t, p)
	require.Contains(t, string(p.Messages[0].Data), secretMarker)
	out := logs.String()
	require.Contains(t, out, "QUEEN_ENCRYPTION_KEY is not set")
	require.Contains(t, out, "queue=vault")
	require.NotContains(t, out, secretMarker)
}

// Envelopes written by the reference brokers (made with OpenSSL from key
// bytes 0x00..0x1f; see handlers/crypto): the C++/Rust form, nonce =
// iv[0:12], and the Node.js form, nonce = the whole iv.
const (
	refEnvelopeCpp  = `{"encrypted":"nToUSCmnbZ1YR/C8dRak/FyONzKog3AR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"3PSQY9z8xXivnBTZndRSXg=="}`
	refEnvelopeNode = `{"encrypted":"UYFL2XSholT5vGjen3jpsq5nLVtEAGPR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"/AwVaifEJJj8K7KfLg22sw=="}`
	refPlaintext    = `{"hello":"world","n":42}`
)

// ENC-3: reads detect envelopes by shape, whatever the queue's flag says
// now. An envelope that cannot be opened (no key, another key) is served as
// stored, the read succeeds, and a warning says why.
func TestEncryptionReadsByShape(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	a := setupWith(t, testConfig{Pool: pool, Cipher: testCipher(t, 0x22)})
	a.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	a.push(item("vault", "", "sealed", map[string]any{"secret": secretMarker}))
	a.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(false)})
	a.push(item("vault", "", "plain", map[string]any{"secret": "open"}))
	stored := a.stored("vault")
	require.True(t, stored["sealed"].encrypted)
	require.False(t, stored["plain"].encrypted)

	var partitionID string
	popAll := func(b *testBundle, group string) map[string]json.RawMessage {
		t.Helper()
		p := b.pop("/api/v1/pop/queue/vault?batch=10&autoAck=true&subscriptionMode=all&consumerGroup=" + group)
		require.NotNil(t, p, group)
		partitionID = p.PartitionID
		out := map[string]json.RawMessage{}
		for _, m := range p.Messages {
			out[m.TransactionID] = m.Data
		}
		return out
	}
	got := popAll(a, "with-key")
	require.JSONEq(t, `{"secret":"`+secretMarker+`"}`, string(got["sealed"]), "flag off now, still decrypted")
	require.JSONEq(t, `{"secret":"open"}`, string(got["plain"]))

	for _, tc := range []struct {
		name, group, reason string
		cipher              *crypto.Cipher
	}{
		{"no key", "none", "no key loaded", nil},
		{"different key", "other", "wrong key or damaged envelope", testCipher(t, 0x33)},
	} {
		logs := &logBuffer{}
		b := setupWith(t, testConfig{Pool: pool, Cipher: tc.cipher, Logger: logs.logger()})
		got := popAll(b, tc.group)
		require.True(t, crypto.IsEnvelope(got["sealed"]), "%s: %s", tc.name, got["sealed"])
		require.JSONEq(t, stored["sealed"].payload, string(got["sealed"]), tc.name)
		require.JSONEq(t, `{"secret":"open"}`, string(got["plain"]), tc.name)
		var d wireMessageDetail
		b.doJSON("GET", "/api/v1/messages/"+partitionID+"/sealed", nil, http.StatusOK, &d)
		require.True(t, d.IsEncrypted, tc.name)
		require.True(t, crypto.IsEnvelope(d.Payload), tc.name)
		out := logs.String()
		require.Contains(t, out, "encrypted payload served as stored", tc.name)
		require.Contains(t, out, tc.reason, tc.name)
		require.NotContains(t, out, secretMarker, tc.name)
	}

	// Data written by the reference brokers reads back, found by its shape
	// in a queue that never had the flag.
	kat := make([]byte, crypto.KeySize)
	for i := range kat {
		kat[i] = byte(i)
	}
	refCipher, err := crypto.New(kat)
	require.NoError(t, err)
	r := setupWith(t, testConfig{Cipher: refCipher})
	r.push(item("legacy", "", "cpp", json.RawMessage(refEnvelopeCpp)), item("legacy", "", "node", json.RawMessage(refEnvelopeNode)))
	p := r.pop("/api/v1/pop/queue/legacy?batch=10")
	require.Len(t, p.Messages, 2)
	for _, m := range p.Messages {
		require.JSONEq(t, refPlaintext, string(m.Data), m.TransactionID)
	}
}
