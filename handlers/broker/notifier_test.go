package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a transport that records the announcements it is given.
type recorder struct {
	mu          sync.Mutex
	ready       []QueueKey
	changed     []QueueKey
	maintenance [][2]bool
}

func (r *recorder) QueuesReady(keys []QueueKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready = append(r.ready, keys...)
}

func (r *recorder) QueueChanged(keys []QueueKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, keys...)
}

func (r *recorder) MaintenanceChanged(push, pop bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maintenance = append(r.maintenance, [2]bool{push, pop})
}

// Every wake-up and configuration change is announced to the transport
// too, keyed by tenant and queue; an announcement received from elsewhere
// (ApplyQueuesReady) wakes a pop parked here.
func TestNotifierCarriesEveryAnnouncement(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	b := setup(t, func(c *Config) { c.Notifier = rec })
	ctx := t.Context()
	k := QueueKey{Tenant: DefaultTenant, Queue: "nq"}

	_, _, err := b.b.Configure(ctx, "", "nq", "", "", QueueOptionsDefault())
	require.NoError(t, err)
	b.push(item("nq", "", "m1", "1"))
	p := b.pop(PopRequest{Queue: "nq"})
	require.NotNil(t, p)
	res, err := b.b.Ack(ctx, "", []AckItem{{TransactionID: "m1", PartitionID: p.PartitionID, LeaseID: p.LeaseID}})
	require.NoError(t, err)
	require.True(t, res[0].LeaseReleased)
	b.b.SetPopMaintenance(ctx, true)
	b.b.SetPopMaintenance(ctx, false)

	rec.mu.Lock()
	require.Equal(t, []QueueKey{k, k, k}, rec.ready, "configure, push, released lease")
	require.Equal(t, []QueueKey{k}, rec.changed)
	require.Equal(t, [][2]bool{{false, true}, {false, false}}, rec.maintenance)
	rec.mu.Unlock()

	// A pop parked on an empty queue wakes from an announcement that came
	// from another broker, long before its re-poll would find anything.
	slow := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	_, _, err = slow.b.Configure(ctx, "", "parked", "", "", QueueOptionsDefault())
	require.NoError(t, err)
	timeout := 30 * time.Second
	got := make(chan *PopResult, 1)
	go func() {
		r, _ := slow.b.Pop(ctx, PopRequest{Queue: "parked", Wait: true, Timeout: &timeout})
		got <- r
	}()
	pk := QueueKey{Tenant: DefaultTenant, Queue: "parked"}
	require.Eventually(t, func() bool { return slow.b.Parked(pk) == 1 }, 10*time.Second, 5*time.Millisecond)
	// Stored by another broker on the same database, then announced.
	other := New(Config{Pool: slow.pool})
	require.NoError(t, other.Start(ctx))
	t.Cleanup(func() { require.NoError(t, other.Stop(t.Context())) })
	_, err = other.Push(ctx, "", []PushItem{{Queue: "parked", Partition: "Default", TransactionID: "x", Payload: []byte("1")}})
	require.NoError(t, err)
	slow.b.ApplyQueuesReady([]QueueKey{pk})
	select {
	case r := <-got:
		require.NotNil(t, r)
		require.Equal(t, "x", r.Messages[0].TransactionID)
	case <-time.After(10 * time.Second):
		t.Fatal("the announcement did not wake the parked pop")
	}
}

// An announcement without a tenant (a NOTIFY from outside the brokers)
// wakes the pops parked on queues of that name in every tenant, and no
// other.
func TestApplyQueuesReadyWithoutTenantWakesEveryTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "0a0a0a0a-0000-4000-8000-00000000000a"
	def := b.b.wait.Register(queueWait(QueueKey{Tenant: DefaultTenant, Queue: "x"}))
	defer def.Cancel()
	ten := b.b.wait.Register(queueWait(QueueKey{Tenant: other, Queue: "x"}))
	defer ten.Cancel()
	elsewhere := b.b.wait.Register(queueWait(QueueKey{Tenant: other, Queue: "y"}))
	defer elsewhere.Cancel()

	b.b.ApplyQueuesReady([]QueueKey{{Tenant: AnyTenant, Queue: "x"}})
	for _, w := range []<-chan struct{}{def.C, ten.C} {
		select {
		case <-w:
		default:
			t.Fatal("a pop parked on x was not woken")
		}
	}
	select {
	case <-elsewhere.C:
		t.Fatal("a pop parked on y was woken")
	default:
	}
}

// Likewise a configuration change without a tenant drops the cached rows of
// that name in every tenant.
func TestApplyQueueChangedWithoutTenantDropsEveryTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "0a0a0a0a-0000-4000-8000-00000000000a"
	for _, tenant := range []string{DefaultTenant, other} {
		_, err := b.b.Push(t.Context(), tenant, []PushItem{{Queue: "x", Partition: "Default", TransactionID: "t", Payload: []byte("1")}})
		require.NoError(t, err)
		_, err = b.b.Push(t.Context(), tenant, []PushItem{{Queue: "y", Partition: "Default", TransactionID: "t", Payload: []byte("1")}})
		require.NoError(t, err)
	}
	b.b.ApplyQueueChanged([]QueueKey{{Tenant: AnyTenant, Queue: "x"}})
	require.False(t, b.b.KnownQueue(QueueKey{Tenant: DefaultTenant, Queue: "x"}))
	require.False(t, b.b.KnownQueue(QueueKey{Tenant: other, Queue: "x"}))
	require.True(t, b.b.KnownQueue(QueueKey{Tenant: other, Queue: "y"}))
}

// An announcement that names no tenant (an older sender) applies to every
// tenant with the queue name: it wakes a pop parked here and drops the
// cached row. The two switches can be adopted one at a time.
func TestApplyWithoutTenant(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	_, _, err := b.b.Configure(ctx, "", "anyt", "", "", QueueOptionsDefault())
	require.NoError(t, err)
	k := QueueKey{Tenant: DefaultTenant, Queue: "anyt"}
	_, cached := b.b.queues.peek(k)
	require.True(t, cached)

	timeout := 30 * time.Second
	got := make(chan *PopResult, 1)
	go func() {
		r, _ := b.b.Pop(ctx, PopRequest{Queue: "anyt", Wait: true, Timeout: &timeout})
		got <- r
	}()
	require.Eventually(t, func() bool { return b.b.Parked(k) == 1 }, 10*time.Second, 5*time.Millisecond)
	other := New(Config{Pool: b.pool})
	require.NoError(t, other.Start(ctx))
	t.Cleanup(func() { require.NoError(t, other.Stop(t.Context())) })
	_, err = other.Push(ctx, "", []PushItem{{Queue: "anyt", Partition: "Default", TransactionID: "y", Payload: []byte("1")}})
	require.NoError(t, err)
	b.b.ApplyQueuesReady([]QueueKey{{Tenant: AnyTenant, Queue: "anyt"}})
	select {
	case r := <-got:
		require.NotNil(t, r)
		require.Equal(t, "y", r.Messages[0].TransactionID)
	case <-time.After(10 * time.Second):
		t.Fatal("a tenant-less announcement did not wake the parked pop")
	}

	b.b.ApplyQueueChanged([]QueueKey{{Tenant: AnyTenant, Queue: "anyt"}})
	_, cached = b.b.queues.peek(k)
	require.False(t, cached, "a tenant-less configuration change drops the cached row")

	b.b.ApplyPushMaintenance(true)
	push, pop := b.b.Maintenance()
	require.True(t, push)
	require.False(t, pop)
	b.b.ApplyPopMaintenance(true)
	b.b.ApplyPushMaintenance(false)
	push, pop = b.b.Maintenance()
	require.False(t, push)
	require.True(t, pop)
}
