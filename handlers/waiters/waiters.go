// Package waiters parks long-poll requests until a commit makes data visible.
//
// A waiter registers under one or more keys (a queue, a namespace, a task)
// before it looks for data, so a commit that lands between the look and the
// park still wakes it. Notify is cheap when nobody waits.
package waiters

import "sync"

// Registry holds the parked waiters by key.
type Registry struct {
	mu    sync.Mutex
	byKey map[string]map[*Waiter]struct{}
}

// Waiter is one parked request. C receives a value when a key it waits on is
// notified; it never blocks the notifier.
type Waiter struct {
	C    chan struct{}
	keys []string
	reg  *Registry
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{byKey: make(map[string]map[*Waiter]struct{})}
}

// Register parks a waiter under keys. Call Cancel when done with it.
func (r *Registry) Register(keys ...string) *Waiter {
	w := &Waiter{C: make(chan struct{}, 1), keys: keys, reg: r}
	r.mu.Lock()
	for _, k := range keys {
		set := r.byKey[k]
		if set == nil {
			set = make(map[*Waiter]struct{})
			r.byKey[k] = set
		}
		set[w] = struct{}{}
	}
	r.mu.Unlock()
	return w
}

// Cancel removes the waiter from the registry. Safe to call twice.
func (w *Waiter) Cancel() {
	r := w.reg
	r.mu.Lock()
	for _, k := range w.keys {
		if set := r.byKey[k]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(r.byKey, k)
			}
		}
	}
	r.mu.Unlock()
}

// Notify wakes every waiter parked under key.
func (r *Registry) Notify(key string) {
	r.mu.Lock()
	for w := range r.byKey[key] {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

// Len is the number of parked waiters under key (for metrics and tests).
func (r *Registry) Len(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey[key])
}
