package broker

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The consumers of a group that keep up with the pushes wake together and
// scan the same candidates: most of their autoAck claims would find the
// partition taken by another pop of the group, or drained by it a moment
// ago. Each such claim is a statement for nothing. This broker knows the
// autoAck claims it makes itself, so before sending one it passes over a
// partition when
//
//   - another autoAck pop of the same group on this broker is claiming it
//     right now (the claim in flight takes what there is; when it ends
//     short of what a passing pop's scan saw there, one pop parked on that
//     pop's key is woken, so that what the claim in flight did not take
//     never waits for the shared re-poll), or
//   - a claim of this broker sent after the pop's scan returned has moved
//     the group's cursor to the partition's last seq as that scan saw it,
//     or past it: everything the scan saw there is delivered. (The claim's
//     snapshot is later than the scan's, so a seek that moved the cursor
//     back before it is in what the claim saw; one after it announces
//     itself and the next scan sees it.)
//
// Claims of other brokers are not known here; the statement's SKIP LOCKED
// and its probe for a next message still pass over those.

// raceKey is one group's cursor on one partition.
type raceKey struct {
	part  uuid.UUID
	group string
}

// raceEntry is what this broker knows of a raceKey's autoAck claims.
type raceEntry struct {
	inFlight bool
	skipped  []passed  // pops that passed the partition over while in flight
	sentAt   uint64    // ticket of the last claim that delivered
	cursor   int64     // the seq that claim moved the cursor to
	ended    time.Time // when the last claim ended, for pruning
}

// raceKeep is how long a finished claim is remembered: it only matters to
// scans in flight at the same time, which last milliseconds.
const raceKeep = time.Second

// autoAckRace holds the raceEntries of this broker's autoAck claims.
type autoAckRace struct {
	tickets atomic.Uint64
	mu      sync.Mutex
	m       map[raceKey]*raceEntry
	pruned  time.Time
	passes  atomic.Int64 // claims passed over (not sent), for tests and docs
}

// ticket orders scans and claims: one taken after a scan returned is lower
// than one taken before a later claim is sent.
func (r *autoAckRace) ticket() uint64 { return r.tickets.Add(1) }

// begin is called before a claim of k is sent. listed is the ticket taken
// when the scan that offered the partition returned (0 for a pop of a named
// partition, which scanned nothing), lastSeq the partition's last seq in
// that scan. ok false: pass the partition over (look, the pop's key, is
// then woken again after the claim in flight ends). Otherwise the claim's
// ticket, for end.
func (r *autoAckRace) begin(k raceKey, listed uint64, lastSeq int64, look lookKey) (t uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(k)
	switch {
	case e.inFlight:
		seen := lastSeq
		if listed == 0 {
			seen = math.MaxInt64 // a named partition: what is there is unknown
		}
		e.skipped = addPassed(e.skipped, passed{look, seen})
		r.passes.Add(1)
		return 0, false
	case listed > 0 && e.sentAt > listed && e.cursor >= lastSeq:
		r.passes.Add(1)
		return 0, false
	}
	e.inFlight = true
	return r.ticket(), true
}

// beginUnlisted is begin for a claim of a partition no scan offered and
// whose last seq is unknown (pushed_hint.go): ok false, recording nothing,
// while another claim of k is in flight.
func (r *autoAckRace) beginUnlisted(k raceKey) (t uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(k)
	if e.inFlight {
		r.passes.Add(1)
		return 0, false
	}
	e.inFlight = true
	return r.ticket(), true
}

// entry is k's entry, a new one (no claim in flight, none sent) when k has
// none; r.mu is held.
func (r *autoAckRace) entry(k raceKey) *raceEntry {
	if r.m == nil {
		r.m = make(map[raceKey]*raceEntry)
	}
	e := r.m[k]
	if e == nil {
		e = &raceEntry{}
		r.m[k] = e
	}
	return e
}

// cursorOf is where the last claim of k of this broker that delivered
// moved the cursor, if one is remembered; called by the claim in flight
// (begin), so no other claim of this broker moves it meanwhile.
func (r *autoAckRace) cursorOf(k raceKey) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[k]
	if e == nil || e.sentAt == 0 {
		return 0, false
	}
	return e.cursor, true
}

// wouldPass is begin's answer without its effects: whether a pop would
// pass the partition over now.
func (r *autoAckRace) wouldPass(k raceKey, listed uint64, lastSeq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[k]
	return e != nil && (e.inFlight || (listed > 0 && e.sentAt > listed && e.cursor >= lastSeq))
}

// end records that the claim of k sent with ticket t ended; cursor is the
// seq it moved the cursor to, 0 when it delivered nothing. It returns the
// pops that passed the partition over meanwhile.
func (r *autoAckRace) end(k raceKey, t uint64, cursor int64) []passed {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[k]
	skipped := e.skipped
	e.inFlight, e.skipped, e.ended = false, nil, now
	if cursor > 0 {
		e.sentAt, e.cursor = t, cursor
	}
	if now.Sub(r.pruned) >= raceKeep {
		r.pruned = now
		for rk, re := range r.m {
			if !re.inFlight && now.Sub(re.ended) >= raceKeep {
				delete(r.m, rk)
			}
		}
	}
	return skipped
}

// passed is a pop that passed a partition over because a claim of it was
// in flight: its key, and the partition's last seq as its scan saw it.
type passed struct {
	look lookKey
	seen int64
}

// addPassed adds a pass to ps, one per key, keeping the highest seq seen.
func addPassed(ps []passed, p passed) []passed {
	for i := range ps {
		if ps[i].look == p.look {
			ps[i].seen = max(ps[i].seen, p.seen)
			return ps
		}
	}
	return append(ps, p)
}

// raceEnd ends a claim begun with begin: it records the cursor the claim
// moved to (0: nothing delivered) and wakes a pop parked on the key of each
// pop that passed the partition over and saw more there than the claim
// took.
func (b *Broker) raceEnd(k raceKey, t uint64, cursor int64) {
	for _, p := range b.race.end(k, t, cursor) {
		if p.seen > cursor {
			b.rewake(p.look)
		}
	}
}

// rewake wakes one pop parked on look, after a claim it passed over ended.
func (b *Broker) rewake(look lookKey) { b.wakeNext(look) }

// wakeNext wakes one pop parked on look, for messages a look saw and left.
// The generation of its wait keys moves first, so that what a look found
// (nothing, perhaps, or all it saw) is not taken as the key being empty
// (known_empty.go) by the next long-poll, which then looks. When an autoAck
// pop of look is already due, its look will see those messages: nothing is
// done (due_looks.go).
func (b *Broker) wakeNext(look lookKey) { b.handOn(look, nil) }

// handOff is what handOn did.
type handOff uint8

const (
	handDeferred handOff = iota // an autoAck pop of the key is due: it looks
	handHinted                  // a pop took the hint: it claims what it names
	handWoke                    // the generation moved, one pop was woken
)

// handOn is wakeNext for a wake-up that may offer what the caller left
// (pushed_hint.go): a partition a push filled, whose messages the caller
// did not take all of, or the candidates a scan saw and its pop left.
// Unless an autoAck pop of look is due, a pop parked on look that is not
// woken already gets the hint, one not looking first, one looking when no
// other takes it (it claims the hint after its look, or hands it on when
// that look answers it): it claims what the hint names, and scans if it
// finds nothing, so the generation of look's wait keys need not move.
// Without a hint, or with no pop to take it, it is wakeNext.
func (b *Broker) handOn(look lookKey, hint *pushedPart) handOff {
	if b.dueLooks.any(look) {
		b.dueLooks.deferred.Add(1)
		return handDeferred
	}
	if hint != nil && b.looks.NotifyOneHint(look, hint) {
		b.hinted.handedOn.Add(1)
		return handHinted
	}
	b.emptyMu.Lock()
	for _, wk := range lookWaitKeys(look) {
		b.gens[wk]++
	}
	b.emptyMu.Unlock()
	b.looks.NotifyOne(look)
	return handWoke
}
