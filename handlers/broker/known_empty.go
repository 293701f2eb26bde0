package broker

import "time"

// A new long-poll normally looks once before it parks. When a look at its
// key (the shared re-poll's, or a pop's) found the key empty since the
// start of the shared re-poll's previous round, and no wake-up for that key
// happened on this broker since, that first look cannot find anything a
// parked pop would not be woken for: the pop parks at once, and the next
// round looks for it as for every parked pop. Clients re-issuing timed-out
// long-polls (10,000 pops with a 30 s timeout re-issue 333 a second) then
// cost no statement either. What no wake-up announces reaches such a pop at
// the next shared re-poll, as it reaches every parked pop.
//
// The age is counted in re-poll rounds, not on the clock: a round late
// because the pool is busy (a burst of pushes, or of first looks) must not
// expire what every key knows, or every re-issued pop looks, the pool gets
// busier, the next round is later still, and ten thousand parked pops make
// a storm of first looks that delays the woken ones. A clock limit of
// staleEmptyRounds intervals stays, for a re-poll that stopped.
//
// "No wake-up since" is a generation count per wait key (queue, namespace,
// task), bumped before its pops are woken, plus one for the whole broker,
// bumped by the announcements that name no exact key. Per key, so that a
// busy queue does not make every idle key look again.
//
// A push committed here that gave a new wake-up to as many autoAck pops of
// a look key as it filled partitions (wake_pushed.go) is excused for that
// look key: those pops look after its commit, and what they leave they
// hand on (due_looks.go), so a new long-poll of the key need not look for
// it. Without the excuse, a consumer that keeps up re-issues its long-poll
// after every answer and looks, and unthrottled a push lands during nearly
// every look: most of those first looks found the partitions already
// taken by the pops the push woke.

// emptyState is what this broker knows about a look key being empty.
type emptyState struct {
	gen   uint64    // genOf the key when the look that found it empty started
	round uint64    // the re-poll round under way when that look started
	at    time.Time // when that look started
}

// staleEmptyRounds is, in re-poll intervals, the clock's limit on what a
// look knew about an empty key.
const staleEmptyRounds = 10

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
// wake-up that concerns the key, except a push's that the key's woken pops
// answer (excused).
func (b *Broker) genOf(k lookKey) uint64 {
	g := b.wakeGen.Load()
	b.emptyMu.Lock()
	for _, wk := range lookWaitKeys(k) {
		g += b.gens[wk]
	}
	g -= b.excused[k]
	b.emptyMu.Unlock()
	return g
}

// knownEmpty reports whether a pop on k may park without looking.
func (b *Broker) knownEmpty(k lookKey) bool {
	gen := b.genOf(k)
	b.emptyMu.Lock()
	e, ok := b.empty[k]
	b.emptyMu.Unlock()
	return ok && e.gen == gen && b.rounds.Load() <= e.round+1 && !b.staleEmpty(e)
}

// staleEmpty reports knowledge too old to be used whatever the rounds.
func (b *Broker) staleEmpty(e emptyState) bool {
	return time.Since(e.at) >= staleEmptyRounds*b.cfg.RepollInterval
}

// lookStart is the wake-up generation of k and the re-poll round when a
// look at k starts; sawEmpty takes it back when the look found nothing.
func (b *Broker) lookStart(k lookKey) emptyState {
	return emptyState{gen: b.genOf(k), round: b.rounds.Load(), at: time.Now()}
}

// sawEmpty records that a look at k, started as s says, found nothing.
// Newer knowledge wins.
func (b *Broker) sawEmpty(k lookKey, s emptyState) {
	b.emptyMu.Lock()
	if e, ok := b.empty[k]; !ok || e.gen < s.gen || (e.gen == s.gen && e.at.Before(s.at)) {
		b.empty[k] = s
	}
	b.emptyMu.Unlock()
}

// forgetEmpty drops what was known about k: a look found it ready.
func (b *Broker) forgetEmpty(k lookKey) {
	b.emptyMu.Lock()
	delete(b.empty, k)
	b.emptyMu.Unlock()
}

// forgetStaleEmpty drops knowledge too old to be used: from before the
// previous round (round is the one starting), or past the clock's limit.
func (b *Broker) forgetStaleEmpty(round uint64) {
	b.emptyMu.Lock()
	for k, e := range b.empty {
		if e.round+1 < round || b.staleEmpty(e) {
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
