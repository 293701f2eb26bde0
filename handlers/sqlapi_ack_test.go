package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// ack_messages_v2 (migration 0017): the SQL acknowledgement, against what
// the HTTP ack does.

// sqlAcked is one element of ack_messages_v2's answer, every member of
// the reference's shape.
type sqlAcked struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
}

func sqlAck(t *testing.T, db sqlRow, acks ...map[string]any) []sqlAcked {
	t.Helper()
	out, err := sqlAckErr(db, acks...)
	require.NoError(t, err)
	require.Len(t, out, len(acks))
	return out
}

func sqlAckErr(db sqlRow, acks ...map[string]any) ([]sqlAcked, error) {
	raw, err := json.Marshal(acks)
	if err != nil {
		return nil, err
	}
	var res []byte
	if err := db.QueryRow(context.Background(), "SELECT queen.ack_messages_v2($1::jsonb)", raw).Scan(&res); err != nil {
		return nil, err
	}
	var out []sqlAcked
	dec := json.NewDecoder(strings.NewReader(string(res)))
	dec.DisallowUnknownFields()
	return out, dec.Decode(&out)
}

// ackOf is the acknowledgement of a message a pop handed out.
func ackOf(txID, partitionID, leaseID, status string) map[string]any {
	return map[string]any{"transactionId": txID, "partitionId": partitionID, "leaseId": leaseID, "status": status}
}

// The transactional consume: the ack is part of the consumer's
// transaction, so the message is done if and only if its work commits.
func TestSQLAckInTheConsumersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.pool.Exec(ctx, "CREATE TABLE public.sql_ack_done (tx text PRIMARY KEY)")
	require.NoError(t, err)
	b.push(item("work", "", "m1", 1))

	// Popped in one transaction, acked in another that rolls back: the
	// message stays leased to the popper, not acked, and comes back once
	// the lease expires.
	got := sqlPop(t, b.pool, map[string]any{"queue_name": "work", "worker_id": "w1", "lease_seconds": 1})[0].Result
	require.Len(t, got.Messages, 1)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO public.sql_ack_done VALUES ('m1')")
	require.NoError(t, err)
	res := sqlAck(t, tx, ackOf("m1", got.PartitionID, "w1", "completed"))
	require.True(t, res[0].Success)
	require.True(t, res[0].LeaseReleased)
	require.NoError(t, tx.Rollback(ctx))
	require.Nil(t, b.pop("/api/v1/pop/queue/work"), "the lease is still held")
	var back *popped
	require.Eventually(t, func() bool {
		back = b.pop("/api/v1/pop/queue/work")
		return back != nil
	}, 10*time.Second, 20*time.Millisecond, "the message comes back after the lease")
	require.Equal(t, "m1", back.Messages[0].TransactionID)
	require.True(t, b.ack("m1", back.PartitionID, "retry", "", back.LeaseID).LeaseReleased)

	// Pop, work and ack in one transaction that rolls back: nothing
	// happened, the message is poppable at once.
	tx, err = b.pool.Begin(ctx)
	require.NoError(t, err)
	got = sqlPop(t, tx, map[string]any{"queue_name": "work"})[0].Result
	require.Len(t, got.Messages, 1)
	res = sqlAck(t, tx, ackOf("m1", got.PartitionID, got.LeaseID, "completed"))
	require.True(t, res[0].Success)
	require.NoError(t, tx.Rollback(ctx))
	again := sqlPop(t, b.pool, map[string]any{"queue_name": "work", "worker_id": "w2"})[0].Result
	require.Len(t, again.Messages, 1, "a rolled back pop took no lease")
	require.True(t, sqlAck(t, b.pool, ackOf("m1", again.PartitionID, "w2", "retry"))[0].LeaseReleased)

	// The same committed: the work and the ack are both there, and no pop
	// of the group sees the message again.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		p := sqlPop(t, tx, map[string]any{"queue_name": "work"})[0].Result
		require.Len(t, p.Messages, 1)
		if _, err := tx.Exec(ctx, "INSERT INTO public.sql_ack_done VALUES ($1)", p.Messages[0].TransactionID); err != nil {
			return err
		}
		r := sqlAck(t, tx, ackOf(p.Messages[0].TransactionID, p.PartitionID, p.LeaseID, "completed"))
		require.Equal(t, sqlAcked{
			Index: 0, TransactionID: "m1", Success: true, QueueName: ptr("work"), PartitionName: ptr("Default"),
			LeaseReleased: true,
		}, r[0])
		return nil
	})
	require.NoError(t, err)
	var done int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM public.sql_ack_done").Scan(&done))
	require.Equal(t, 1, done)
	require.Nil(t, b.pop("/api/v1/pop/queue/work"))
	b.push(item("work", "", "m2", 2))
	p := b.pop("/api/v1/pop/queue/work?batch=10")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "m2", p.Messages[0].TransactionID)
}

// A lease taken by either path is acknowledged by either path.
func TestSQLAckAndHTTPAckShareLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("mix", "", "a", 1), item("mix", "", "b", 2))

	// Popped over HTTP, acked in SQL with the HTTP lease, for a group.
	p := b.pop("/api/v1/pop/queue/mix?batch=1&consumerGroup=billing")
	require.NotNil(t, p)
	res := sqlAck(t, b.pool, map[string]any{
		"transactionId": "a", "partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "billing",
	})
	require.True(t, res[0].Success)
	require.True(t, res[0].LeaseReleased)
	p = b.pop("/api/v1/pop/queue/mix?batch=5&consumerGroup=billing")
	require.Len(t, p.Messages, 1)
	require.Equal(t, "b", p.Messages[0].TransactionID, "the SQL ack moved the group's cursor")
	// The queue-mode cursor is another cursor: untouched.
	q := b.pop("/api/v1/pop/queue/mix?batch=5")
	require.Len(t, q.Messages, 2)

	// Popped in SQL, acked over HTTP; then the HTTP lease acked in SQL.
	s := sqlPop(t, b.pool, map[string]any{"queue_name": "mix", "consumer_group": "audit", "batch_size": 1, "worker_id": "sql-w"})[0].Result
	require.Equal(t, "a", s.Messages[0].TransactionID)
	require.True(t, b.ack("a", s.PartitionID, "completed", "audit", "sql-w").LeaseReleased)
	p = b.pop("/api/v1/pop/queue/mix?batch=5&consumerGroup=audit")
	require.Equal(t, "b", p.Messages[0].TransactionID)
	res = sqlAck(t, b.pool, map[string]any{
		"transactionId": "b", "partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "audit", "status": "success",
	})
	require.True(t, res[0].Success)
	require.Nil(t, b.pop("/api/v1/pop/queue/mix?consumerGroup=audit"))
}

// A wrong lease, an unknown message and another tenant's message answer
// the reference's refusal shape and change nothing; malformed input raises.
func TestSQLAckRefusals(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	ctx := t.Context()
	sqlPush(t, b.pool, map[string]any{"queue": "ten", "transactionId": "x", "tenant": tenantA})
	got := sqlPop(t, b.pool, map[string]any{"queue_name": "ten", "tenant": tenantA, "worker_id": "lease-a"})[0].Result
	require.Len(t, got.Messages, 1)
	pid := got.PartitionID

	res := sqlAck(t, b.pool,
		map[string]any{"transactionId": "x", "partitionId": pid, "leaseId": "not-mine", "tenant": tenantA, "index": 41},
		map[string]any{"transactionId": "x", "partitionId": pid, "leaseId": "lease-a"},
		map[string]any{"transactionId": "x", "partitionId": pid, "leaseId": "lease-a", "tenant": tenantB},
		map[string]any{"transactionId": "nope", "partitionId": pid, "tenant": tenantA},
	)
	require.Equal(t, sqlAcked{
		Index: 41, TransactionID: "x", Error: ptr("Invalid or expired lease"),
		QueueName: ptr("ten"), PartitionName: ptr("Default"),
	}, res[0])
	for i, r := range res[1:] {
		require.Equal(t, sqlAcked{Index: i + 1, TransactionID: r.TransactionID, Error: ptr("Message not found")}, r,
			"the default tenant, tenant B and an unknown id find nothing")
	}
	var leaseID *string
	var lastSeq int64
	require.NoError(t, b.pool.QueryRow(ctx,
		"SELECT lease_id, last_seq FROM queen.partition_consumers WHERE partition_id = $1", pid).Scan(&leaseID, &lastSeq))
	require.Equal(t, "lease-a", *leaseID)
	require.Zero(t, lastSeq)

	for _, bad := range []struct {
		ack  any
		want string
	}{
		{map[string]any{"partitionId": pid}, "acknowledgments[0].transactionId must be 1-255 characters"},
		{map[string]any{"transactionId": "x", "partitionId": "p1"}, "acknowledgments[0].partitionId must be a UUID"},
		{map[string]any{"transactionId": "x", "partitionId": pid, "status": "done"}, "acknowledgments[0].status must be one of"},
		{map[string]any{"transactionId": "x", "partitionId": pid, "consumerGroup": "a/b"}, "acknowledgments[0].consumerGroup must be"},
		{map[string]any{"transactionId": "x", "partitionId": pid, "leaseId": strings.Repeat("l", 256)}, "acknowledgments[0].leaseId must be at most"},
		{map[string]any{"transactionId": "x", "partitionId": pid, "tenant": "acme"}, "acknowledgments[0].tenant must be a UUID"},
		{"x", "acknowledgments[0] must be an object"},
	} {
		raw, err := json.Marshal([]any{map[string]any{"transactionId": "x", "partitionId": pid, "tenant": tenantA, "leaseId": "lease-a"}, bad.ack})
		require.NoError(t, err)
		var out []byte
		err = b.pool.QueryRow(ctx, "SELECT queen.ack_messages_v2($1::jsonb)", raw).Scan(&out)
		require.Equal(t, "22023", sqlState(err), "%v", err)
		require.Contains(t, err.Error(), strings.Replace(bad.want, "[0]", "[1]", 1))
	}
	var out []byte
	err := b.pool.QueryRow(ctx, `SELECT queen.ack_messages_v2('{"transactionId":"x"}'::jsonb)`).Scan(&out)
	require.Equal(t, "22023", sqlState(err), "%v", err)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT queen.ack_messages_v2('[]'::jsonb)`).Scan(&out))
	require.JSONEq(t, `[]`, string(out))
	require.NoError(t, b.pool.QueryRow(ctx,
		"SELECT lease_id, last_seq FROM queen.partition_consumers WHERE partition_id = $1", pid).Scan(&leaseID, &lastSeq))
	require.Equal(t, "lease-a", *leaseID, "a refused call applied nothing, not even its valid first item")

	// The owner's tenant acks it.
	res = sqlAck(t, b.pool, map[string]any{"transactionId": "x", "partitionId": pid, "leaseId": "lease-a", "tenant": upperHex(tenantA)})
	require.True(t, res[0].Success)
	require.Nil(t, b.as(tenantA).pop("/api/v1/pop/queue/ten"))
}

// ackOutcome is what one acknowledgement answered, without the queue's
// name (the two paths run on two queues).
type ackOutcome struct {
	Success       bool
	Error         string
	LeaseReleased bool
	DLQ           bool
}

// ackPath acknowledges acks (each with transactionId, partitionId,
// leaseId, status, error) for group in one call.
type ackPath func(b *testBundle, group string, acks []map[string]any) []ackOutcome

func httpAckPath(b *testBundle, group string, acks []map[string]any) []ackOutcome {
	var res []ackResult
	b.doJSON("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks, "consumerGroup": group}, http.StatusOK, &res)
	out := make([]ackOutcome, len(res))
	for i, r := range res {
		out[i] = ackOutcome{Success: r.Success, Error: deref(r.Error, ""), LeaseReleased: r.LeaseReleased, DLQ: r.DLQ}
	}
	return out
}

func sqlAckPath(b *testBundle, group string, acks []map[string]any) []ackOutcome {
	withGroup := make([]map[string]any, len(acks))
	for i, a := range acks {
		withGroup[i] = map[string]any{"consumerGroup": group}
		for k, v := range a {
			withGroup[i][k] = v
		}
	}
	res := sqlAck(b.t, b.pool, withGroup...)
	out := make([]ackOutcome, len(res))
	for i, r := range res {
		out[i] = ackOutcome{Success: r.Success, Error: deref(r.Error, ""), LeaseReleased: r.LeaseReleased, DLQ: r.DLQ}
	}
	return out
}

// ackScenario pops queue for group over HTTP round after round and
// acknowledges each batch through ack (failing the first message of every
// batch, completing the rest; once all with a wrong lease, then a retry;
// once dlq), and
// returns the transcript: what each pop delivered with its retry counts,
// what each ack answered, and the dead letters left.
func ackScenario(b *testBundle, queue, group string, ack ackPath) []string {
	t := b.t
	b.configure(queue, &client.QueueOptions{RetryLimit: ptr(2)})
	b.push(item(queue, "", "m1", 1), item(queue, "", "m2", 2), item(queue, "", "m3", 3), item(queue, "", "m4", 4))
	var log []string
	record := func(what string, v any) {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		log = append(log, what+" "+string(raw))
	}
	for round := 0; round < 12; round++ {
		p := b.pop("/api/v1/pop/queue/" + queue + "?batch=3&consumerGroup=" + group)
		if p == nil {
			record("empty", round)
			break
		}
		var delivered []string
		var acks []map[string]any
		for i, m := range p.Messages {
			delivered = append(delivered, m.TransactionID+"@"+string(rune('0'+m.RetryCount)))
			status := "completed"
			if i == 0 {
				status = "failed"
			}
			a := map[string]any{"transactionId": m.TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": status, "error": "boom"}
			switch {
			case round == 1:
				a["leaseId"] = "someone-else"
			case round == 4 && i == 0:
				a["status"] = "dlq"
				delete(a, "error")
			}
			acks = append(acks, a)
		}
		record("pop", delivered)
		res := ack(b, group, acks)
		record("ack", res)
		if round == 1 {
			// The refused lease left the batch leased: give it back
			// (a retry does not count against the retry limit).
			require.False(t, res[0].Success)
			record("ack", ack(b, group, []map[string]any{{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": "retry"}}))
		}
	}
	var dlq struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			ErrorMessage  string `json:"errorMessage"`
			RetryCount    int    `json:"retryCount"`
		} `json:"messages"`
	}
	b.doJSON("GET", "/api/v1/dlq?queue="+queue, nil, http.StatusOK, &dlq)
	record("dlq", dlq.Messages)
	return log
}

// The same consumer, acking through HTTP on one queue and through SQL on
// another with the same options, sees the same thing: refusals, retries,
// redeliveries with their retry counts, dead letters at the limit.
func TestSQLAckMatchesHTTPAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, group := range []string{"__QUEUE_MODE__", "billing"} {
		viaHTTP := ackScenario(b, "cmp-http-"+group, group, httpAckPath)
		viaSQL := ackScenario(b, "cmp-sql-"+group, group, sqlAckPath)
		require.Equal(t, viaHTTP, viaSQL, "group %s", group)
		joined := strings.Join(viaSQL, "\n")
		// The scenario did what it is meant to exercise.
		require.Contains(t, joined, `"Error":"Invalid or expired lease"`)
		require.Contains(t, joined, `"Error":"Not applied: an earlier message`)
		require.Contains(t, joined, `pop ["m1@1"`, "redelivered with its retry count")
		require.Contains(t, joined, `"DLQ":true`)
		require.Contains(t, joined, `"errorMessage":"boom","retryCount":2`)
		require.Contains(t, joined, `"errorMessage":"Moved to dead-letter queue","retryCount":0`)
		require.Contains(t, joined, `empty`)
	}
}

// A SQL ack that releases a lease announces the queue on queen_events, in
// the payload contract of the brokers' listener, at commit only.
func TestSQLAckNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.push(item("wake", "", "m1", 1), item("wake", "", "m2", 2))
	conn, err := pgx.Connect(ctx, b.pool.Config().ConnConfig.ConnString())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "LISTEN queen_events")
	require.NoError(t, err)

	p := sqlPop(t, b.pool, map[string]any{"queue_name": "wake", "worker_id": "w"})[0].Result
	require.Len(t, p.Messages, 2)
	// Rolled back: nothing is announced. Half a batch: the lease stays,
	// nothing to announce either.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	require.True(t, sqlAck(t, tx, ackOf("m1", p.PartitionID, "w", "failed"))[0].LeaseReleased)
	require.NoError(t, tx.Rollback(ctx))
	res := sqlAck(t, b.pool, ackOf("m1", p.PartitionID, "w", "completed"))
	require.False(t, res[0].LeaseReleased)
	// The failure releases the lease and makes m2 poppable again.
	res = sqlAck(t, b.pool, ackOf("m2", p.PartitionID, "w", "failed"))
	require.True(t, res[0].LeaseReleased)
	require.JSONEq(t, `{"v":1,"type":"ready","tenant":"00000000-0000-0000-0000-000000000001","queues":["wake"]}`,
		waitNotification(t, conn))
	again := b.pop("/api/v1/pop/queue/wake?batch=5")
	require.Len(t, again.Messages, 1)
	require.Equal(t, "m2", again.Messages[0].TransactionID)
	require.Equal(t, 1, again.Messages[0].RetryCount)
}

// SQL and HTTP acks of the same cursors, in every item order at once, lock
// them in one order: none waits for the other in a cycle (a deadlock would
// abort one with 40P01).
func TestSQLAndHTTPAcksShareTheLockOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	type msg struct{ tx, pid string }
	var msgs []msg
	for i := range 4 {
		part := "p" + string(rune('0'+i))
		b.push(item("locks", part, "m"+part, i))
		got := sqlPop(t, b.pool, map[string]any{"queue_name": "locks", "partition_name": part, "consumer_group": "g", "worker_id": "w"})[0].Result
		require.Len(t, got.Messages, 1)
		msgs = append(msgs, msg{got.Messages[0].TransactionID, got.PartitionID})
	}
	const workers, rounds = 6, 15
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				// A different rotation of the items for every call.
				order := make([]msg, len(msgs))
				for i := range msgs {
					order[i] = msgs[(i+w+r)%len(msgs)]
				}
				if w%2 == 0 {
					acks := make([]map[string]any, len(order))
					for i, m := range order {
						acks[i] = map[string]any{"transactionId": m.tx, "partitionId": m.pid, "consumerGroup": "g", "status": "retry"}
					}
					res, err := sqlAckErr(b.pool, acks...)
					if err == nil && !res[0].Success {
						err = fmt.Errorf("sql ack refused: %v", *res[0].Error)
					}
					errs <- err
					continue
				}
				body := client.AckBatchRequest{ConsumerGroup: ptr("g")}
				for _, m := range order {
					body.Acknowledgments = append(body.Acknowledgments, client.AckBatchItem{
						TransactionId: m.tx, PartitionId: m.pid, Status: ptr(client.AckStatusRetry),
					})
				}
				resp, err := b.api.AckBatchWithResponse(ctx, nil, body)
				if err == nil && resp.StatusCode() != http.StatusOK {
					err = fmt.Errorf("http ack: %d %s", resp.StatusCode(), resp.Body)
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
