package broker

import "github.com/queenforgo/queen/gen/db"

// Notifier carries the broker's announcements. Every wake-up passes through
// one: a commit that made messages poppable, or an action that released a
// lease, announces QueuesReady; a parked pop waits for it. The in-process
// notifier (Local) applies each announcement to this broker; cmd/queen may
// add a transport (Config.Notifier) that carries them to the other brokers,
// which apply them with the Apply methods below. The broker never imports a
// transport, and a transport never imports the broker: cmd/queen adapts.
//
// Implementations must not block: they are called after commits, on the
// request's path.
type Notifier interface {
	// QueuesReady: a commit made messages of these queues poppable, or a
	// lease on them was released.
	QueuesReady(keys []QueueKey)
	// QueueChanged: these queues' options were set or the queues deleted;
	// cached lease times, encryption flags and options are stale.
	QueueChanged(keys []QueueKey)
	// MaintenanceChanged: an operator set the switches through this broker.
	MaintenanceChanged(push, pop bool)
}

// waitKey is what a parked pop waits on: a queue, or a namespace or task
// (whose queues it pops), within a tenant.
type waitKey struct {
	tenant string
	kind   byte // 'q', 'n' or 't'
	name   string
}

func queueWait(k QueueKey) waitKey { return waitKey{k.Tenant, 'q', k.Queue} }

// Local is the in-process notifier: it applies every announcement to this
// broker only.
func (b *Broker) Local() Notifier { return local{b} }

type local struct{ b *Broker }

func (l local) QueuesReady(keys []QueueKey)       { l.b.ApplyQueuesReady(keys) }
func (l local) QueueChanged(keys []QueueKey)      { l.b.ApplyQueueChanged(keys) }
func (l local) MaintenanceChanged(push, pop bool) { l.b.ApplyMaintenance(push, pop) }

// tee announces to the local broker first, then to the transport.
type tee struct{ local, remote Notifier }

func (t tee) QueuesReady(keys []QueueKey) {
	t.local.QueuesReady(keys)
	t.remote.QueuesReady(keys)
}

func (t tee) QueueChanged(keys []QueueKey) {
	t.local.QueueChanged(keys)
	t.remote.QueueChanged(keys)
}

func (t tee) MaintenanceChanged(push, pop bool) {
	t.local.MaintenanceChanged(push, pop)
	t.remote.MaintenanceChanged(push, pop)
}

// AnyTenant as the Tenant of a key given to ApplyQueuesReady or
// ApplyQueueChanged means the announcement named no valid tenant (an older
// sender): it applies to every tenant that has the queue name, never
// silently to the default tenant alone. Announcements this broker makes
// always name their tenant.
const AnyTenant = ""

// ApplyQueuesReady wakes the pops parked here on these queues, and on their
// namespaces and tasks as this broker's queue cache knows them (a queue it
// never saw has no pop parked on its namespace that it could wake anyway:
// such pops find it at their next re-poll). Idempotent; cheap when nobody
// waits.
func (b *Broker) ApplyQueuesReady(keys []QueueKey) {
	for _, k := range keys {
		if k.Tenant == AnyTenant {
			b.wakeEveryTenant(k.Queue)
			continue
		}
		b.wake(queueWait(k))
		if q, ok := b.queues.peek(k); ok {
			b.wakeTags(k.Tenant, q)
		}
	}
}

// wakeEveryTenant wakes the pops parked on a queue name in any tenant (a
// safe over-wake: a woken pop that finds nothing parks again).
func (b *Broker) wakeEveryTenant(queue string) {
	b.woke()
	b.wait.NotifyMatching(func(w waitKey) bool { return w.kind == 'q' && w.name == queue })
	for tenant, q := range b.queues.peekName(queue) {
		b.wakeTags(tenant, q)
	}
}

// wakeTags wakes the pops parked on the namespace and task of a queue.
func (b *Broker) wakeTags(tenant string, q db.QueenQueue) {
	if q.Namespace != "" {
		b.wake(waitKey{tenant, 'n', q.Namespace})
	}
	if q.Task != "" {
		b.wake(waitKey{tenant, 't', q.Task})
	}
}

// ApplyQueueChanged drops this broker's cached rows of these queues, so the
// next push or pop reads their options fresh. Idempotent.
func (b *Broker) ApplyQueueChanged(keys []QueueKey) {
	b.woke() // new options (a delay, a window) may make messages claimable
	for _, k := range keys {
		if k.Tenant == AnyTenant {
			b.queues.invalidateName(k.Queue)
			continue
		}
		b.queues.invalidate(k)
	}
}

// ApplyMaintenance adopts switches set through another broker at once,
// instead of at the next reconcile. A switch set here and not yet saved
// wins (maintenance.go). Idempotent.
func (b *Broker) ApplyMaintenance(push, pop bool) {
	b.ApplyPushMaintenance(push)
	b.ApplyPopMaintenance(pop)
}

// ApplyPushMaintenance adopts the push switch alone (a transport that
// carries the two switches separately), holding or releasing the spool's
// drain on a change, like ApplyMaintenance.
func (b *Broker) ApplyPushMaintenance(on bool) {
	b.maint.mu.Lock()
	defer b.maint.mu.Unlock()
	if _, pending := b.maint.unsaved[stateKeyPushMaintenance]; !pending {
		b.applyPushMaintenance(on)
	}
}

// ApplyPopMaintenance adopts the pop switch alone.
func (b *Broker) ApplyPopMaintenance(on bool) {
	b.maint.mu.Lock()
	defer b.maint.mu.Unlock()
	if _, pending := b.maint.unsaved[stateKeyPopMaintenance]; !pending {
		b.applyPopMaintenance(on)
	}
}

// Parked is the number of pops parked on this broker waiting for queue k.
func (b *Broker) Parked(k QueueKey) int { return b.wait.Len(queueWait(k)) }
