package broker

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

// ApplyQueuesReady wakes the pops parked here on these queues, and on their
// namespaces and tasks as this broker's queue cache knows them (a queue it
// never saw has no pop parked on its namespace that it could wake anyway:
// such pops find it at their next re-poll). Idempotent; cheap when nobody
// waits.
func (b *Broker) ApplyQueuesReady(keys []QueueKey) {
	for _, k := range keys {
		b.wait.Notify(queueWait(k))
		if q, ok := b.queues.peek(k); ok {
			if q.Namespace != "" {
				b.wait.Notify(waitKey{k.Tenant, 'n', q.Namespace})
			}
			if q.Task != "" {
				b.wait.Notify(waitKey{k.Tenant, 't', q.Task})
			}
		}
	}
}

// ApplyQueuesReadyEveryTenant is ApplyQueuesReady for an announcement that
// names queues but no tenant (a NOTIFY sent from outside the brokers,
// docs/mesh.md): the queues of these names are woken in every tenant that
// has a pop parked on one here. Idempotent.
func (b *Broker) ApplyQueuesReadyEveryTenant(queues []string) {
	names := make(map[string]bool, len(queues))
	for _, q := range queues {
		names[q] = true
	}
	parked := b.wait.Keys(func(k waitKey) bool { return k.kind == 'q' && names[k.name] })
	keys := make([]QueueKey, 0, len(parked)+len(queues))
	seen := make(map[QueueKey]bool, len(parked)+len(queues))
	for _, k := range parked {
		keys = append(keys, key(k.tenant, k.name))
		seen[key(k.tenant, k.name)] = true
	}
	// Pops parked on a namespace or task are woken through the queue cache;
	// the default tenant's queues always count, as before tenancy.
	for _, q := range queues {
		if k := key(DefaultTenant, q); !seen[k] {
			keys = append(keys, k)
		}
	}
	b.ApplyQueuesReady(keys)
}

// ApplyQueueChanged drops this broker's cached rows of these queues, so the
// next push or pop reads their options fresh. Idempotent.
func (b *Broker) ApplyQueueChanged(keys []QueueKey) {
	for _, k := range keys {
		b.queues.invalidate(k)
	}
}

// ApplyQueueChangedEveryTenant is ApplyQueueChanged for an announcement that
// names queues but no tenant: the cached rows of these names are dropped in
// every tenant. Idempotent.
func (b *Broker) ApplyQueueChangedEveryTenant(queues []string) {
	for _, q := range queues {
		b.queues.invalidateName(q)
	}
}

// ApplyMaintenance adopts switches set through another broker at once,
// instead of at the next reconcile. A switch set here and not yet saved
// wins (maintenance.go). Idempotent.
func (b *Broker) ApplyMaintenance(push, pop bool) {
	b.maint.mu.Lock()
	defer b.maint.mu.Unlock()
	if _, pending := b.maint.unsaved[stateKeyPushMaintenance]; !pending {
		b.applyPushMaintenance(push)
	}
	if _, pending := b.maint.unsaved[stateKeyPopMaintenance]; !pending {
		b.applyPopMaintenance(pop)
	}
}

// Parked is the number of pops parked on this broker waiting for queue k.
func (b *Broker) Parked(k QueueKey) int { return b.wait.Len(queueWait(k)) }
