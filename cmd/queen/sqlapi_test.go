package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// A push through the SQL API (migration 0011) wakes the long-polls parked
// on every broker of the database, whatever carries the brokers' own
// announcements: the NOTIFY listener runs with the mesh on (brokers 0 and
// 1) and with QUEEN_SYNC_ENABLED=false (broker 2) alike. The re-poll is
// 30 s and the client gives up after 15 s (cluster_test.go), so only the
// SQL push's notification can answer these long-polls.
func TestSQLPushWakesLongPolls(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}
	meshPort := freePortOn(t, hosts[:2])
	c := startCluster(t, hosts, func(i int) []string {
		if i == 2 {
			return []string{"QUEEN_SYNC_ENABLED=false"}
		}
		return meshEnv(hosts[:2], meshPort, meshTestSecret)
	})
	for i := range c.b {
		waitFor(t, fmt.Sprintf("broker %d listening", i), announceDeadline, func() bool { return c.b[i].stats().Notify.Listening })
	}
	require.True(t, c.b[0].stats().Enabled, "broker 0 announces through the mesh")
	require.Equal(t, api.SyncDisabled, *c.b[2].stats().Reason)

	const queue = "sql-wake"
	c.b[0].mustCall("POST", "/api/v1/configure", map[string]any{"queue": queue}, http.StatusOK)
	type answer struct {
		status int
		txID   string
	}
	answers := make([]chan answer, len(c.b))
	for i, b := range c.b {
		status, _ := b.popGroup(queue, "g"+strconv.Itoa(i), false)
		require.Equal(t, http.StatusNoContent, status)
		answers[i] = make(chan answer, 1)
		go func() {
			status, tx := b.popGroup(queue, "g"+strconv.Itoa(i), true)
			answers[i] <- answer{status, tx}
		}()
	}
	for i, b := range c.b {
		waitFor(t, fmt.Sprintf("the long-poll parked on broker %d", i), announceDeadline, func() bool {
			return b.metric("queen_parked_long_polls", "queue", queue) >= 1
		})
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, c.db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TABLE public.sql_wake_orders (id int)")
	require.NoError(t, err)
	var res string
	require.NoError(t, tx.QueryRow(ctx, `SELECT queen.push_messages_v2('[{"queue":"sql-wake","transactionId":"from-sql"}]')->0->>'status'`).Scan(&res))
	require.Equal(t, "queued", res)
	require.NoError(t, tx.Commit(ctx))

	for i := range c.b {
		a := <-answers[i]
		require.Equal(t, http.StatusOK, a.status, "the long-poll on broker %d was not woken by the SQL push", i)
		require.Equal(t, "from-sql", a.txID)
	}
}

// A SQL ack that makes a message poppable again (a failed ack with retries
// left releases the lease) wakes the long-poll parked on the queue: the
// re-poll is 30 s and the long-poll gives up after 25 s, so only the
// notification the ack sends at commit can answer it in time.
func TestSQLFailedAckWakesLongPolls(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"127.0.0.24"}, func(int) []string { return nil })
	b := c.b[0]
	waitFor(t, "the broker listening", announceDeadline, func() bool { return b.stats().Notify.Listening })

	const queue = "sql-ack-wake"
	b.mustCall("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": queue, "transactionId": "m1", "payload": 1},
	}}, http.StatusCreated)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, c.db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, `SELECT queen.pop_specific_batch(jsonb_build_array(jsonb_build_object(
		'queue_name', $1::text, 'consumer_group', 'g', 'worker_id', 'sql-worker', 'lease_seconds', 600)))`, queue).Scan(&raw))
	var popped []struct {
		Result struct {
			PartitionID string `json:"partitionId"`
			Messages    []struct {
				TransactionID string `json:"transactionId"`
			} `json:"messages"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(raw, &popped), "%s", raw)
	require.Len(t, popped[0].Result.Messages, 1, "%s", raw)

	// The group's partition is leased to the SQL consumer: an HTTP
	// long-poll of the group parks.
	type answer struct {
		status int
		txID   string
	}
	answered := make(chan answer, 1)
	go func() {
		status, tx := b.popGroup(queue, "g", true)
		answered <- answer{status, tx}
	}()
	waitFor(t, "the long-poll parked", announceDeadline, func() bool {
		return b.metric("queen_parked_long_polls", "queue", queue) >= 1
	})

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT queen.ack_messages_v2(jsonb_build_array(jsonb_build_object(
		'transactionId', 'm1', 'partitionId', $1::text, 'leaseId', 'sql-worker', 'consumerGroup', 'g',
		'status', 'failed', 'error', 'card declined')))`, popped[0].Result.PartitionID).Scan(&raw))
	require.JSONEq(t, `[{"index":0,"transactionId":"m1","success":true,"error":null,"queueName":"sql-ack-wake",
		"partitionName":"Default","leaseReleased":true,"dlq":false}]`, string(raw))
	require.NoError(t, tx.Commit(ctx))

	a := <-answered
	require.Equal(t, http.StatusOK, a.status, "the long-poll was not woken by the SQL ack")
	require.Equal(t, "m1", a.txID, "the failed message is redelivered")
}
