package handlers

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/broker"
)

// Native tenancy through HTTP (docs/tenancy.md): two tenants with the same
// queue, partition and transaction names share nothing.

const (
	tenantA = "0a0a0a0a-0000-4000-8000-00000000000a"
	tenantB = "0b0b0b0b-0000-4000-8000-00000000000b"
)

// setupTenancy is a broker with QUEEN_TENANCY_HEADER on.
func setupTenancy(t *testing.T) *testBundle {
	t.Helper()
	return setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.Tenancy = true }})
}

// orders pushes the same three transaction ids to orders/p1 and orders/p2,
// each payload naming the tenant, and returns the partition ids.
func orders(b *testBundle, who string) (p1, p2 string) {
	b.t.Helper()
	out := b.push(
		item("orders", "p1", "tx1", map[string]any{"tenant": who, "n": 1}),
		item("orders", "p1", "tx2", map[string]any{"tenant": who, "n": 2}),
		item("orders", "p2", "tx3", map[string]any{"tenant": who, "n": 3}),
	)
	for _, o := range out {
		require.Equal(b.t, "queued", o.Status, "dedup is per tenant: the other tenant's ids are not duplicates")
	}
	return out[0].PartitionID, out[2].PartitionID
}

// payloadTenant is the tenant a pushed payload names.
func payloadTenant(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v struct {
		Tenant string `json:"tenant"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	return v.Tenant
}

func TestTenantsPushPopAckAndListOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a, bb := b.as(tenantA), b.as(upperHex(tenantB)) // upper case names the same tenant
	pa1, pa2 := orders(a, "a")
	pb1, pb2 := orders(bb, "b")
	require.NotEqual(t, pa1, pb1)
	require.NotEqual(t, pa2, pb2)
	dup := a.push(item("orders", "p1", "tx1", map[string]any{"tenant": "a"}))
	require.Equal(t, "duplicate", dup[0].Status)

	// Each pops only its own, with the same names.
	for _, c := range []struct {
		b   *testBundle
		who string
	}{{a, "a"}, {bb, "b"}} {
		got := 0
		for {
			p := c.b.pop("/api/v1/pop/queue/orders?batch=10&partitions=5")
			if p == nil {
				break
			}
			for _, m := range p.Messages {
				require.Equal(t, c.who, payloadTenant(t, m.Data))
				require.True(t, c.b.ack(m.TransactionID, m.PartitionID, "completed", "", p.LeaseID).Success)
				got++
			}
		}
		require.Equal(t, 3, got)
	}

	// Listings: each tenant sees its queue with its own counts; the default
	// tenant (no header) has no queue at all.
	for _, c := range []*testBundle{a, bb} {
		var qs struct {
			Queues []wireQueue `json:"queues"`
			Total  int         `json:"total"`
		}
		c.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &qs)
		require.Equal(t, 1, qs.Total)
		require.Equal(t, "orders", qs.Queues[0].Name)
		require.Equal(t, 3, qs.Queues[0].Messages.Total)
		page := c.messages("?queue=orders")
		require.Len(t, page.Messages, 3)
		for _, m := range page.Messages {
			require.Contains(t, []string{pa1, pa2, pb1, pb2}, m.PartitionID)
			if c == a {
				require.Contains(t, []string{pa1, pa2}, m.PartitionID)
			} else {
				require.Contains(t, []string{pb1, pb2}, m.PartitionID)
			}
		}
	}
	// The overview counts the tenant's own, recent pushes included.
	var ov struct {
		Queues   int `json:"queues"`
		Messages struct {
			Total int `json:"total"`
		} `json:"messages"`
		Throughput struct {
			IngestedPerSecond float64 `json:"ingestedPerSecond"`
		} `json:"throughput"`
	}
	a.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, 1, ov.Queues)
	require.Equal(t, 3, ov.Messages.Total)
	require.InDelta(t, 3.0/300, ov.Throughput.IngestedPerSecond, 1e-9)
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Zero(t, ov.Queues)
	require.Zero(t, ov.Throughput.IngestedPerSecond)
	var none struct {
		Total int `json:"total"`
	}
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &none)
	require.Zero(t, none.Total)
	require.Equal(t, http.StatusNotFound, first(b.do("GET", "/api/v1/resources/queues/orders", nil)))

	// Two rows named orders, one per tenant.
	require.Equal(t, 2, b.count(`SELECT count(*) FROM queen.queues WHERE name = 'orders'`))
	var tenants struct {
		Tenancy bool `json:"tenancy"`
		Tenants []struct {
			ID     string `json:"id"`
			Queues int    `json:"queues"`
		} `json:"tenants"`
	}
	b.doJSON("GET", "/api/v1/tenants", nil, http.StatusOK, &tenants)
	require.True(t, tenants.Tenancy)
	ids := []string{}
	for _, tn := range tenants.Tenants {
		ids = append(ids, tn.ID)
	}
	require.Equal(t, []string{broker.DefaultTenant, tenantA, tenantB}, ids)
}

func first(status int, _ []byte) int { return status }

// upperHex is a UUID's upper-case spelling.
func upperHex(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c >= 'a' && c <= 'f' {
			out[i] = c - 'a' + 'A'
		}
	}
	return string(out)
}

// Dead letters, consumer-group cursors, subscriptions, traces and stream
// state of one tenant are invisible to, and untouched by, the other.
func TestTenantsDeadLettersGroupsTracesAndStreamsNeverCross(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a, bb := b.as(tenantA), b.as(tenantB)
	pa1, _ := orders(a, "a")
	pb1, _ := orders(bb, "b")

	// Dead letters: A dead-letters tx1; B's DLQ stays empty, and B's purge
	// of "orders" leaves A's row.
	p := a.pop("/api/v1/pop/queue/orders/partition/p1")
	require.True(t, a.ack("tx1", pa1, "dlq", "", p.LeaseID).Success)
	require.Len(t, a.deadLetters("queue=orders"), 1)
	require.Empty(t, bb.deadLetters("queue=orders"))
	require.Empty(t, bb.deadLetters(""))
	bb.doJSON("DELETE", "/api/v1/dlq?queue=orders", nil, http.StatusOK, nil)
	require.Len(t, a.deadLetters(""), 1)

	// Consumer groups: both tenants read orders with group g; A's cursor
	// moving does not move B's, and each lists only its own.
	ga := a.pop("/api/v1/pop/queue/orders/partition/p1?consumerGroup=g&batch=10")
	require.Len(t, ga.Messages, 2)
	require.True(t, a.ack("tx2", pa1, "completed", "g", ga.LeaseID).Success)
	gb := bb.pop("/api/v1/pop/queue/orders/partition/p1?consumerGroup=g&batch=10")
	require.Len(t, gb.Messages, 2, "B's cursor for g did not move with A's")
	for _, m := range gb.Messages {
		require.Equal(t, "b", payloadTenant(t, m.Data))
	}
	var detail map[string]struct {
		Partitions []struct {
			Partition     string `json:"partition"`
			TotalConsumed int    `json:"totalConsumed"`
			LeaseActive   bool   `json:"leaseActive"`
		} `json:"partitions"`
	}
	bb.doJSON("GET", "/api/v1/consumer-groups/g", nil, http.StatusOK, &detail)
	for _, part := range detail["orders"].Partitions {
		require.Zero(t, part.TotalConsumed, "A's consumption is not B's")
	}
	// B deleting group g everywhere leaves A's cursors.
	before := b.count(`SELECT count(*) FROM queen.partition_consumers WHERE consumer_group = 'g' AND partition_id = $1`, pa1)
	require.Equal(t, 1, before)
	bb.doJSON("DELETE", "/api/v1/consumer-groups/g?deleteMetadata=true", nil, http.StatusOK, nil)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM queen.partition_consumers WHERE consumer_group = 'g' AND partition_id = $1`, pa1))
	require.Zero(t, b.count(`SELECT count(*) FROM queen.partition_consumers WHERE consumer_group = 'g' AND partition_id = $1`, pb1))

	// Subscriptions: a "new" group of A starts at A's now, B's copy of the
	// same group and queue keeps its own start point.
	a.pop("/api/v1/pop/queue/orders?consumerGroup=fresh&subscriptionMode=new")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM queen.consumer_groups_metadata WHERE consumer_group = 'fresh' AND tenant_id = $1`, tenantA))
	fresh := bb.pop("/api/v1/pop/queue/orders?consumerGroup=fresh&batch=10&partitions=5")
	require.NotNil(t, fresh, "B's group has no subscription of A's: it reads from the beginning")

	// Traces: recorded by A, seen by A only.
	a.trace(pa1, "tx2", map[string]any{"step": 1}, "order-7")
	var names struct {
		Total int `json:"total"`
	}
	bb.doJSON("GET", "/api/v1/traces/names", nil, http.StatusOK, &names)
	require.Zero(t, names.Total)
	a.doJSON("GET", "/api/v1/traces/names", nil, http.StatusOK, &names)
	require.Equal(t, 1, names.Total)
	bb.doJSON("GET", "/api/v1/traces/by-name/order-7", nil, http.StatusOK, &names)
	require.Zero(t, names.Total)
	var traces struct {
		Traces []json.RawMessage `json:"traces"`
	}
	bb.doJSON("GET", "/api/v1/traces/"+pa1+"/tx2", nil, http.StatusOK, &traces)
	require.Empty(t, traces.Traces)
	a.doJSON("GET", "/api/v1/traces/"+pa1+"/tx2", nil, http.StatusOK, &traces)
	require.Len(t, traces.Traces, 1)

	// Stream queries: one name, two queries; state written by A's cycle is
	// A's, and A's query id is unknown to B.
	qa := a.registerQuery("agg", "orders", "", "h1")
	qb := bb.registerQuery("agg", "orders", "", "h1")
	require.NotEqual(t, qa, qb)
	r := a.cycle(map[string]any{"query_id": qa, "partition_id": pa1,
		"state_ops": []map[string]any{{"type": "upsert", "key": "k", "value": map[string]any{"n": 1}}}})
	require.True(t, r.Success, r.Error)
	require.Len(t, a.state(qa, pa1, nil), 1)
	require.Empty(t, bb.state(qb, pa1, nil))
	status, _ := bb.do("POST", "/streams/v1/state/get", map[string]any{"query_id": qa, "partition_id": pa1})
	require.Equal(t, http.StatusNotFound, status)
	// B's own query cannot keep state on A's partition either.
	r = bb.cycle(map[string]any{"query_id": qb, "partition_id": pa1,
		"state_ops": []map[string]any{{"type": "upsert", "key": "k", "value": 2}}})
	require.False(t, r.Success)
	require.Equal(t, "Partition not found", r.Error)
	require.Zero(t, b.count(`SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, qb))
}

// Namespace and task pops, and long-poll wake-ups, stay within a tenant.
func TestTenantsNamespacePopsAndWakeUps(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a, bb := b.as(tenantA), b.as(tenantB)
	for _, c := range []*testBundle{a, bb} {
		c.doJSON("POST", "/api/v1/configure", map[string]any{"queue": "jobs", "namespace": "shop", "task": "bill"}, http.StatusOK, nil)
	}
	bb.push(item("jobs", "", "j1", map[string]any{"tenant": "b"}))
	require.Nil(t, a.pop("/api/v1/pop?namespace=shop"), "B's message is not in A's namespace")
	require.Nil(t, a.pop("/api/v1/pop?task=bill"))
	p := bb.pop("/api/v1/pop?namespace=shop&task=bill")
	require.NotNil(t, p)
	require.Equal(t, "b", payloadTenant(t, p.Messages[0].Data))

	// A long-poll of A parked on jobs: B's push does not answer it with
	// B's message; A's push does.
	var got *popped
	var wg sync.WaitGroup
	wg.Go(func() { got = a.pop("/api/v1/pop/queue/jobs?wait=true&timeout=20000") })
	key := broker.QueueKey{Tenant: tenantA, Queue: "jobs"}
	require.Eventually(t, func() bool { return b.srv.b.Parked(key) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, b.srv.b.Parked(broker.QueueKey{Tenant: tenantB, Queue: "jobs"}))
	bb.push(item("jobs", "", "j2", map[string]any{"tenant": "b"}))
	a.push(item("jobs", "", "j2", map[string]any{"tenant": "a"}))
	wg.Wait()
	require.NotNil(t, got)
	require.Len(t, got.Messages, 1)
	require.Equal(t, "a", payloadTenant(t, got.Messages[0].Data))
	require.Equal(t, "j2", got.Messages[0].TransactionID)
}
