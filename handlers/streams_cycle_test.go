package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/handlers/crypto"
)

// A cycle replayed after its lease expired, after a lost response, or after
// a later cycle changed nothing: the state is applied exactly once and the
// sink holds every output exactly once. The replays are refused by the
// lease check and, without a leaseId, by the cursor.
func TestStreamCycleReplayAfterLeaseExpiryDoesNotDoubleApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qid := b.registerQuery("count", "clicks", "counts", "h")
	b.push(item("clicks", "", "k1", 1), item("clicks", "", "k2", 1), item("clicks", "", "k3", 1))
	p1 := b.pop("/api/v1/pop/queue/clicks?batch=10&consumerGroup=streams.count")
	require.Len(t, p1.Messages, 3)

	// A gate lets two through and keeps the lease for the denied third.
	first := map[string]any{
		"query_id": qid, "partition_id": p1.PartitionID, "consumer_group": "streams.count",
		"state_ops":     []any{map[string]any{"type": "upsert", "key": "clicks", "value": 2}},
		"push_items":    []any{item("counts", "", "", map[string]any{"clicks": 2})},
		"ack":           map[string]any{"transactionId": "k2", "leaseId": p1.LeaseID, "count": 2},
		"release_lease": false,
	}
	require.True(t, b.cycle(first).Success)

	// The response was lost: the client sends the cycle again while the
	// lease is still live. The cursor is past k2: refused.
	r := b.cycle(first)
	require.False(t, r.Success)
	require.Equal(t, errStaleAck, r.Error)

	// The lease expires; the third click is redelivered and counted.
	b.expireLeases()
	r = b.cycle(first)
	require.False(t, r.Success)
	require.Equal(t, errInvalidLease, r.Error, "the expired lease may not commit")
	p2 := b.pop("/api/v1/pop/queue/clicks?batch=10&consumerGroup=streams.count")
	require.Len(t, p2.Messages, 1)
	require.Equal(t, "k3", p2.Messages[0].TransactionID)
	second := map[string]any{
		"query_id": qid, "partition_id": p2.PartitionID, "consumer_group": "streams.count",
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "clicks", "value": 3}},
		"push_items": []any{item("counts", "", "", map[string]any{"clicks": 3})},
		"ack":        map[string]any{"transactionId": "k3", "leaseId": p2.LeaseID, "count": 1},
	}
	require.True(t, b.cycle(second).Success)
	after := b.snapshot("counts")

	// Every replay now, with its old lease or with none, changes nothing:
	// without the cursor check the first one would set the count back to 2
	// and emit its output again.
	noLease := func(body map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range body {
			out[k] = v
		}
		ack := map[string]any{}
		for k, v := range body["ack"].(map[string]any) {
			ack[k] = v
		}
		delete(ack, "leaseId")
		out["ack"] = ack
		return out
	}
	for _, replay := range []map[string]any{first, second, noLease(first), noLease(second)} {
		r := b.cycle(replay)
		require.False(t, r.Success)
		require.Contains(t, []string{errInvalidLease, errStaleAck}, r.Error)
	}
	require.Equal(t, after, b.snapshot("counts"))
	require.Equal(t, map[string]string{"clicks": "3"}, b.state(qid, p1.PartitionID, nil))
	require.Len(t, after.Sink, 2)
	require.Nil(t, b.pop("/api/v1/pop/queue/clicks?consumerGroup=streams.count"))
}

// The same cycle sent many times at once (a client retrying over a flaky
// network) commits once: the shard lock and the cursor row serialise the
// copies, and every later one finds the cursor past its ack.
func TestStreamCycleConcurrentCopiesApplyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qid := b.registerQuery("once", "ticks", "tocks", "h")
	b.push(item("ticks", "", "t1", 1), item("ticks", "", "t2", 2))
	p := b.pop("/api/v1/pop/queue/ticks?batch=10&consumerGroup=streams.once")
	body := map[string]any{
		"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.once",
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "sum", "value": 3}},
		"push_items": []any{item("tocks", "", "", map[string]any{"sum": 3})},
		"ack":        map[string]any{"transactionId": "t2", "count": 2},
	}
	const copies = 8
	results := make(chan cycleResp, copies)
	for range copies {
		go func() {
			status, raw := b.do("POST", "/streams/v1/cycle", body)
			var r cycleResp
			if status != http.StatusOK || json.Unmarshal(raw, &r) != nil {
				r.Error = fmt.Sprintf("HTTP %d: %s", status, raw)
			}
			results <- r
		}()
	}
	var ok int
	for range copies {
		r := <-results
		if r.Success {
			ok++
			continue
		}
		require.Equal(t, errStaleAck, r.Error)
	}
	require.Equal(t, 1, ok)
	require.Len(t, b.snapshot("tocks").Sink, 1)
	require.Equal(t, map[string]string{"sum": "3"}, b.state(qid, p.PartitionID, nil))
}

// Malformed input is a 4xx JSON error and commits nothing, not even the
// auto-creation of a sink queue.
func TestStreamCycleBadInputCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qid := b.registerQuery("bad", "in", "", "h")
	b.push(item("in", "", "m1", 1))
	p := b.pop("/api/v1/pop/queue/in?consumerGroup=streams.bad")
	base := func() map[string]any {
		return map[string]any{
			"query_id": qid, "partition_id": p.PartitionID, "consumer_group": "streams.bad",
			"state_ops":  []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
			"push_items": []any{item("newsink", "", "", 1)},
			"ack":        map[string]any{"transactionId": "m1", "leaseId": p.LeaseID},
		}
	}
	with := func(k string, v any) map[string]any {
		m := base()
		m[k] = v
		return m
	}
	before := b.snapshot("newsink")

	cases := []struct {
		body any
		want int
	}{
		{with("query_id", uuid.NewString()), http.StatusNotFound},
		{with("query_id", "not-a-uuid"), http.StatusBadRequest},
		{with("partition_id", nil), http.StatusBadRequest},
		{with("state_ops", []any{map[string]any{"type": "upsert", "key": "k"}, map[string]any{"type": "merge", "key": "k"}}), http.StatusBadRequest},
		{with("state_ops", []any{map[string]any{"type": "upsert"}}), http.StatusBadRequest},
		{with("state_ops", []any{map[string]any{"type": "upsert", "key": strings.Repeat("k", 513)}}), http.StatusBadRequest},
		{with("state_ops", map[string]any{"type": "upsert", "key": "k"}), http.StatusBadRequest},
		{with("push_items", []any{item("newsink", "", "", 1), item("bad/sink", "", "", 1)}), http.StatusBadRequest},
		{with("push_items", []any{item("", "", "", 1)}), http.StatusBadRequest},
		{with("push_items", []any{item("newsink", "has space", "", 1)}), http.StatusBadRequest},
		{with("ack", map[string]any{"transactionId": "m1", "status": "maybe"}), http.StatusBadRequest},
		{with("ack", map[string]any{"leaseId": p.LeaseID}), http.StatusBadRequest},
		{with("ack", map[string]any{"transactionId": "m1", "count": -1}), http.StatusBadRequest},
		{with("consumer_group", "bad group"), http.StatusBadRequest},
		{with("release_lease", "no"), http.StatusBadRequest},
		{`[]`, http.StatusBadRequest},
		{`{"query_id":`, http.StatusBadRequest},
	}
	for _, c := range cases {
		status, raw := b.do("POST", "/streams/v1/cycle", c.body)
		require.Equal(t, c.want, status, "%v: %s", c.body, raw)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
		require.NotEmpty(t, e.Error)
	}
	var queues int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.queues WHERE name = 'newsink'").Scan(&queues))
	require.Zero(t, queues, "rejected before the sink queue was created")
	require.Equal(t, before, b.snapshot("newsink"))

	// Refusals decided inside the transaction: 200 with the reason.
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{with("ack", map[string]any{"transactionId": "nope", "leaseId": p.LeaseID}), errMessageNotFound},
		{with("ack", map[string]any{"transactionId": "m1", "leaseId": "stale"}), errInvalidLease},
		{with("consumer_group", "never-popped"), errInvalidLease},
		{func() map[string]any {
			m := with("consumer_group", "never-popped")
			m["ack"] = map[string]any{"transactionId": "m1"}
			return m
		}(), errNoCursor},
	} {
		r := b.cycle(c.body)
		require.False(t, r.Success)
		require.Equal(t, c.want, r.Error)
		require.Zero(t, r.StateOpsApplied)
		require.Empty(t, r.PushResults)
		require.Nil(t, r.AckResult)
	}
	require.Equal(t, before, b.snapshot("newsink"))

	// The same cycle, well formed, commits.
	require.True(t, b.cycle(base()).Success)
}

func TestStreamStateGetFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qid := b.registerQuery("st", "src", "", "h")
	pid := uuid.NewString()
	other := uuid.NewString()
	ops := []any{
		map[string]any{"type": "upsert", "key": "w\u001f1", "value": map[string]any{"windowEnd": 1000}},
		map[string]any{"type": "upsert", "key": "w\u001f2", "value": map[string]any{"windowEnd": 2000}},
		map[string]any{"type": "upsert", "key": "w\u001f3", "value": map[string]any{"windowEnd": "2000"}},
		map[string]any{"type": "upsert", "key": "w%_x", "value": map[string]any{"windowEnd": 10}},
		map[string]any{"type": "upsert", "key": "__wm__", "value": map[string]any{"eventTimeMs": 5}},
	}
	require.True(t, b.cycle(map[string]any{"query_id": qid, "partition_id": pid, "state_ops": ops}).Success)
	require.True(t, b.cycle(map[string]any{"query_id": qid, "partition_id": other,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "w\u001f1", "value": 1}}}).Success)

	keys := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	require.Len(t, b.state(qid, pid, nil), 5)
	require.Len(t, b.state(qid, pid, map[string]any{"keys": nil, "key_prefix": nil, "ripe_at_or_before": nil}), 5)
	require.ElementsMatch(t, []string{"w\u001f1", "__wm__"}, keys(b.state(qid, pid, map[string]any{"keys": []string{"w\u001f1", "__wm__", "missing"}})))
	require.ElementsMatch(t, []string{"w\u001f1", "w\u001f2", "w\u001f3"}, keys(b.state(qid, pid, map[string]any{"key_prefix": "w\u001f"})))
	require.ElementsMatch(t, []string{"w%_x"}, keys(b.state(qid, pid, map[string]any{"key_prefix": "w%_"})), "the prefix is literal")
	require.ElementsMatch(t, []string{"w\u001f1", "w%_x"}, keys(b.state(qid, pid, map[string]any{"ripe_at_or_before": 1999.5})),
		"only numeric windowEnd values count")
	require.ElementsMatch(t, []string{"w\u001f1"}, keys(b.state(qid, pid, map[string]any{"key_prefix": "w\u001f", "ripe_at_or_before": 1000})))
	require.Equal(t, map[string]string{"w\u001f1": "1"}, b.state(qid, other, nil))

	// Rows come by key, with a UTC timestamp.
	var r struct {
		Rows []stateRow `json:"rows"`
	}
	b.doJSON("POST", "/streams/v1/state/get", map[string]any{"query_id": qid, "partition_id": pid}, http.StatusOK, &r)
	require.Len(t, r.Rows, 5)
	for i := 1; i < len(r.Rows); i++ {
		require.Less(t, r.Rows[i-1].Key, r.Rows[i].Key)
	}
	require.True(t, strings.HasSuffix(r.Rows[0].UpdatedAt, "Z"), r.Rows[0].UpdatedAt)
	_, err := time.Parse(time.RFC3339Nano, r.Rows[0].UpdatedAt)
	require.NoError(t, err)

	status, raw := b.do("POST", "/streams/v1/state/get", map[string]any{"query_id": uuid.NewString(), "partition_id": pid})
	require.Equal(t, http.StatusNotFound, status, "%s", raw)
	for _, body := range []any{
		map[string]any{"partition_id": pid},
		map[string]any{"query_id": qid},
		map[string]any{"query_id": "x", "partition_id": pid},
		map[string]any{"query_id": qid, "partition_id": pid, "keys": "k"},
		map[string]any{"query_id": qid, "partition_id": pid, "ripe_at_or_before": "soon"},
		`[]`,
	} {
		status, raw := b.do("POST", "/streams/v1/state/get", body)
		require.Equal(t, http.StatusBadRequest, status, "%v: %s", body, raw)
	}
}

// JWT-9: state/get is read-only, registering and cycles are read-write.
func TestStreamRouteAccessLevels(t *testing.T) {
	t.Parallel()
	want := map[string]routes.Access{
		"/streams/v1/queries":   routes.ReadWrite,
		"/streams/v1/cycle":     routes.ReadWrite,
		"/streams/v1/state/get": routes.ReadOnly,
	}
	for path, level := range want {
		r, ok := routes.Match("POST", path)
		require.True(t, ok, path)
		require.Equal(t, level, r.Access, path)
	}
}

// STR-1, tightened: the streams tables are the broker role's alone. A role
// that can connect but was granted nothing can neither read nor write them
// (the reference grants both tables to PUBLIC).
func TestStreamSchemaNotGrantedToPublic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var publicGrants int
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT count(*) FROM (
    SELECT (aclexplode(c.relacl)).grantee FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'queen_streams'
    UNION ALL
    SELECT (aclexplode(n.nspacl)).grantee FROM pg_namespace n WHERE n.nspname = 'queen_streams'
) g WHERE g.grantee = 0`).Scan(&publicGrants))
	require.Zero(t, publicGrants, "nothing in queen_streams is granted to PUBLIC")
	var own bool
	require.NoError(t, b.pool.QueryRow(ctx,
		"SELECT has_table_privilege(current_user, 'queen_streams.state', 'SELECT, INSERT, UPDATE, DELETE')").Scan(&own))
	require.True(t, own, "the broker's own role (the one that migrated) may use the tables")

	role := "queen_stranger_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := b.pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatalf("cannot create a role on this server: %v", err)
	}
	t.Cleanup(func() { _, _ = b.pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	for _, stmt := range []string{
		"SELECT count(*) FROM queen_streams.queries",
		"UPDATE queen_streams.state SET value = '{}'",
		"INSERT INTO queen_streams.queries (name, source_queue, config_hash) VALUES ('x', 'y', 'z')",
	} {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		if _, err = tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
			t.Fatalf("cannot act as the new role on this server: %v", err)
		}
		_, err = tx.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %v", stmt, err)
		require.NoError(t, tx.Rollback(ctx))
	}
}

// ENC-4: the cycle's sink output goes through the push path, so a sink queue
// flagged encryptionEnabled stores envelopes, and its consumers read the
// plaintext.
func TestStreamSinkIsEncryptedPerQueue(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testConfig{Cipher: testCipher(t, 0x44)})
	b.configure("sealed", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	qid := b.registerQuery("enc", "plain-src", "sealed", "h")
	payload := map[string]any{"secret": secretMarker}
	r := b.cycle(map[string]any{
		"query_id": qid, "partition_id": uuid.NewString(),
		"push_items": []any{item("sealed", "", "s1", payload), item("clear", "", "c1", payload)},
	})
	require.True(t, r.Success, r.Error)
	sealed := b.stored("sealed")["s1"]
	require.True(t, sealed.encrypted)
	require.True(t, crypto.IsEnvelope([]byte(sealed.payload)), sealed.payload)
	require.NotContains(t, sealed.payload, secretMarker)
	require.False(t, b.stored("clear")["c1"].encrypted, "a queue without the flag stays plaintext")
	p := b.pop("/api/v1/pop/queue/sealed")
	require.JSONEq(t, `{"secret":"`+secretMarker+`"}`, string(p.Messages[0].Data))
}
