package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// pop_specific_batch (migration 0011), and the SQL API's tenants and
// maintenance rules, against what HTTP sees.

// sqlPopResult is one element of pop_specific_batch's answer.
type sqlPopResult struct {
	Idx    int `json:"idx"`
	Result struct {
		Success            bool   `json:"success"`
		Error              string `json:"error"`
		Paused             bool   `json:"paused"`
		Queue              string `json:"queue"`
		Partition          string `json:"partition"`
		PartitionID        string `json:"partitionId"`
		LeaseID            string `json:"leaseId"`
		ConsumerGroup      string `json:"consumerGroup"`
		WindowBufferActive bool   `json:"windowBufferActive"`
		Messages           []struct {
			ID            string          `json:"id"`
			TransactionID string          `json:"transactionId"`
			ProducerSub   *string         `json:"producerSub"`
			Data          json.RawMessage `json:"data"`
			CreatedAt     string          `json:"createdAt"`
			PartitionID   string          `json:"partitionId"`
			LeaseID       string          `json:"leaseId"`
		} `json:"messages"`
	} `json:"result"`
}

func sqlPop(t *testing.T, db sqlRow, reqs ...map[string]any) []sqlPopResult {
	t.Helper()
	raw, err := json.Marshal(reqs)
	require.NoError(t, err)
	var res []byte
	require.NoError(t, db.QueryRow(context.Background(), "SELECT queen.pop_specific_batch($1::jsonb)", raw).Scan(&res))
	var out []sqlPopResult
	require.NoError(t, json.Unmarshal(res, &out), "%s", res)
	require.Len(t, out, len(reqs))
	return out
}

// The request the official clients' auth tests send.
func clientPopRequest(queue string) map[string]any {
	return map[string]any{
		"idx": 0, "queue_name": queue, "partition_name": "Default", "consumer_group": "__QUEUE_MODE__",
		"lease_seconds": 60, "worker_id": "test-worker-1", "batch_size": 10, "sub_mode": "all", "sub_from": "",
	}
}

func TestSQLPopTakesTheBrokersLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sqlPush(t, b.pool,
		map[string]any{"queue": "sp", "transactionId": "a", "payload": map[string]any{"x": 1}, "producerSub": "sp-test-sub"},
		map[string]any{"queue": "sp", "transactionId": "b"},
	)
	out := sqlPop(t, b.pool, clientPopRequest("sp"), map[string]any{"idx": 7, "queue_name": "nope"})
	require.Equal(t, 0, out[0].Idx)
	r := out[0].Result
	require.True(t, r.Success)
	require.Equal(t, "test-worker-1", r.LeaseID)
	require.Equal(t, "__QUEUE_MODE__", r.ConsumerGroup)
	require.Len(t, r.Messages, 2)
	require.Equal(t, "a", r.Messages[0].TransactionID)
	require.Equal(t, "sp-test-sub", *r.Messages[0].ProducerSub)
	require.Nil(t, r.Messages[1].ProducerSub)
	require.JSONEq(t, `{"x":1}`, string(r.Messages[0].Data))
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, r.Messages[0].CreatedAt)
	require.Equal(t, 7, out[1].Idx)
	require.False(t, out[1].Result.Success)
	require.Equal(t, "partition_not_found", out[1].Result.Error)

	// The lease is the broker's: HTTP pops of the group find it held, and
	// so does SQL.
	require.Nil(t, b.popHTTP("/api/v1/pop/queue/sp?batch=10"))
	require.Nil(t, b.popHTTP("/api/v1/pop/queue/sp/partition/Default?batch=10"))
	again := sqlPop(t, b.pool, clientPopRequest("sp"))
	require.Equal(t, "lease_held", again[0].Result.Error)

	// Acking both through HTTP with the SQL lease completes the batch and
	// frees the partition; what comes next is poppable through HTTP.
	first := b.ack("a", r.PartitionID, "completed", "", r.LeaseID)
	require.True(t, first.Success)
	require.False(t, first.LeaseReleased)
	second := b.ack("b", r.PartitionID, "completed", "", r.LeaseID)
	require.True(t, second.Success)
	require.True(t, second.LeaseReleased)
	b.push(item("sp", "", "c", 3))
	p := b.popHTTP("/api/v1/pop/queue/sp?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "c", p.Messages[0].TransactionID)
}

func TestSQLPopGroupsAutoAckAndEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("g", "", "old", 1))
	// A named group subscribing "new" skips what is there.
	out := sqlPop(t, b.pool, map[string]any{"queue_name": "g", "consumer_group": "fresh", "sub_mode": "new", "auto_ack": true})
	require.True(t, out[0].Result.Success)
	require.Empty(t, out[0].Result.Messages)
	// From the beginning, auto-acked: no lease is left behind.
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "g", "consumer_group": "all", "auto_ack": true})
	require.Len(t, out[0].Result.Messages, 1)
	require.Empty(t, out[0].Result.LeaseID)
	require.Nil(t, b.popHTTP("/api/v1/pop/queue/g?consumerGroup=all"), "the cursor passed the auto-acked message")

	b.push(item("g", "", "new", 2))
	p := b.popHTTP("/api/v1/pop/queue/g?consumerGroup=fresh&batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "new", p.Messages[0].TransactionID, "the group's start point was stored by the SQL pop")

	// Nothing left: the lease taken is given back at once.
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "g", "consumer_group": "all"})
	require.True(t, out[0].Result.Success)
	require.Len(t, out[0].Result.Messages, 1)
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "g", "consumer_group": "all", "worker_id": "w2"})
	require.Equal(t, "lease_held", out[0].Result.Error)
}

func TestSQLAPITenants(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a := b.as(tenantA)
	res := sqlPush(t, b.pool,
		map[string]any{"queue": "orders", "transactionId": "t1", "tenant": upperHex(tenantA), "payload": "a"},
		map[string]any{"queue": "orders", "transactionId": "t1", "payload": "default"},
	)
	require.Equal(t, "queued", res[0].Status)
	require.Equal(t, "queued", res[1].Status, "dedup is per tenant")
	require.NotEqual(t, res[0].PartitionID, res[1].PartitionID)

	require.Nil(t, b.as(tenantB).popHTTP("/api/v1/pop/queue/orders"))
	p := a.popHTTP("/api/v1/pop/queue/orders?autoAck=true")
	require.NotNil(t, p)
	require.JSONEq(t, `"a"`, string(p.Messages[0].Data))
	p = b.popHTTP("/api/v1/pop/queue/orders?autoAck=true")
	require.NotNil(t, p)
	require.JSONEq(t, `"default"`, string(p.Messages[0].Data))

	// The SQL pop is scoped the same way.
	sqlPush(t, b.pool, map[string]any{"queue": "orders", "transactionId": "t2", "tenant": tenantA, "payload": "a2"})
	out := sqlPop(t, b.pool, map[string]any{"queue_name": "orders", "tenant": tenantB})
	require.Equal(t, "partition_not_found", out[0].Result.Error)
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "orders", "tenant": tenantA})
	require.Len(t, out[0].Result.Messages, 1)
	require.JSONEq(t, `"a2"`, string(out[0].Result.Messages[0].Data))
}

func TestSQLAPIMaintenanceAndEncryptedPops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	// Push maintenance holds HTTP pushes in the spool; the SQL push writes
	// to the database the caller's own transaction writes to, and goes on.
	b.doJSON("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}, http.StatusOK, nil)
	res := sqlPush(t, b.pool, map[string]any{"queue": "m", "transactionId": "during"})
	require.Equal(t, "queued", res[0].Status)
	b.doJSON("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}, http.StatusOK, nil)

	// Pop maintenance empties SQL pops as it does HTTP ones.
	b.doJSON("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}, http.StatusOK, nil)
	out := sqlPop(t, b.pool, map[string]any{"queue_name": "m"})
	require.False(t, out[0].Result.Success)
	require.True(t, out[0].Result.Paused)
	b.doJSON("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}, http.StatusOK, nil)
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "m", "auto_ack": true})
	require.Len(t, out[0].Result.Messages, 1)

	// A queue with encryption on may hold sealed payloads SQL cannot open.
	sqlPush(t, b.pool, map[string]any{"queue": "sealed", "transactionId": "x"})
	_, err := b.pool.Exec(ctx, "UPDATE queen.queues SET encryption_enabled = true WHERE name = 'sealed'")
	require.NoError(t, err)
	out = sqlPop(t, b.pool, map[string]any{"queue_name": "sealed"})
	require.Equal(t, "encryption_enabled", out[0].Result.Error)
}

// A push committed through SQL announces its queues on queen_events, in the
// payload contract the brokers' listener reads; a rolled back one
// announces nothing; a long list of queues is split, never truncated.
func TestSQLPushNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, b.pool.Config().ConnConfig.ConnString())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "LISTEN queen_events")
	require.NoError(t, err)

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	sqlPush(t, tx, map[string]any{"queue": "rolled-back"})
	require.NoError(t, tx.Rollback(ctx))

	var long []map[string]any
	want := map[string]bool{}
	for i := range 40 {
		name := fmt.Sprintf("%02d-%s", i, strings.Repeat("q", 240))
		long = append(long, map[string]any{"queue": name, "tenant": tenantA})
		want[name] = true
	}
	sqlPush(t, b.pool, long...)
	sqlPush(t, b.pool, map[string]any{"queue": "short"})

	got := map[string]bool{}
	for len(got) < len(want) {
		n := waitNotification(t, conn)
		require.LessOrEqual(t, len(n), 7900)
		var e struct {
			V      int      `json:"v"`
			From   *string  `json:"from"`
			Type   string   `json:"type"`
			Tenant string   `json:"tenant"`
			Queues []string `json:"queues"`
		}
		require.NoError(t, json.Unmarshal([]byte(n), &e))
		require.Equal(t, 1, e.V)
		require.Nil(t, e.From, "the SQL API is not a broker")
		require.Equal(t, "ready", e.Type)
		require.Equal(t, tenantA, e.Tenant)
		require.NotContains(t, e.Queues, "rolled-back")
		for _, q := range e.Queues {
			got[q] = true
		}
	}
	require.Equal(t, want, got)
	n := waitNotification(t, conn)
	require.JSONEq(t, `{"v":1,"type":"ready","tenant":"00000000-0000-0000-0000-000000000001","queues":["short"]}`, n)
}

func waitNotification(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, "queen_events", n.Channel)
	return n.Payload
}
