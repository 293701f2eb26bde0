package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

type streamQueryResp struct {
	Success    bool   `json:"success"`
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash"`
	Fresh      bool   `json:"fresh"`
	Reset      bool   `json:"reset"`
	Error      string `json:"error"`
}

type cycleResp struct {
	Success         bool     `json:"success"`
	QueryID         string   `json:"query_id"`
	PartitionID     string   `json:"partition_id"`
	QueueName       *string  `json:"queueName"`
	StateOpsApplied int      `json:"state_ops_applied"`
	PushResults     []pushed `json:"push_results"`
	AckResult       *struct {
		Success       bool `json:"success"`
		Count         int  `json:"count"`
		LeaseReleased bool `json:"lease_released"`
		DLQ           bool `json:"dlq"`
	} `json:"ack_result"`
	Error string `json:"error"`
}

type stateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

// registerQuery registers a query and returns its id.
func (b *testBundle) registerQuery(name, source, sink, hash string) string {
	b.t.Helper()
	var r streamQueryResp
	b.doJSON("POST", "/streams/v1/queries", map[string]any{
		"name": name, "source_queue": source, "sink_queue": sink, "config_hash": hash,
	}, http.StatusOK, &r)
	require.True(b.t, r.Success)
	return r.QueryID
}

// cycle posts a cycle that must answer 200 and returns its body.
func (b *testBundle) cycle(body map[string]any) cycleResp {
	b.t.Helper()
	var r cycleResp
	b.doJSON("POST", "/streams/v1/cycle", body, http.StatusOK, &r)
	return r
}

// state reads a shard; extra adds keys, key_prefix or ripe_at_or_before.
func (b *testBundle) state(queryID, partitionID string, extra map[string]any) map[string]string {
	b.t.Helper()
	body := map[string]any{"query_id": queryID, "partition_id": partitionID}
	for k, v := range extra {
		body[k] = v
	}
	var r struct {
		Success bool       `json:"success"`
		Rows    []stateRow `json:"rows"`
	}
	b.doJSON("POST", "/streams/v1/state/get", body, http.StatusOK, &r)
	require.True(b.t, r.Success)
	out := make(map[string]string, len(r.Rows))
	for _, row := range r.Rows {
		out[row.Key] = string(row.Value)
	}
	return out
}

// snapshot is everything a cycle may change: the state rows, the messages of
// the sink queue and the source cursor (position, lease and counters) and
// dead letters. Two equal snapshots mean nothing was committed in between.
type snapshot struct {
	State   []string
	Sink    []string
	Cursors []string
	DLQ     int
}

func (b *testBundle) snapshot(sink string) snapshot {
	b.t.Helper()
	var s snapshot
	ctx := b.t.Context()
	q := func(dst *[]string, sql string, args ...any) {
		rows, err := b.pool.Query(ctx, sql, args...)
		require.NoError(b.t, err)
		defer rows.Close()
		for rows.Next() {
			var v string
			require.NoError(b.t, rows.Scan(&v))
			*dst = append(*dst, v)
		}
		require.NoError(b.t, rows.Err())
	}
	q(&s.State, "SELECT key || '=' || value::text || '@' || updated_at::text FROM queen_streams.state ORDER BY 1")
	q(&s.Sink, `SELECT m.id::text || ' ' || m.payload::text FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 ORDER BY m.seq`, sink)
	q(&s.Cursors, `SELECT concat_ws(' ', partition_id, consumer_group, last_seq, lease_id, lease_expires_at,
		batch_size, acked_count, total_messages_consumed, total_batches_consumed) FROM queen.partition_consumers ORDER BY 1`)
	require.NoError(b.t, b.pool.QueryRow(ctx, "SELECT count(*) FROM queen.dead_letter_queue").Scan(&s.DLQ))
	return s
}

// expireLeases ends every lease now, as the clock would after leaseTime.
func (b *testBundle) expireLeases() {
	b.t.Helper()
	_, err := b.pool.Exec(b.t.Context(),
		"UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 second' WHERE lease_id IS NOT NULL")
	require.NoError(b.t, err)
}

func TestStreamQueryRegisterResumeConflictReset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := func(body map[string]any, want int) streamQueryResp {
		var r streamQueryResp
		b.doJSON("POST", "/streams/v1/queries", body, want, &r)
		return r
	}
	first := reg(map[string]any{"name": "q1", "source_queue": "src", "sink_queue": "out", "config_hash": "h1"}, http.StatusOK)
	require.Equal(t, streamQueryResp{Success: true, QueryID: first.QueryID, Name: "q1", ConfigHash: "h1", Fresh: true}, first)
	_, err := uuid.Parse(first.QueryID)
	require.NoError(t, err)

	// Same hash: resumed, queues updated, state kept.
	b.push(item("src", "", "m1", 1))
	p := b.pop("/api/v1/pop/queue/src?consumerGroup=streams.q1")
	require.True(t, b.cycle(map[string]any{
		"query_id": first.QueryID, "partition_id": p.PartitionID, "consumer_group": "streams.q1",
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": map[string]any{"n": 1}}},
		"ack":       map[string]any{"transactionId": "m1", "leaseId": p.LeaseID},
	}).Success)
	again := reg(map[string]any{"name": "q1", "source_queue": "src2", "config_hash": "h1", "reset": true}, http.StatusOK)
	require.Equal(t, streamQueryResp{Success: true, QueryID: first.QueryID, Name: "q1", ConfigHash: "h1"}, again,
		"reset with an unchanged hash keeps the state, as in the reference")
	require.Equal(t, map[string]string{"k": `{"n":1}`}, b.state(first.QueryID, p.PartitionID, nil))
	var source string
	var sink *string
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT source_queue, sink_queue FROM queen_streams.queries WHERE id = $1",
		first.QueryID).Scan(&source, &sink))
	require.Equal(t, "src2", source)
	require.Nil(t, sink)

	// Changed hash without reset: 409, nothing changes.
	conflict := reg(map[string]any{"name": "q1", "source_queue": "src", "config_hash": "h2"}, http.StatusConflict)
	require.False(t, conflict.Success)
	require.Equal(t, first.QueryID, conflict.QueryID)
	require.Equal(t, "config_hash mismatch: operator chain changed for queryId 'q1'. Pass reset:true to wipe existing state, or use a new queryId.", conflict.Error)
	require.Equal(t, map[string]string{"k": `{"n":1}`}, b.state(first.QueryID, p.PartitionID, nil))

	// Changed hash with reset: the state is wiped and the new hash stored.
	reset := reg(map[string]any{"name": "q1", "source_queue": "src", "config_hash": "h2", "reset": true}, http.StatusOK)
	require.Equal(t, streamQueryResp{Success: true, QueryID: first.QueryID, Name: "q1", ConfigHash: "h2", Reset: true}, reset)
	require.Empty(t, b.state(first.QueryID, p.PartitionID, nil))
	require.Equal(t, streamQueryResp{Success: true, QueryID: first.QueryID, Name: "q1", ConfigHash: "h2"},
		reg(map[string]any{"name": "q1", "source_queue": "src", "config_hash": "h2"}, http.StatusOK))

	// Another name is another query.
	other := reg(map[string]any{"name": "q2", "source_queue": "src", "config_hash": "h1"}, http.StatusOK)
	require.True(t, other.Fresh)
	require.NotEqual(t, first.QueryID, other.QueryID)

	for _, body := range []any{
		map[string]any{"source_queue": "src", "config_hash": "h"},
		map[string]any{"name": "", "source_queue": "src", "config_hash": "h"},
		map[string]any{"name": "q", "config_hash": "h"},
		map[string]any{"name": "q", "source_queue": "bad name", "config_hash": "h"},
		map[string]any{"name": "q", "source_queue": "src", "config_hash": ""},
		map[string]any{"name": "q", "source_queue": "src", "sink_queue": "bad/name", "config_hash": "h"},
		map[string]any{"name": "q", "source_queue": "src", "config_hash": "h", "reset": "yes"},
		`["not an object"]`, `{`,
	} {
		status, raw := b.do("POST", "/streams/v1/queries", body)
		require.Equal(t, http.StatusBadRequest, status, "%v: %s", body, raw)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen_streams.queries").Scan(&n))
	require.Equal(t, 2, n)
}

// One cycle commits state, sink pushes and the source ack together: the
// sink's parked long-poll is woken, sink ids are UUIDv7 in emit order, a
// repeated sink transactionId dedups, and the source lease is released.
func TestStreamCycleCommitsStateSinkAndAck(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: time.Hour})
	qid := b.registerQuery("enrich", "events", "enriched", "h")
	b.push(item("events", "p1", "e1", 1), item("events", "p1", "e2", 2), item("events", "p1", "e3", 3))
	p := b.pop("/api/v1/pop/queue/events/partition/p1?batch=10&consumerGroup=streams.enrich")
	require.Len(t, p.Messages, 3)

	got := make(chan *popped, 1)
	go func() {
		got <- b.pop("/api/v1/pop/queue/enriched?batch=10&wait=true&timeout=60000&consumerGroup=sinkreader")
	}()
	require.Eventually(t, func() bool { return b.parked("enriched") == 1 }, 10*time.Second, 5*time.Millisecond)

	r := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.enrich",
		"state_ops": []any{
			map[string]any{"type": "upsert", "key": "a", "value": 1},
			map[string]any{"type": "upsert", "key": "gone", "value": 1},
			map[string]any{"type": "delete", "key": "gone"},
			map[string]any{"type": "upsert", "key": "b"},
			map[string]any{"type": "upsert", "key": "a", "value": map[string]any{"final": true}},
		},
		"push_items": []any{
			item("enriched", "p1", "", map[string]any{"n": 1}),
			item("enriched", "p1", "", map[string]any{"n": 2}),
			item("enriched", "p1", "once", map[string]any{"n": 3}),
			item("enriched", "p1", "once", map[string]any{"n": 4}),
			item("enriched", "", "", map[string]any{"n": 5}),
		},
		"ack": map[string]any{"transactionId": "e3", "leaseId": p.LeaseID, "status": "completed", "count": 3},
	})
	require.True(t, r.Success, r.Error)
	require.Equal(t, 5, r.StateOpsApplied)
	require.Equal(t, "events", *r.QueueName)
	var statuses []string
	for _, pr := range r.PushResults {
		statuses = append(statuses, pr.Status)
	}
	require.Equal(t, []string{"queued", "queued", "queued", "duplicate", "queued"}, statuses)
	require.Equal(t, r.PushResults[2].MessageID, r.PushResults[3].MessageID, "a duplicate answers the original id")
	require.NotNil(t, r.AckResult)
	require.Equal(t, 3, r.AckResult.Count)
	require.True(t, r.AckResult.LeaseReleased)
	require.False(t, r.AckResult.DLQ)

	select {
	case sp := <-got:
		require.NotNil(t, sp, "the sink long-poll was woken by the commit")
	case <-time.After(30 * time.Second):
		t.Fatal("the sink long-poll was not woken by the cycle's commit")
	}
	sink := b.pop("/api/v1/pop/queue/enriched/partition/p1?batch=10&consumerGroup=checker")
	require.Len(t, sink.Messages, 3, "the repeated transactionId was stored once")
	var prev uuid.UUID
	for i, m := range sink.Messages {
		id := uuid.MustParse(m.ID)
		require.Equal(t, uuid.Version(7), id.Version())
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(m.Data), "sink order is emit order")
		require.Positive(t, strings.Compare(id.String(), prev.String()), "UUIDv7 ids ascend in emit order")
		prev = id
	}
	// A sink transactionId already stored by an earlier cycle dedups too.
	b.push(item("events", "p1", "e4", 4))
	p4 := b.pop("/api/v1/pop/queue/events/partition/p1?consumerGroup=streams.enrich")
	again := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.enrich",
		"push_items": []any{item("enriched", "p1", "once", map[string]any{"n": 6})},
		"ack":        map[string]any{"transactionId": "e4", "leaseId": p4.LeaseID},
	})
	require.True(t, again.Success, again.Error)
	require.Equal(t, "duplicate", again.PushResults[0].Status)
	require.Equal(t, r.PushResults[2].MessageID, again.PushResults[0].MessageID)

	require.Equal(t, map[string]string{"a": `{"final":true}`, "b": `{}`}, b.state(qid, p.PartitionID, nil))
	require.Nil(t, b.pop("/api/v1/pop/queue/events?consumerGroup=streams.enrich"), "the source was acked")
	var lastSeq, consumed int64
	var lease *string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT last_seq, total_messages_consumed, lease_id
		FROM queen.partition_consumers WHERE consumer_group = 'streams.enrich'`).Scan(&lastSeq, &consumed, &lease))
	require.Equal(t, int64(4), lastSeq)
	require.Equal(t, int64(4), consumed)
	require.Nil(t, lease)

	// An idle flush: no ack, state deletes and sink pushes only.
	f := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.enrich",
		"state_ops": []any{map[string]any{"type": "delete", "key": "a"}}, "push_items": nil, "ack": nil,
	})
	require.True(t, f.Success, f.Error)
	require.Nil(t, f.AckResult)
	require.Empty(t, f.PushResults)
	require.Equal(t, map[string]string{"b": `{}`}, b.state(qid, p.PartitionID, nil))
}

// The gate operator's partial ack: the cursor moves to the last allowed
// message, the lease is kept so nobody gets the denied tail early, and the
// tail is redelivered in order once the lease expires. A failed/dlq ack
// dead-letters the message and passes it.
func TestStreamCyclePartialAckKeepsLeaseAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qid := b.registerQuery("gate", "calls", "", "h")
	b.push(item("calls", "", "c1", 1), item("calls", "", "c2", 2), item("calls", "", "c3", 3), item("calls", "", "c4", 4))
	p := b.pop("/api/v1/pop/queue/calls?batch=10&consumerGroup=streams.gate")
	require.Len(t, p.Messages, 4)

	r := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.gate",
		"state_ops":     []any{map[string]any{"type": "upsert", "key": "tokens", "value": map[string]any{"used": 2}}},
		"ack":           map[string]any{"transactionId": "c2", "leaseId": p.LeaseID, "count": 2},
		"release_lease": false,
	})
	require.True(t, r.Success, r.Error)
	require.False(t, r.AckResult.LeaseReleased)
	require.Nil(t, b.pop("/api/v1/pop/queue/calls?consumerGroup=streams.gate"), "the denied tail stays leased")

	b.expireLeases()
	tail := b.pop("/api/v1/pop/queue/calls?batch=10&consumerGroup=streams.gate")
	require.NotNil(t, tail)
	require.Equal(t, []string{"c3", "c4"}, []string{tail.Messages[0].TransactionID, tail.Messages[1].TransactionID})

	d := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.gate",
		"ack": map[string]any{"transactionId": "c3", "leaseId": tail.LeaseID, "status": "dlq", "error": "poison"},
	})
	require.True(t, d.Success, d.Error)
	require.True(t, d.AckResult.DLQ)
	require.True(t, d.AckResult.LeaseReleased, "a dead-letter ack always ends the lease")
	var reason string
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT error_message FROM queen.dead_letter_queue").Scan(&reason))
	require.Equal(t, "poison", reason)
	last := b.pop("/api/v1/pop/queue/calls?batch=10&consumerGroup=streams.gate")
	require.Len(t, last.Messages, 1)
	require.Equal(t, "c4", last.Messages[0].TransactionID)
}

// A cycle whose commit fails leaves state, sink and source exactly as they
// were, whether the failure comes late inside the transaction or from
// COMMIT itself; the source messages come back through the lease and the
// re-run cycle applies once.
func TestStreamCycleFailureCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A deferred constraint trigger fails the COMMIT of any transaction that
	// wrote the state key "poison": everything before COMMIT succeeds.
	_, err := b.pool.Exec(t.Context(), `
CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key = 'poison' THEN RAISE EXCEPTION 'commit refused by the test trigger'; END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER refuse_poison AFTER INSERT OR UPDATE ON queen_streams.state
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_poison();`)
	require.NoError(t, err)

	qid := b.registerQuery("sum", "nums", "sums", "h")
	b.push(item("nums", "", "n1", 1), item("nums", "", "n2", 2))
	p := b.pop("/api/v1/pop/queue/nums?batch=10&consumerGroup=streams.sum")
	require.Len(t, p.Messages, 2)
	r := b.cycle(map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.sum",
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "total", "value": 3}},
		"push_items": []any{item("sums", "", "", map[string]any{"total": 3})},
		"ack":        map[string]any{"transactionId": "n2", "leaseId": p.LeaseID, "count": 2},
	})
	require.True(t, r.Success, r.Error)
	b.push(item("nums", "", "n3", 10))
	p = b.pop("/api/v1/pop/queue/nums?batch=10&consumerGroup=streams.sum")
	require.Len(t, p.Messages, 1)
	before := b.snapshot("sums")
	require.Len(t, before.Sink, 1)

	next := func(extraOps []any, extraItems []any) map[string]any {
		ops := append([]any{map[string]any{"type": "upsert", "key": "total", "value": 13}}, extraOps...)
		items := append([]any{item("sums", "", "", map[string]any{"total": 13})}, extraItems...)
		return map[string]any{
			"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.sum",
			"state_ops": ops, "push_items": items,
			"ack": map[string]any{"transactionId": "n3", "leaseId": p.LeaseID, "count": 1},
		}
	}

	// Late inside the transaction: the state op and the first sink push ran,
	// then PostgreSQL refuses the last sink payload (\u0000 in jsonb).
	status, raw := b.do("POST", "/streams/v1/cycle", next(nil, []any{item("sums", "", "", map[string]any{"bad": "\u0000"})}))
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	require.Contains(t, string(raw), "invalid value")
	require.Equal(t, before, b.snapshot("sums"))

	// At COMMIT: every statement succeeded, the commit itself fails.
	status, raw = b.do("POST", "/streams/v1/cycle", next([]any{map[string]any{"type": "upsert", "key": "poison"}}, nil))
	require.Equal(t, http.StatusInternalServerError, status, "%s", raw)
	require.Equal(t, before, b.snapshot("sums"), "state, sink and source are exactly as before")

	// The client gives up; the lease expires and the message is redelivered.
	b.expireLeases()
	again := b.pop("/api/v1/pop/queue/nums?batch=10&consumerGroup=streams.sum")
	require.NotNil(t, again)
	require.Equal(t, "n3", again.Messages[0].TransactionID)
	body := next(nil, nil)
	body["ack"] = map[string]any{"transactionId": "n3", "leaseId": again.LeaseID, "count": 1}
	require.True(t, b.cycle(body).Success)
	require.Equal(t, map[string]string{"total": "13"}, b.state(qid, p.PartitionID, nil))
	require.Len(t, b.snapshot("sums").Sink, 2)
}
