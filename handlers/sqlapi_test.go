package handlers

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// The SQL API (docs/sql-api.md, migration 0011): pushes from inside the
// caller's transaction, and a targeted pop, checked against what the HTTP
// API then sees.

// sqlRow is what the SQL API's callers query through: a pool or a caller's
// transaction.
type sqlRow interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sqlPushed is one element of push_messages_v2's answer.
type sqlPushed struct {
	Index         int     `json:"index"`
	Status        string  `json:"status"`
	TransactionID string  `json:"transaction_id"`
	MessageID     string  `json:"message_id"`
	PartitionID   string  `json:"partition_id"`
	TraceID       *string `json:"trace_id"`
	QueueName     string  `json:"queueName"`
}

// sqlPush calls queen.push_messages_v2 through db with items.
func sqlPush(t *testing.T, db sqlRow, items ...map[string]any) []sqlPushed {
	t.Helper()
	out, err := sqlPushErr(db, items...)
	require.NoError(t, err)
	require.Len(t, out, len(items))
	return out
}

func sqlPushErr(db sqlRow, items ...map[string]any) ([]sqlPushed, error) {
	raw, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	var res []byte
	if err := db.QueryRow(context.Background(), "SELECT queen.push_messages_v2($1::jsonb)", raw).Scan(&res); err != nil {
		return nil, err
	}
	var out []sqlPushed
	return out, json.Unmarshal(res, &out)
}

// sqlState is the SQLSTATE of a PostgreSQL error, "" for anything else.
func sqlState(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	return ""
}

// popWire is an HTTP pop's body with the fields these tests read.
type popWire struct {
	LeaseID  string `json:"leaseId"`
	Messages []struct {
		ID            string          `json:"id"`
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		ProducerSub   *string         `json:"producerSub"`
		Data          json.RawMessage `json:"data"`
	} `json:"messages"`
}

// popHTTP pops through HTTP; nil on 204.
func (b *testBundle) popHTTP(path string) *popWire {
	b.t.Helper()
	status, raw := b.do("GET", path, nil)
	if status == http.StatusNoContent {
		return nil
	}
	require.Equal(b.t, http.StatusOK, status, "%s", raw)
	var p popWire
	require.NoError(b.t, json.Unmarshal(raw, &p))
	return &p
}

// requireCounts checks the partition counters of queue against its rows:
// last_seq - vacant_seqs is what each partition stores (migration 0008),
// and the stored sequence numbers run 1..last_seq without a gap when
// nothing was ever deleted.
func requireCounts(t *testing.T, b *testBundle, queue string) {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `
		SELECT p.name, p.last_seq, p.vacant_seqs, count(m.id), COALESCE(max(m.seq), 0)
		FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		LEFT JOIN queen.messages m ON m.partition_id = p.id
		WHERE q.name = $1 GROUP BY p.id`, queue)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		var last, vacant, stored, maxSeq int64
		require.NoError(t, rows.Scan(&name, &last, &vacant, &stored, &maxSeq))
		require.Equal(t, stored, last-vacant, "partition %s: last_seq %d - vacant_seqs %d", name, last, vacant)
		require.Equal(t, last, maxSeq, "partition %s: last_seq is the newest message's", name)
		n++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, n)
}

func TestSQLPushIsPartOfTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	// Rolled back: neither the message nor the queue it created exist.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	res := sqlPush(t, tx, map[string]any{"queue": "outbox", "transactionId": "gone", "payload": map[string]any{"n": 0}})
	require.Equal(t, "queued", res[0].Status)
	require.NoError(t, tx.Rollback(ctx))
	require.Nil(t, b.popHTTP("/api/v1/pop/queue/outbox?batch=10"))
	var queues int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM queen.queues WHERE name = 'outbox'").Scan(&queues))
	require.Zero(t, queues)

	// Committed with the business write: poppable through HTTP, with the
	// producerSub the SQL caller gave (the clients' round-trip check).
	tx, err = b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TABLE public.orders (id int PRIMARY KEY)")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO public.orders VALUES (1)")
	require.NoError(t, err)
	res = sqlPush(t, tx,
		map[string]any{"queue": "outbox", "transactionId": "order-1", "payload": map[string]any{"order": 1}, "producerSub": "billing"},
		map[string]any{"queue": "outbox", "transactionId": "order-1b", "traceId": "0192f1c9-0a11-7e55-a1b2-c3d4e5f6a7b8"},
	)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, "queued", res[0].Status)
	require.Equal(t, "outbox", res[0].QueueName)
	require.NotEmpty(t, res[0].MessageID)
	require.Nil(t, res[0].TraceID)
	require.Equal(t, "0192f1c9-0a11-7e55-a1b2-c3d4e5f6a7b8", *res[1].TraceID)

	p := b.popHTTP("/api/v1/pop/queue/outbox?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 2)
	require.Equal(t, "order-1", p.Messages[0].TransactionID)
	require.Equal(t, res[0].MessageID, p.Messages[0].ID)
	require.Equal(t, res[0].PartitionID, p.Messages[0].PartitionID)
	require.NotNil(t, p.Messages[0].ProducerSub)
	require.Equal(t, "billing", *p.Messages[0].ProducerSub)
	require.JSONEq(t, `{"order":1}`, string(p.Messages[0].Data))
	require.Nil(t, p.Messages[1].ProducerSub, "no producerSub is NULL, not empty")
	require.JSONEq(t, `null`, string(p.Messages[1].Data), "no payload is JSON null, as on HTTP")
	for _, m := range p.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
	}
	requireCounts(t, b, "outbox")
}

func TestSQLPushKeepsSequenceOrderWithHTTPPushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.push(item("mixed", "p", "h1", 1))
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	sqlPush(t, tx,
		map[string]any{"queue": "mixed", "partition": "p", "transactionId": "s1", "payload": 2},
		map[string]any{"queue": "mixed", "partition": "p", "transactionId": "s2", "payload": 3},
	)
	// Another caller's push to the partition waits for this transaction:
	// its sequence number comes after, as its commit does.
	done := make(chan []pushed, 1)
	go func() { done <- b.push(item("mixed", "p", "h2", 4)) }()
	sqlPush(t, tx, map[string]any{"queue": "mixed", "partition": "p", "transactionId": "s3", "payload": 5})
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, "queued", (<-done)[0].Status)
	sqlPush(t, b.pool, map[string]any{"queue": "mixed", "partition": "p", "transactionId": "s4", "payload": 6})

	p := b.popHTTP("/api/v1/pop/queue/mixed/partition/p?batch=10")
	require.NotNil(t, p)
	var got []string
	for _, m := range p.Messages {
		got = append(got, m.TransactionID)
	}
	require.Equal(t, []string{"h1", "s1", "s2", "s3", "h2", "s4"}, got)
	requireCounts(t, b, "mixed")

	var seqs []int64
	rows, err := b.pool.Query(ctx, `SELECT m.seq FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
		WHERE p.name = 'p' ORDER BY m.seq`)
	require.NoError(t, err)
	seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, seqs)
}

func TestSQLPushDedupsLikeHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := sqlPush(t, b.pool, map[string]any{"queue": "dd", "transactionId": "once", "payload": 1})
	require.Equal(t, "queued", first[0].Status)

	// Again through SQL, in one call with a repeat inside it, and through HTTP.
	again := sqlPush(t, b.pool,
		map[string]any{"queue": "dd", "transactionId": "once", "payload": 2},
		map[string]any{"queue": "dd", "transactionId": "twice", "payload": 3},
		map[string]any{"queue": "dd", "transactionId": "twice", "payload": 4},
	)
	require.Equal(t, "duplicate", again[0].Status)
	require.Equal(t, first[0].MessageID, again[0].MessageID, "a duplicate answers the original's id")
	require.Equal(t, "queued", again[1].Status)
	require.Equal(t, "duplicate", again[2].Status)
	require.Equal(t, again[1].MessageID, again[2].MessageID)
	h := b.push(item("dd", "", "once", 5), item("dd", "", "twice", 6))
	require.Equal(t, "duplicate", h[0].Status)
	require.Equal(t, first[0].MessageID, h[0].MessageID)
	require.Equal(t, again[1].MessageID, h[1].MessageID)

	// An HTTP push first, then SQL.
	h = b.push(item("dd", "", "http-first", 7))
	s := sqlPush(t, b.pool, map[string]any{"queue": "dd", "transactionId": "http-first", "payload": 8})
	require.Equal(t, "duplicate", s[0].Status)
	require.Equal(t, h[0].MessageID, s[0].MessageID)

	p := b.popHTTP("/api/v1/pop/queue/dd?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 3)
	requireCounts(t, b, "dd")
	var last int64
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT last_seq FROM queen.partitions WHERE name = 'Default'").Scan(&last))
	require.EqualValues(t, 3, last, "duplicates take no sequence number")
}

func TestSQLPushRefusesEncryptedQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{config: func(c *testConfig) { c.Cipher = testCipher(t, 7) }})
	b.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	ctx := t.Context()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = sqlPushErr(tx,
		map[string]any{"queue": "plain", "transactionId": "a", "payload": 1},
		map[string]any{"queue": "vault", "transactionId": "b", "payload": secretMarker},
	)
	require.Error(t, err)
	require.Equal(t, "0A000", sqlState(err))
	require.Contains(t, err.Error(), `queue vault has encryption enabled`)
	require.NoError(t, tx.Rollback(ctx))
	require.Empty(t, b.stored("vault"))
	require.Empty(t, b.stored("plain"), "the whole call is refused, not only the encrypted queue's items")
}

func TestSQLPushRejectsBadItemsAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Ids are time-ordered UUIDv7s (migration 0013 finds messages by time
	// through them): a given messageId must be one of the current minute.
	oldV7 := uuid.Must(uuid.NewV7())
	var ms [8]byte
	copy(ms[2:], oldV7[:6])
	binary.BigEndian.PutUint64(ms[:], binary.BigEndian.Uint64(ms[:])-2*60*1000) // two minutes back
	copy(oldV7[:6], ms[2:])
	for name, item := range map[string]map[string]any{
		"no queue":         {"payload": 1},
		"empty queue":      {"queue": ""},
		"bad queue":        {"queue": "a/b"},
		"dot queue":        {"queue": ".."},
		"number partition": {"queue": "q", "partition": 3},
		"bad partition":    {"queue": "q", "partition": "x y"},
		"long transaction": {"queue": "q", "transactionId": strings.Repeat("x", 256)},
		"number txid":      {"queue": "q", "transactionId": 12},
		"bad trace":        {"queue": "q", "traceId": "not-a-uuid"},
		"bad tenant":       {"queue": "q", "tenant": "{0a0a0a0a-0000-4000-8000-00000000000a}"},
		"bad message id":   {"queue": "q", "messageId": "x"},
		"v4 message id":    {"queue": "q", "messageId": "0a0a0a0a-0000-4000-8000-00000000000a"},
		"old message id":   {"queue": "q", "messageId": oldV7.String()},
		"number producer":  {"queue": "q", "producerSub": 5},
	} {
		_, err := sqlPushErr(b.pool, map[string]any{"queue": "q", "transactionId": "fine"}, item)
		require.Error(t, err, name)
		require.Equal(t, "22023", sqlState(err), "%s: %v", name, err)
	}
	var raw []byte
	err := b.pool.QueryRow(t.Context(), "SELECT queen.push_messages_v2('{}'::jsonb)").Scan(&raw)
	require.Equal(t, "22023", sqlState(err))
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT queen.push_messages_v2('[]'::jsonb)").Scan(&raw))
	require.JSONEq(t, `[]`, string(raw))
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT queen.push_messages_v3('[]'::jsonb)").Scan(&raw))
	require.JSONEq(t, `{"items":[],"partition_updates":[]}`, string(raw))
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.queues").Scan(&n))
	require.Zero(t, n)

	given := uuid.Must(uuid.NewV7())
	out := sqlPush(t, b.pool, map[string]any{"queue": "q", "transactionId": "v7", "messageId": given.String()})
	require.Equal(t, given.String(), out[0].MessageID, "a current UUIDv7 is taken as it is")
}

func TestSQLPushV3Shape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	items, err := json.Marshal([]map[string]any{
		{"queue": "v3", "partition": "a", "transactionId": "1"},
		{"queue": "v3", "partition": "a", "transactionId": "2"},
		{"queue": "v3", "partition": "b", "transactionId": "3"},
		{"queue": "v3", "partition": "b", "transactionId": "3"},
	})
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT queen.push_messages_v3($1::jsonb, true, false)", items).Scan(&raw))
	var out struct {
		Items            []sqlPushed `json:"items"`
		PartitionUpdates []struct {
			QueueName            string `json:"queue_name"`
			PartitionID          string `json:"partition_id"`
			LastMessageID        string `json:"last_message_id"`
			LastMessageCreatedAt string `json:"last_message_created_at"`
		} `json:"partition_updates"`
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	require.Len(t, out.Items, 4)
	for i, it := range out.Items {
		require.Equal(t, i, it.Index)
	}
	require.Equal(t, "duplicate", out.Items[3].Status)
	require.Len(t, out.PartitionUpdates, 2)
	newest := map[string]string{}
	for _, u := range out.PartitionUpdates {
		require.Equal(t, "v3", u.QueueName)
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, u.LastMessageCreatedAt)
		newest[u.PartitionID] = u.LastMessageID
	}
	require.Equal(t, out.Items[1].MessageID, newest[out.Items[1].PartitionID])
	require.Equal(t, out.Items[2].MessageID, newest[out.Items[2].PartitionID])
}

// A pop watermark that passes a partition while an outbox transaction is
// still open must not hide what the transaction commits: the commit stamps
// the partition's newest-message time again (queen.sql_api_stamp).
func TestSQLPushCommitStampsAboveWatermarks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.configure("wm", nil)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	sqlPush(t, tx, map[string]any{"queue": "wm", "transactionId": "late"})
	// Meanwhile a scan moves the queue-mode watermark past the push's time.
	_, err = b.pool.Exec(ctx, `INSERT INTO queen.consumer_watermarks (queue_id, consumer_group, scan_from)
		SELECT id, '__QUEUE_MODE__', clock_timestamp() FROM queen.queues WHERE name = 'wm'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	var pending int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM queen.sql_api_pushed").Scan(&pending))
	require.Zero(t, pending, "the commit consumed its stamp rows")
	p := b.popHTTP("/api/v1/pop/queue/wm")
	require.NotNil(t, p, "the wildcard pop found the partition above the watermark")
	require.Equal(t, "late", p.Messages[0].TransactionID)
}
