package broker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is a started broker on its own database.
type testBundle struct {
	t    *testing.T
	b    *Broker
	pool *pgxpool.Pool
}

func setup(t *testing.T, cfgs ...func(*Config)) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	cfg := Config{Pool: pool, RepollInterval: 50 * time.Millisecond}
	for _, f := range cfgs {
		f(&cfg)
	}
	b := New(cfg)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Stop(context.Background())) })
	return &testBundle{t: t, b: b, pool: pool}
}

// item is a push item of the default tenant, as Push prepares it.
func item(queue, partition, txID string, payload string) PushItem {
	if partition == "" {
		partition = "Default"
	}
	if payload == "" {
		payload = "null"
	}
	return PushItem{Queue: queue, Partition: partition, TransactionID: txID, Payload: json.RawMessage(payload), tenant: DefaultTenant}
}

// ackOf is an acknowledgement of the default tenant, as Ack prepares it.
func ackOf(txID string, p *PopResult, status AckStatus, group string) AckItem {
	it := AckItem{TransactionID: txID, PartitionID: p.PartitionID, Status: status, Group: group, LeaseID: p.LeaseID, tenant: DefaultTenant}
	normalizeAck(&it)
	return it
}

func (tb *testBundle) push(items ...PushItem) []PushResult {
	tb.t.Helper()
	out, err := tb.b.Push(tb.t.Context(), DefaultTenant, items)
	require.NoError(tb.t, err)
	return out
}

func (tb *testBundle) pop(req PopRequest) *PopResult {
	tb.t.Helper()
	res, err := tb.b.Pop(tb.t.Context(), req)
	require.NoError(tb.t, err)
	return res
}

// setupWakeOnly is setup for the wake-up tests: no shared re-poll (an
// hour), so a parked pop answers only when a wake-up reaches it, and the
// named queues configured with the default options.
func setupWakeOnly(t *testing.T, queues ...string) *testBundle {
	t.Helper()
	tb := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	for _, q := range queues {
		_, _, err := tb.b.Configure(t.Context(), "", q, "", "", QueueOptionsDefault())
		require.NoError(t, err)
	}
	return tb
}
