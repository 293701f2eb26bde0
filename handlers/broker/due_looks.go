package broker

import (
	"sync"
	"sync/atomic"
)

// A wake-up handed on (wakeNext: a look that left claimable messages, a
// woken pop that ends without looking, a claim that ended short of what a
// passing pop saw) makes one more pop look, and each such look is a scan.
// With consumers that keep up, most of those looks found nothing: the push
// had already woken as many pops as it filled partitions, and one of them,
// woken but not yet looking, was going to see the same messages.
//
// So a wake-up is handed on only when no autoAck pop of the key is due:
// woken (by a push, the re-poll or an earlier hand-on) and not yet started
// on the look it was woken for. Such a pop's look starts after the hand-on
// was decided, so its scan sees what the hand-on was for (the messages a
// look left were committed before that look's scan returned; a wake-up
// arrives after its commit). It then takes them, or leaves some and hands
// on in turn, or ends without looking and hands its own wake-up on
// (ParkedPop.finish), which decides again: the chain stops only at a look.
// Only autoAck pops count: a pop that leases does not hand on what it
// leaves.

// dueLooks counts, per look key, the autoAck pops whose dueWoken bit is
// set: set by ParkedPop.signal, cleared when Resume starts the look or the
// pop finishes. Lock order: Broker.emptyMu (held by wakeLimited around
// its wake-ups), the waiter registry, ParkedPop.mu, then mu.
type dueLooks struct {
	mu sync.Mutex
	n  map[lookKey]int
	// deferred counts hand-ons not made because a pop was due, for tests
	// and docs.
	deferred atomic.Int64
}

// add moves k's count by d.
func (d *dueLooks) add(k lookKey, delta int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = make(map[lookKey]int)
	}
	if n := d.n[k] + delta; n > 0 {
		d.n[k] = n
	} else {
		delete(d.n, k)
	}
}

// any reports whether an autoAck pop parked on k is due.
func (d *dueLooks) any(k lookKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[k] > 0
}
