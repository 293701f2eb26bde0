package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// A parked long-poll does not look at the database on its own. A commit
// that makes messages poppable wakes it through the notifier (notifier.go);
// what no commit announces is found by the shared re-poll: every
// RepollInterval, one read-only statement (PartitionPollReady) asks, for
// every key with pops parked, whether a pop could claim something now (a
// lease expired, a delayed message came due, a window buffer closed, or a
// broker without a notifier link committed), and wakes the pops parked on
// the keys that answer yes. They then make their real, claiming pop. So an
// idle broker costs one statement per interval (per repollChunk keys)
// whatever the number of parked pops, instead of a few transactions per
// parked pop.

// repollChunk caps the keys of one statement, so that one look stays a
// short statement even with tens of thousands of distinct keys parked.
const repollChunk = 1000

// lookKey is what the shared re-poll looks at for a parked pop: the pop's
// tenant, queue (or namespace and task), partition and consumer group.
// Pops with the same lookKey share one look.
type lookKey struct {
	tenant    string
	queue     string
	namespace string
	task      string
	partition string
	group     string
}

func (pr popPlan) lookKey() lookKey {
	return lookKey{pr.Tenant, pr.Queue, pr.Namespace, pr.Task, pr.Partition, pr.Group}
}

// RepollStats is what the shared re-poll did since the broker started
// (RepollStatsSnapshot): the counters behind the queen_pop_repoll_*
// Prometheus families.
type RepollStats struct {
	Statements int64 // PartitionPollReady statements run
	Keys       int64 // parked keys looked at, summed over the statements
	Woken      int64 // keys found claimable, whose parked pops were woken
	Skipped    int64 // long-polls that parked without their first look
}

// RepollStatsSnapshot reads the shared re-poll's counters.
func (b *Broker) RepollStatsSnapshot() RepollStats {
	return RepollStats{
		Statements: b.repolled.statements.Load(),
		Keys:       b.repolled.keys.Load(),
		Woken:      b.repolled.woken.Load(),
		Skipped:    b.repolled.skipped.Load(),
	}
}

// repollStats counts the shared re-poll's work.
type repollStats struct {
	statements atomic.Int64 // PartitionPollReady statements run
	keys       atomic.Int64 // keys looked at
	woken      atomic.Int64 // keys found ready, whose pops were woken
	skipped    atomic.Int64 // pops that parked without their first look
}

// repollLoop runs the shared re-poll every interval until Stop.
func (b *Broker) repollLoop(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.stopCh
		cancel()
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-b.stopCh:
			return
		case <-tick.C:
		}
		err := b.repollOnce(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			// Once per outage: parked pops still wake on announcements and
			// end at their timeout.
			b.log.Warn("re-poll parked pops", "err", err)
		case err == nil && failing:
			b.log.Info("re-poll parked pops recovered")
		}
		failing = err != nil
	}
}

// repollOnce looks once at every key with pops parked and wakes those of
// the keys where something may be claimable.
func (b *Broker) repollOnce(ctx context.Context) error {
	b.forgetStaleEmpty(b.rounds.Add(1))
	keys := b.looks.Keys(nil)
	for len(keys) > 0 {
		n := min(len(keys), repollChunk)
		if err := b.repollKeys(ctx, keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// readyKey is a lookKey as the statement answers it: the tenant as a UUID,
// so that the answer maps back whatever the spelling of the tenant.
type readyKey struct {
	tenant                                 uuid.UUID
	queue, namespace, task, partition, grp string
}

func (b *Broker) repollKeys(ctx context.Context, keys []lookKey) error {
	arg := db.PartitionPollReadyParams{
		TenantIds:      make([]uuid.UUID, len(keys)),
		QueueNames:     make([]string, len(keys)),
		Namespaces:     make([]string, len(keys)),
		Tasks:          make([]string, len(keys)),
		PartitionNames: make([]string, len(keys)),
		ConsumerGroups: make([]string, len(keys)),
	}
	index := make(map[readyKey]int, len(keys))
	for i, k := range keys {
		tid := tenantUUID(k.tenant)
		arg.TenantIds[i], arg.QueueNames[i], arg.Namespaces[i] = tid, k.queue, k.namespace
		arg.Tasks[i], arg.PartitionNames[i], arg.ConsumerGroups[i] = k.task, k.partition, k.group
		index[readyKey{tid, k.queue, k.namespace, k.task, k.partition, k.group}] = i
	}
	b.repolled.statements.Add(1)
	b.repolled.keys.Add(int64(len(keys)))
	starts := make([]emptyState, len(keys))
	for i, k := range keys {
		starts[i] = b.lookStart(k)
	}
	rows, err := b.q.PartitionPollReady(ctx, arg)
	if err != nil {
		return fmt.Errorf("look for claimable messages of %d parked keys: %w", len(keys), err)
	}
	ready := make([]bool, len(keys))
	for _, r := range rows {
		if i, ok := index[readyKey{r.TenantID, r.QueueName, r.Namespace, r.Task, r.PartitionName, r.ConsumerGroup}]; ok {
			ready[i] = true
		}
	}
	for i, k := range keys {
		if !ready[i] {
			b.sawEmpty(k, starts[i])
			continue
		}
		b.forgetEmpty(k)
		b.repolled.woken.Add(1)
		b.looks.Notify(k)
	}
	return nil
}
