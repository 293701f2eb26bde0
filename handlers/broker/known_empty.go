package broker

import "time"

// A new long-poll normally looks once before it parks. When a look at its
// key (the shared re-poll's, or a pop's) found the key empty less than two
// re-poll intervals ago, and no wake-up for that key happened on this
// broker since, that first look cannot find anything a parked pop would not
// be woken for: the pop parks at once. Clients re-issuing timed-out
// long-polls (10,000 pops with a 30 s timeout re-issue 333 a second) then
// cost no statement either. What no wake-up announces reaches such a pop at
// the next shared re-poll, as it reaches every parked pop.
//
// "No wake-up since" is a generation count per wait key (queue, namespace,
// task), bumped before its pops are woken, plus one for the whole broker,
// bumped by the announcements that name no exact key. Per key, so that a
// busy queue does not make every idle key look again.

// emptyState is what this broker knows about a look key being empty.
type emptyState struct {
	gen uint64    // genOf the key when the look that found it empty started
	at  time.Time // when that look started
}

// lookWaitKeys are the wait keys whose wake-ups concern a look key: those
// its pops park on (plan).
func lookWaitKeys(k lookKey) []waitKey {
	if k.queue != "" {
		return []waitKey{queueWait(key(k.tenant, k.queue))}
	}
	var out []waitKey
	if k.namespace != "" {
		out = append(out, waitKey{k.tenant, 'n', k.namespace})
	}
	if k.task != "" {
		out = append(out, waitKey{k.tenant, 't', k.task})
	}
	return out
}

// genOf is the wake-up generation of a look key: it grows with every
// wake-up that concerns the key.
func (b *Broker) genOf(k lookKey) uint64 {
	g := b.wakeGen.Load()
	b.emptyMu.Lock()
	for _, wk := range lookWaitKeys(k) {
		g += b.gens[wk]
	}
	b.emptyMu.Unlock()
	return g
}

// knownEmpty reports whether a pop on k may park without looking.
func (b *Broker) knownEmpty(k lookKey) bool {
	gen := b.genOf(k)
	b.emptyMu.Lock()
	e, ok := b.empty[k]
	b.emptyMu.Unlock()
	return ok && e.gen == gen && time.Since(e.at) < 2*b.cfg.RepollInterval
}

// sawEmpty records that a look at k, started at generation gen and time
// at, found nothing. Newer knowledge wins.
func (b *Broker) sawEmpty(k lookKey, gen uint64, at time.Time) {
	b.emptyMu.Lock()
	if e, ok := b.empty[k]; !ok || e.gen < gen || (e.gen == gen && e.at.Before(at)) {
		b.empty[k] = emptyState{gen, at}
	}
	b.emptyMu.Unlock()
}

// forgetEmpty drops what was known about k: a look found it ready.
func (b *Broker) forgetEmpty(k lookKey) {
	b.emptyMu.Lock()
	delete(b.empty, k)
	b.emptyMu.Unlock()
}

// forgetStaleEmpty drops knowledge too old to be used.
func (b *Broker) forgetStaleEmpty() {
	b.emptyMu.Lock()
	for k, e := range b.empty {
		if time.Since(e.at) >= 2*b.cfg.RepollInterval {
			delete(b.empty, k)
		}
	}
	b.emptyMu.Unlock()
}

// woke starts a new generation for every key: for the wake-ups that name
// no exact key. Called before the waiters are woken.
func (b *Broker) woke() { b.wakeGen.Add(1) }

// wake starts a new generation for wk, then wakes its pops.
func (b *Broker) wake(wk waitKey) {
	b.emptyMu.Lock()
	b.gens[wk]++
	b.emptyMu.Unlock()
	b.wait.Notify(wk)
}
