// Package waiters parks long-poll requests until a commit makes data visible.
//
// A waiter registers under one or more keys (for the broker: a queue, a
// namespace, a task, each within a tenant) before it looks for data, so a
// wake-up that lands between the look and the park still wakes it. Notify is
// cheap when nobody waits. The broker's notifier (handlers/broker) is the
// only caller of Notify: every wake-up, local or announced by another
// broker, passes through it.
package waiters

import (
	"sync"
	"sync/atomic"
)

// Registry holds the parked waiters by key.
type Registry[K comparable] struct {
	mu    sync.Mutex
	byKey map[K]map[*Waiter[K]]struct{}
}

// Waiter is one parked request. C receives a value when a key it waits on is
// notified; it never blocks the notifier. A waiter made by RegisterFunc has
// no C: its function is called instead.
type Waiter[K comparable] struct {
	C    chan struct{}
	fn   func()
	keys []K
	reg  *Registry[K]
	// A waiter made by RegisterClass: its class, and its function, which
	// is given the wake-up's hint and reports whether the wake-up was a new
	// one to it.
	class any
	fnNew func(hint any) bool
	// busy: the waiter is acting already (SetBusy).
	busy atomic.Bool
}

// New returns an empty registry.
func New[K comparable]() *Registry[K] {
	return &Registry[K]{byKey: make(map[K]map[*Waiter[K]]struct{})}
}

// Register parks a waiter under keys. Call Cancel when done with it.
func (r *Registry[K]) Register(keys ...K) *Waiter[K] {
	return r.add(&Waiter[K]{C: make(chan struct{}, 1), keys: keys, reg: r})
}

// RegisterFunc parks a waiter that has no goroutine waiting on it: fn is
// called on every notification of one of its keys, under the registry's
// lock, so it must be quick and must not call back into the registry. A
// request held outside any goroutine (a long-poll taken out of net/http)
// waits this way. Call Cancel when done with it.
func (r *Registry[K]) RegisterFunc(fn func(), keys ...K) *Waiter[K] {
	return r.add(&Waiter[K]{fn: fn, keys: keys, reg: r})
}

// RegisterClass is RegisterFunc for a waiter of a class (a comparable
// value, not nil): NotifyLimit wakes at most so many waiters of each class,
// Notify wakes it like any other. fn reports whether the wake-up was new to
// the waiter (false: it was woken already and has not acted on it yet, or
// it is done); only new ones count against NotifyLimit's limit. fn's hint
// is what NotifyLimit's hint function gave the wake-up (what of the event
// this waiter may answer), nil for a wake-up for anything (Notify,
// NotifyOne, NotifyMatching).
func (r *Registry[K]) RegisterClass(class any, fn func(hint any) bool, keys ...K) *Waiter[K] {
	return r.add(&Waiter[K]{fnNew: fn, class: class, keys: keys, reg: r})
}

func (r *Registry[K]) add(w *Waiter[K]) *Waiter[K] {
	r.mu.Lock()
	for _, k := range w.keys {
		set := r.byKey[k]
		if set == nil {
			set = make(map[*Waiter[K]]struct{})
			r.byKey[k] = set
		}
		set[w] = struct{}{}
	}
	r.mu.Unlock()
	return w
}

// wake signals one waiter; r.mu is held.
func (w *Waiter[K]) wake() {
	if w.fnNew != nil {
		w.fnNew(nil)
		return
	}
	if w.fn != nil {
		w.fn()
		return
	}
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// SetBusy marks the waiter busy (on) or idle: while busy, NotifyLimit
// and NotifyOneHint offer it a wake-up only when no idle waiter takes it.
// For a waiter that is acting on something already
// (a pop looking for messages), which an idle one would act on sooner.
func (w *Waiter[K]) SetBusy(on bool) { w.busy.Store(on) }

// Cancel removes the waiter from the registry. Safe to call twice.
func (w *Waiter[K]) Cancel() {
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
func (r *Registry[K]) Notify(key K) {
	r.mu.Lock()
	for w := range r.byKey[key] {
		w.wake()
	}
	r.mu.Unlock()
}

// NotifyLimit wakes the waiters parked under key as Notify does, except
// that of each class (RegisterClass) it gives a new wake-up to n waiters at
// most: for an event that n of them can answer (n new partitions with
// messages, where each waiter takes one), the rest staying parked. The
// i-th new wake-up of a class (from 0) is offered hint(i), so that the
// waiters of a class answer different parts of the event (hint nil: no
// hints). Busy waiters (SetBusy) are offered what the idle ones of their
// class did not take. It returns how many new wake-ups each class got (nil:
// none); a class that got n has the whole event answered by its waiters.
func (r *Registry[K]) NotifyLimit(key K, n int, hint func(i int) any) map[any]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var woken map[any]int
	offer := func(w *Waiter[K]) {
		i := woken[w.class]
		if i >= n {
			return
		}
		var h any
		if hint != nil {
			h = hint(i)
		}
		if w.fnNew(h) {
			if woken == nil {
				woken = make(map[any]int)
			}
			woken[w.class]++
		}
	}
	var busy []*Waiter[K]
	for w := range r.byKey[key] {
		switch {
		case w.class == nil:
			w.wake()
		case w.busy.Load():
			busy = append(busy, w)
		default:
			offer(w)
		}
	}
	for _, w := range busy {
		offer(w)
	}
	return woken
}

// NotifyOne wakes one waiter parked under key, any one; false when none
// waits. For a wake-up that one look answers: the waiter woken must look
// (or pass the wake-up on) whatever it was doing.
func (r *Registry[K]) NotifyOne(key K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.byKey[key] {
		w.wake()
		return true
	}
	return false
}

// NotifyOneHint offers hint to one waiter parked under key that takes it
// as a new wake-up (RegisterClass: its function reports true), an idle one
// first, a busy one (SetBusy) only when no idle one took it; false when
// none did. A busy waiter that takes it acts on it after what it is doing.
// A waiter that does not take it (woken already, or without a class) is
// not woken: the caller decides what to do instead.
func (r *Registry[K]) NotifyOneHint(key K, hint any) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var busy []*Waiter[K]
	for w := range r.byKey[key] {
		switch {
		case w.fnNew == nil:
		case w.busy.Load():
			busy = append(busy, w)
		case w.fnNew(hint):
			return true
		}
	}
	for _, w := range busy {
		if w.fnNew(hint) {
			return true
		}
	}
	return false
}

// NotifyMatching wakes every waiter parked under a key for which match
// holds. It visits every key with a parked waiter, so it is for the rare
// announcement that names no exact key (one from an older broker, which
// names no tenant); Notify is the common path.
func (r *Registry[K]) NotifyMatching(match func(K) bool) {
	r.mu.Lock()
	for k, set := range r.byKey {
		if !match(k) {
			continue
		}
		for w := range set {
			w.wake()
		}
	}
	r.mu.Unlock()
}

// Keys appends to dst every key that has a parked waiter, in no order, and
// returns it.
func (r *Registry[K]) Keys(dst []K) []K {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.byKey {
		dst = append(dst, k)
	}
	return dst
}

// Len is the number of parked waiters under key (for metrics and tests).
func (r *Registry[K]) Len(key K) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey[key])
}
