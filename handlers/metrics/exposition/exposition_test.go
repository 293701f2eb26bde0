package exposition

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The exposition's end-to-end tests (every reference name, the histograms,
// promtool) run through the HTTP chain in package handlers; these cover what
// only this package can reach: the cluster cache's clock.

func TestMain(m *testing.M) { pgtest.Main(m) }

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The families read from the database are read once per ClusterCacheTTL,
// however many scrapes come in between: a dead letter stored after a
// scrape shows only once the snapshot expired.
func TestClusterFamiliesAreCached(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	brk := broker.New(broker.Config{Pool: pool})
	require.NoError(t, brk.Start(ctx))
	t.Cleanup(func() { require.NoError(t, brk.Stop(t.Context())) })
	clock := &fakeClock{t: time.Now()}
	exp, err := New(Config{Metrics: brk.Metrics(), Broker: brk, Pool: pool, ClusterCacheTTL: 5 * time.Second, now: clock.now})
	require.NoError(t, err)
	depth := func() float64 {
		t.Helper()
		fams, err := exp.Gatherer().Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() == "queen_dlq_depth" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		require.Fail(t, "no queen_dlq_depth")
		return 0
	}
	require.Equal(t, 0.0, depth())

	_, err = brk.Push(ctx, broker.DefaultTenant, []broker.PushItem{{Queue: "q", Partition: "Default", TransactionID: "a", Payload: []byte("1")}})
	require.NoError(t, err)
	res, err := brk.Pop(ctx, broker.PopRequest{Tenant: broker.DefaultTenant, Queue: "q"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	m := res.Messages[0]
	acked, err := brk.Ack(ctx, broker.DefaultTenant, []broker.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Status: broker.AckDLQ, LeaseID: res.LeaseID}})
	require.NoError(t, err)
	require.True(t, acked[0].DeadLettered)

	clock.add(4 * time.Second)
	require.Equal(t, 0.0, depth(), "within the TTL the snapshot is reused")
	clock.add(time.Second)
	require.Equal(t, 1.0, depth(), "past the TTL the database is read again")
}

// A failed read is not kept: the next scrape reads again, and a good read
// is then reused.
func TestSnapshotCacheKeepsNoFailure(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Now()}
	reads := 0
	results := []error{errors.New("database down"), nil}
	c := newSnapshotCache(func(context.Context) (int, error) {
		err := results[reads]
		reads++
		return reads, err
	}, time.Minute, time.Second, clock.now)
	_, err := c.get()
	require.Error(t, err)
	v, err := c.get()
	require.NoError(t, err)
	require.Equal(t, 2, v)
	v, err = c.get()
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, 2, reads)
}
