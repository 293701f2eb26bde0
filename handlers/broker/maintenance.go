package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// The queen.system_state rows of the two switches; the reference brokers
// (C++ and Rust) use the same keys and values, so mixed clusters agree.
const (
	stateKeyPushMaintenance = "maintenance_mode"
	stateKeyPopMaintenance  = "pop_maintenance_mode"
)

// maintenance holds the two switches (SECURITY-REQUIREMENTS §7). The
// in-process flags are what the push and pop paths read; the rows in
// queen.system_state are the truth every broker converges to.
type maintenance struct {
	push atomic.Bool // pushes go to the spool, the drain is held
	pop  atomic.Bool // pops answer 204 without reading

	mu sync.Mutex
	// unsaved holds a switch this broker set while the database could not
	// be written; the reconcile writes it before reading, so the operator's
	// last word is not undone by the old row.
	unsaved map[string]bool
	// gen counts local sets, so that a reconcile whose read started before
	// a set does not apply the older rows over it.
	gen uint64
}

func newMaintenance() *maintenance { return &maintenance{unsaved: map[string]bool{}} }

// maintenanceLoop re-reads the switches every `every` until Stop.
func (b *Broker) maintenanceLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stopCh:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := b.reconcileMaintenance(ctx); err != nil {
			b.log.Debug("reconcile maintenance switches", "err", err)
		}
		cancel()
	}
}

// reconcileMaintenance writes switches set while the database was down,
// then adopts what the rows say.
func (b *Broker) reconcileMaintenance(ctx context.Context) error {
	if b.pool == nil {
		return fmt.Errorf("no database pool")
	}
	b.maint.mu.Lock()
	gen := b.maint.gen
	unsaved := make(map[string]bool, len(b.maint.unsaved))
	for k, v := range b.maint.unsaved {
		unsaved[k] = v
	}
	b.maint.mu.Unlock()
	for key, on := range unsaved {
		if err := b.saveSwitch(ctx, key, on); err != nil {
			return err
		}
		b.maint.mu.Lock()
		if v, ok := b.maint.unsaved[key]; ok && v == on {
			delete(b.maint.unsaved, key)
		}
		b.maint.mu.Unlock()
	}
	rows, err := b.q.SystemStateListByKeys(ctx, []string{stateKeyPushMaintenance, stateKeyPopMaintenance})
	if err != nil {
		return pgerr.Translate(err)
	}
	found := map[string]bool{}
	for _, r := range rows {
		var v struct {
			Enabled bool `json:"enabled"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			b.log.Warn("unreadable maintenance switch in queen.system_state; read as off", "key", r.Key, "err", err)
		}
		found[r.Key] = v.Enabled
	}
	b.maint.mu.Lock()
	defer b.maint.mu.Unlock()
	if b.maint.gen != gen {
		return nil // a switch was set here meanwhile; the next reconcile reads it back
	}
	if _, pending := b.maint.unsaved[stateKeyPushMaintenance]; !pending {
		b.applyPushMaintenance(found[stateKeyPushMaintenance])
	}
	if _, pending := b.maint.unsaved[stateKeyPopMaintenance]; !pending {
		b.applyPopMaintenance(found[stateKeyPopMaintenance])
	}
	return nil
}

// applyPushMaintenance sets the flag and holds or releases the drain.
func (b *Broker) applyPushMaintenance(on bool) {
	if b.maint.push.Swap(on) == on {
		return
	}
	b.log.Info("push maintenance switched", "enabled", on)
	if b.spool == nil {
		return
	}
	if on {
		b.spool.Pause()
	} else {
		b.spool.Resume()
	}
}

func (b *Broker) applyPopMaintenance(on bool) {
	if b.maint.pop.Swap(on) != on {
		b.log.Info("pop maintenance switched", "enabled", on)
	}
}

// setSwitch applies a switch here at once, persists it (when the database
// cannot be written the reconcile writes it later), then announces both
// switches, after the save so that a broker applying the announcement and
// reading the rows sees the same.
func (b *Broker) setSwitch(ctx context.Context, key string, on bool) {
	b.maint.mu.Lock()
	if key == stateKeyPushMaintenance {
		b.applyPushMaintenance(on)
	} else {
		b.applyPopMaintenance(on)
	}
	b.maint.unsaved[key] = on
	b.maint.gen++
	b.maint.mu.Unlock()
	saveCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := b.saveSwitch(saveCtx, key, on)
	b.maint.mu.Lock()
	if err != nil {
		b.log.Warn("maintenance switch applied on this broker but not persisted yet; retried by the reconcile",
			"key", key, "enabled", on, "err", err)
	} else if v, ok := b.maint.unsaved[key]; ok && v == on {
		delete(b.maint.unsaved, key)
	}
	b.maint.mu.Unlock()
	b.notify.MaintenanceChanged(b.maint.push.Load(), b.maint.pop.Load())
}

func (b *Broker) saveSwitch(ctx context.Context, key string, on bool) error {
	value := json.RawMessage(fmt.Sprintf(`{"enabled":%t}`, on))
	if err := b.q.SystemStateUpsert(ctx, db.SystemStateUpsertParams{Key: key, Value: value}); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// Maintenance is the state of the switches as this broker applies them.
func (b *Broker) Maintenance() (push, pop bool) { return b.maint.push.Load(), b.maint.pop.Load() }

// RefreshMaintenance reads the switches now and adopts them (after writing
// any this broker could not save before).
func (b *Broker) RefreshMaintenance(ctx context.Context) error { return b.reconcileMaintenance(ctx) }

// SetPushMaintenance turns push maintenance on or off (MNT-1): on, every
// push goes to the spool and its replay is held. It applies here at once;
// the other brokers adopt it from the announcement or their reconcile.
func (b *Broker) SetPushMaintenance(ctx context.Context, on bool) {
	b.setSwitch(ctx, stateKeyPushMaintenance, on)
}

// SetPopMaintenance turns pop maintenance on or off (MNT-2): on, every pop
// answers empty.
func (b *Broker) SetPopMaintenance(ctx context.Context, on bool) {
	b.setSwitch(ctx, stateKeyPopMaintenance, on)
}
