package handlers

import (
	"io/fs"
	"net/http"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/migrations"
	"github.com/queenforgo/queen/sql/pgtest"
)

// migrationsBefore is the embedded migrations older than version.
func migrationsBefore(t *testing.T, version int) fstest.MapFS {
	t.Helper()
	list, err := migrate.Load(migrations.FS)
	require.NoError(t, err)
	out := fstest.MapFS{}
	for _, m := range list {
		if m.Version < version {
			raw, err := fs.ReadFile(migrations.FS, m.File)
			require.NoError(t, err)
			out[m.File] = &fstest.MapFile{Data: raw}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// Migration 0010 on a database filled before it: every old row lands in the
// default tenant, and a broker with tenancy on serves header-less clients
// exactly as before, while another tenant sees none of it.
func TestTenancyMigrationOnAFilledDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplyFS(ctx, pool, migrationsBefore(t, 10), nil))

	// What a broker of the old schema left: a queue with two messages, the
	// first consumed by the queue-mode group, a named group's subscription,
	// a dead letter and a stream query.
	_, err = pool.Exec(ctx, `
		INSERT INTO queen.queues (id, name, namespace, task) VALUES
		  ('10000000-0000-4000-8000-000000000001', 'legacy', 'shop', 'bill');
		INSERT INTO queen.partitions (id, queue_id, name, last_seq, last_message_at) VALUES
		  ('20000000-0000-4000-8000-000000000001', '10000000-0000-4000-8000-000000000001', 'p', 3, now());
		INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload) VALUES
		  ('30000000-0000-4000-8000-000000000001', '20000000-0000-4000-8000-000000000001', 1, 'old1', '{"n":1}'),
		  ('30000000-0000-4000-8000-000000000002', '20000000-0000-4000-8000-000000000001', 2, 'old2', '{"n":2}'),
		  ('30000000-0000-4000-8000-000000000003', '20000000-0000-4000-8000-000000000001', 3, 'old3', '{"n":3}');
		INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq, total_messages_consumed) VALUES
		  ('20000000-0000-4000-8000-000000000001', '__QUEUE_MODE__', 1, 1);
		INSERT INTO queen.consumer_groups_metadata (consumer_group, queue_name, subscription_mode, subscription_timestamp) VALUES
		  ('audit', 'legacy', 'all', '2000-01-01T00:00:00Z');
		INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, original_created_at) VALUES
		  ('30000000-0000-4000-8000-000000000003', '20000000-0000-4000-8000-000000000001', 'audit', 'boom', now());
		INSERT INTO queen_streams.queries (name, source_queue, config_hash) VALUES ('agg', 'legacy', 'h1');`)
	require.NoError(t, err)
	require.NoError(t, migrate.Apply(ctx, pool, nil))

	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, pool: pool, config: func(c *testConfig) { c.Tenancy = true }})
	for _, table := range []string{"queen.queues", "queen.consumer_groups_metadata", "queen_streams.queries"} {
		require.Equal(t, 1, b.count(`SELECT count(*) FROM `+table+` WHERE tenant_id = $1`, broker.DefaultTenant), table)
		require.Zero(t, b.count(`SELECT count(*) FROM `+table+` WHERE tenant_id <> $1`, broker.DefaultTenant), table)
	}

	// Header-less: everything as before.
	var q struct {
		Totals struct {
			Total   int `json:"total"`
			Pending int `json:"pending"`
		} `json:"totals"`
	}
	b.doJSON("GET", "/api/v1/resources/queues/legacy", nil, http.StatusOK, &q)
	require.Equal(t, 3, q.Totals.Total)
	require.Equal(t, 2, q.Totals.Pending)
	require.Len(t, b.deadLetters("queue=legacy"), 1)
	var groups []struct {
		Name      string `json:"name"`
		QueueName string `json:"queueName"`
	}
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &groups)
	require.Contains(t, groups, struct {
		Name      string `json:"name"`
		QueueName string `json:"queueName"`
	}{"audit", "legacy"}, "the subscription still names its queue")
	require.Equal(t, "duplicate", b.push(item("legacy", "p", "old1", 0))[0].Status, "dedup of old rows holds")
	p := b.pop("/api/v1/pop?namespace=shop&batch=5")
	require.NotNil(t, p)
	require.Equal(t, "old2", p.Messages[0].TransactionID)
	require.True(t, b.ack("old2", p.PartitionID, "completed", "", p.LeaseID).Success)
	var reg streamQueryResp
	b.doJSON("POST", "/streams/v1/queries", map[string]any{"name": "agg", "source_queue": "legacy", "config_hash": "h1"}, http.StatusOK, &reg)
	require.False(t, reg.Fresh, "the old stream query resumes")
	// The same with the default tenant named explicitly.
	b.as(broker.DefaultTenant).doJSON("GET", "/api/v1/resources/queues/legacy", nil, http.StatusOK, nil)

	// Another tenant sees none of it and may reuse every name.
	a := b.as(tenantA)
	require.Equal(t, http.StatusNotFound, first(a.do("GET", "/api/v1/resources/queues/legacy", nil)))
	require.Empty(t, a.deadLetters(""))
	require.Equal(t, "queued", a.push(item("legacy", "p", "old1", 0))[0].Status)
	require.Nil(t, a.pop("/api/v1/pop?namespace=shop"), "A's legacy has no namespace, and the old one is not A's")
}
