package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// In a fan-out every consumer group reads every message: a push's wake-up
// offers the partition it filled to one autoAck pop of each group, and each
// group's autoAck read (PartitionConsumerAutoAckRead) fetches the same rows
// of the same partition within milliseconds of the others, converts each
// payload to text again and sends it over the socket again. So the rows an
// autoAck read returns are kept here a moment, per partition, and another
// group's autoAck claim of the partition that this broker knows the cursor
// of (its own last autoAck claim of it, autoack_race.go), and whose next
// rows are kept, is served from them: one statement moves that group's
// cursor (PartitionConsumerAutoAckAdvance: the lock and the HOT update of
// the read, only while the cursor is still where this broker saw it)
// without reading the messages. When that statement finds the cursor
// moved, locked or leased, the claim reads as usual: correctness never
// depends on what is kept.
//
// Why the kept rows are complete: a push locks its partitions' rows until
// it commits, so inside a partition sequence order is commit order (queen.
// push_messages, migration 0012), and a snapshot that sees a message sees
// every message of lower seq. An autoAck read returns the visible messages
// past the cursor in seq order, so its rows are every message with a seq
// from its first to its last (lo, hi]: none with a lower seq can commit
// later. Rows are only ever taken out by deletes: this broker's own
// (message, partition, queue) drop everything kept; other brokers' and the
// retention jobs' are covered by the age bound, as a read of a moment ago
// would have delivered the message too.
//
// What a group served from kept rows misses is what committed after the
// read that kept them: the messages past hi. A serve answers as that read
// would have, had the group made it then, so it is used only where the
// pop's bookkeeping (the hand-ons, known_empty.go's "the key was empty
// since the look started") holds for a read made then:
//
//   - the serve fills the pop's whole batch: it is exactly the batch a read
//     now would return (the first budget messages past the cursor);
//   - or the pop's scan listed the partition and the serve reaches the last
//     seq that scan saw there: the claim's hand-on (p.left) and the key's
//     "empty" (only when all the scan saw was taken) are judged against
//     the scan, whose pushes after it announce themselves;
//   - or the pop's wake-up offered the partition (pushed_hint.go) and the
//     last message that push stored there is among the kept rows: what
//     committed after it was announced by its own wake-up;
//   - or the read that kept the rows was sent after this pop's look started
//     and found nothing past hi then (it returned less than its batch):
//     anything past hi committed after the look started, so its wake-up
//     came after the look's start, as for a read of the pop's own.
//
// The groups a push wakes claim its partition together: a claim that finds
// another group's read of the partition in flight here waits for it (a
// read of a moment) and is served from its rows, instead of sending a read
// beside it; the claims that waited for one read move their cursors
// together, sent by the last of them to take its rows (advanceTogether).
// Every serve's move goes through the group commit of cursor moves
// (move_commit.go): one statement and one commit for the moves of all the
// partitions and groups that wait for the flush in flight.
//
// Only queues without a delay or a window buffer (pushedHintable): their
// reads have no other filter, so every group's read of a partition returns
// the same rows. Payloads are kept as stored (encrypted ones are opened per
// answer, popResult).

// sharedReadAge is how long kept rows may serve another group, from the
// read that brought them.
const sharedReadAge = 2 * time.Second

// sharedReadBytes bounds what is kept, payloads and ids counted; past it
// the oldest partitions' rows go first.
const sharedReadBytes = 8 << 20

// sharedReadRows bounds one partition's rows: past it, the oldest go.
const sharedReadRows = 1000

// sharedRead is what autoAck reads of one partition returned: every
// message with a seq in (lo, hi], in seq order.
type sharedRead struct {
	queueID uuid.UUID
	lo, hi  int64
	rows    []db.PartitionConsumerAutoAckReadRow
	bytes   int
	// reads is when the reads that brought the rows were sent: rows up
	// to upTo (and past the one before) by the read sent at at, oldest
	// first; rows older than sharedReadAge go (expire).
	reads []keptRead
	// sentAt is when the read that brought hi was sent; short that it
	// returned less than its batch, so nothing past hi was visible then.
	sentAt time.Time
	short  bool
}

type keptRead struct {
	upTo int64
	at   time.Time
}

// expire drops the rows read sharedReadAge ago or earlier, and returns
// the bytes freed; an entry left without rows is empty (lo == hi).
func (e *sharedRead) expire(now time.Time) (freed int) {
	n := 0
	for i, r := range e.reads { // times may cross: reads overlap in flight
		if now.Sub(r.at) >= sharedReadAge {
			n = i + 1
		}
	}
	if n == 0 {
		return 0
	}
	upTo := e.reads[n-1].upTo
	e.reads = e.reads[n:]
	i, _ := slices.BinarySearchFunc(e.rows, upTo+1, func(r db.PartitionConsumerAutoAckReadRow, seq int64) int {
		return cmp.Compare(r.Seq, seq)
	})
	for j := range i {
		freed += rowBytes(&e.rows[j])
	}
	e.rows, e.lo, e.bytes = e.rows[i:], upTo, e.bytes-freed
	return freed
}

// sharedReads holds the kept rows of this broker's autoAck reads.
type sharedReads struct {
	mu    sync.Mutex
	m     map[uuid.UUID]*sharedRead
	bytes int
	swept time.Time // when keep last dropped the partitions with nothing left
	// epoch moves with every delete of this broker: a read sent before
	// it keeps nothing.
	epoch atomic.Uint64

	// reading is the autoAck reads of a partition in flight here: another
	// group's claim of it waits for the read's rows instead of sending
	// its own read beside it (the groups a push wakes claim together).
	reading map[uuid.UUID]*readInFlight

	reads    atomic.Int64 // autoAck reads sent (PartitionConsumerAutoAckRead)
	served   atomic.Int64 // autoAck claims served from kept rows
	fellBack atomic.Int64 // kept rows tried, the cursor was not as known: read
	waited   atomic.Int64 // claims that waited for another group's read
	advances atomic.Int64 // PartitionConsumerAutoAckAdvance statements sent
	// readBatches counts the batches of autoAck reads sent
	// (read_commit.go): each one commit.
	readBatches atomic.Int64
	// Claims that read for want of kept rows: the group's cursor unknown
	// here, not covered by what is kept, or kept rows that may not answer
	// the pop (above).
	unknown, uncovered, refused atomic.Int64
}

// SharedReadStats counts the autoAck claims: those that read, those served
// from the rows another group's read kept, and the tries of kept rows that
// found the cursor moved, locked or leased and read after all; and the
// claims that waited for another group's read of the partition in flight.
type SharedReadStats struct {
	Reads, Served, FellBack, Waited int64
}

// SharedReadStatsSnapshot is what the autoAck claims did since boot.
func (b *Broker) SharedReadStatsSnapshot() SharedReadStats {
	return SharedReadStats{Reads: b.shared.reads.Load(), Served: b.shared.served.Load(), FellBack: b.shared.fellBack.Load(), Waited: b.shared.waited.Load()}
}

// forgetAll drops what is kept: a delete of this broker committed.
func (s *sharedReads) forgetAll() {
	s.epoch.Add(1)
	s.mu.Lock()
	s.m, s.bytes = nil, 0
	s.mu.Unlock()
}

// readInFlight is an autoAck read of a partition in flight here: done is
// closed when its rows are kept. The claims that wait for it (waiters)
// move their cursors together (advance), in one statement.
type readInFlight struct {
	done    chan struct{}
	waiters int // under sharedReads.mu, until done
	advance advanceBatch
}

// begin is called before an autoAck read of part is sent: the read is
// registered, and end must follow, unless another read of it is in
// flight here (nil).
func (s *sharedReads) begin(part uuid.UUID) *readInFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.reading[part]; ok {
		return nil
	}
	if s.reading == nil {
		s.reading = make(map[uuid.UUID]*readInFlight)
	}
	r := &readInFlight{done: make(chan struct{})}
	s.reading[part] = r
	return r
}

// waitFor counts a claim as waiting for the autoAck read of part in flight
// here and returns it, nil when there is none. A claim given one must
// join its advance (advanceTogether), whatever it finds.
func (s *sharedReads) waitFor(part uuid.UUID) *readInFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reading[part]
	if r != nil {
		r.waiters++
	}
	return r
}

// end ends the read of part begun with begin, after its rows are kept:
// no claim waits for it from here on.
func (s *sharedReads) end(part uuid.UUID, r *readInFlight) {
	s.mu.Lock()
	if s.reading[part] == r {
		delete(s.reading, part)
	}
	r.advance.expect = r.waiters
	s.mu.Unlock()
	close(r.done)
}

// rowBytes is about what a kept row holds.
func rowBytes(r *db.PartitionConsumerAutoAckReadRow) int {
	n := 128 + len(r.Payload) + len(r.TransactionID)
	if r.ProducerSub != nil {
		n += len(*r.ProducerSub)
	}
	return n
}

// keep stores the rows of an autoAck read of part sent at sentAt, while
// this broker's deletes were at epoch, for batch messages at most.
func (s *sharedReads) keep(queueID, part uuid.UUID, rows []db.PartitionConsumerAutoAckReadRow, batch int, sentAt time.Time, epoch uint64) {
	first, last := rows[0].Seq, rows[len(rows)-1].Seq
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch.Load() != epoch {
		return // a delete committed since the read was sent
	}
	if s.m == nil {
		s.m = make(map[uuid.UUID]*sharedRead)
	}
	e := s.m[part]
	now := time.Now()
	if e != nil {
		s.bytes -= e.expire(now)
	}
	fresh := e != nil && e.queueID == queueID && e.lo < e.hi
	switch {
	case fresh && first > e.lo && first <= e.hi+1 && last >= e.hi:
		// Adjacent to what is kept, or overlapping its end: the read
		// goes on from it.
		cut, _ := slices.BinarySearchFunc(e.rows, first, func(r db.PartitionConsumerAutoAckReadRow, seq int64) int {
			return cmp.Compare(r.Seq, seq)
		})
		for i := cut; i < len(e.rows); i++ {
			e.bytes -= rowBytes(&e.rows[i])
			s.bytes -= rowBytes(&e.rows[i])
		}
		e.rows = append(e.rows[:cut], rows...) // what take gave out are copies
		for len(e.reads) > 0 && e.reads[len(e.reads)-1].upTo >= first {
			// The rows from first on are read again: the older read
			// keeps those before first, if any.
			k := len(e.reads) - 1
			before := e.lo
			if k > 0 {
				before = e.reads[k-1].upTo
			}
			if before < first-1 {
				e.reads[k].upTo = first - 1
				break
			}
			e.reads = e.reads[:k]
		}
	case fresh && last <= e.hi:
		return // behind what is kept
	default:
		if e != nil {
			s.bytes -= e.bytes
		}
		e = &sharedRead{queueID: queueID, lo: first - 1}
		s.m[part] = e
		e.rows = slices.Clone(rows)
	}
	for i := len(e.rows) - len(rows); i < len(e.rows); i++ {
		n := rowBytes(&e.rows[i])
		e.bytes += n
		s.bytes += n
	}
	e.hi, e.sentAt, e.short = last, sentAt, len(rows) < batch
	e.reads = append(e.reads, keptRead{upTo: last, at: sentAt})
	if over := len(e.rows) - sharedReadRows; over > 0 {
		for i := range over {
			n := rowBytes(&e.rows[i])
			e.bytes -= n
			s.bytes -= n
		}
		e.lo = e.rows[over-1].Seq
		e.rows = e.rows[over:] // the next append past its capacity lets the rest go
		for len(e.reads) > 0 && e.reads[0].upTo <= e.lo {
			e.reads = e.reads[1:]
		}
	}
	for s.bytes > sharedReadBytes {
		s.dropOldestLocked()
	}
	if now.Sub(s.swept) >= sharedReadAge {
		s.swept = now
		for id, e := range s.m {
			s.bytes -= e.expire(now)
			if e.lo >= e.hi {
				delete(s.m, id)
			}
		}
	}
}

// dropOldestLocked forgets the partition kept longest.
func (s *sharedReads) dropOldestLocked() {
	var oldest uuid.UUID
	var at time.Time
	for id, e := range s.m {
		if len(e.reads) == 0 {
			oldest, at = id, time.Time{}
			break
		}
		if at.IsZero() || e.reads[0].at.Before(at) {
			oldest, at = id, e.reads[0].at
		}
	}
	if e := s.m[oldest]; e != nil {
		s.bytes -= e.bytes
		delete(s.m, oldest)
	} else {
		s.bytes = 0
	}
}

// take is what kept rows of part give a claim of budget messages from a
// cursor at cur: copies of the next rows past it, when what is kept covers
// it and the serve may answer the pop (see above: pushed is the message
// the pop's wake-up offered, lookAt when its look started). nil: read.
func (s *sharedReads) take(queueID uuid.UUID, p partRef, cur int64, budget int, lookAt time.Time) []db.PartitionConsumerAutoAckReadRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[p.id]
	if e != nil {
		s.bytes -= e.expire(time.Now())
	}
	if e == nil || e.queueID != queueID || cur < e.lo || cur >= e.hi {
		s.uncovered.Add(1)
		return nil
	}
	i, _ := slices.BinarySearchFunc(e.rows, cur+1, func(r db.PartitionConsumerAutoAckReadRow, seq int64) int {
		return cmp.Compare(r.Seq, seq)
	})
	next := e.rows[i:min(len(e.rows), i+budget)]
	switch {
	case len(next) == budget:
	case p.listed > 0 && next[len(next)-1].Seq >= p.last:
	case p.pushed != uuid.Nil && slices.ContainsFunc(e.rows, func(r db.PartitionConsumerAutoAckReadRow) bool { return r.ID == p.pushed }):
	case e.short && !lookAt.IsZero() && e.sentAt.After(lookAt):
	default:
		s.refused.Add(1)
		return nil
	}
	return slices.Clone(next)
}

// advanceBatch gathers the cursor moves of the claims that waited for one
// read: the last of them to join sends them all to the group commit of
// cursor moves as one job (move_commit.go: one flush, one commit, with
// whatever else waits there), and the others wait for its answer.
type advanceBatch struct {
	mu     sync.Mutex
	expect int // the read's waiters, set when the read ends
	joined int
	want   []moveItem
	done   chan struct{}
	moved  map[string]int32 // group → retry count, for the cursors moved
	err    error
}

// advanceTogether joins the claim (want: its move, nil when it has none)
// to the cursor moves of the claims that waited for r, and returns whether
// its cursor moved, with its retry count. The moves are sent by the last
// to join, without its pop's cancellation: they are the others' too.
func (b *Broker) advanceTogether(ctx context.Context, r *readInFlight, want *moveItem) (int32, bool, error) {
	a := &r.advance
	a.mu.Lock()
	if a.done == nil {
		a.done = make(chan struct{})
	}
	done := a.done
	if want != nil {
		a.want = append(a.want, *want)
	}
	a.joined++
	last := a.joined == a.expect
	a.mu.Unlock()
	if last {
		if len(a.want) > 0 {
			var res []moveResult
			res, a.err = b.moveCursors(context.WithoutCancel(ctx), a.want)
			a.moved = make(map[string]int32, len(res))
			for i, m := range res {
				if m.moved {
					a.moved[a.want[i].group] = m.retry
				}
			}
		}
		close(done)
	} else {
		<-done // the last joiner is a claim that finished its wait: a moment
	}
	if want == nil {
		return 0, false, nil
	}
	if a.err != nil {
		return 0, false, a.err
	}
	retry, ok := a.moved[want.group]
	return retry, ok, nil
}

// claimShared serves an autoAck claim of p from the rows another group's
// read kept, when it can (above): ok false means the claim must read.
func (b *Broker) claimShared(ctx context.Context, pr popPlan, q db.QueenQueue, p partRef, budget int) (c *claimed, ok bool, err error) {
	if !pushedHintable(q) {
		return nil, false, nil
	}
	cur, known := b.race.cursorOf(raceKey{p.id, pr.Group})
	if !known {
		b.shared.unknown.Add(1)
		return nil, false, nil
	}
	r := b.shared.waitFor(p.id)
	if r != nil {
		select { // another group's read of p: its rows, in a moment
		case <-r.done:
			b.shared.waited.Add(1)
		case <-ctx.Done():
			go func() { // the others' move waits for this claim's part
				<-r.done
				_, _, _ = b.advanceTogether(ctx, r, nil) // nothing of its own to move
			}()
			return nil, true, ctx.Err()
		}
	}
	rows := b.shared.take(q.ID, p, cur, budget, pr.lookAt)
	var item *moveItem
	if rows != nil {
		last := rows[len(rows)-1]
		item = &moveItem{part: p.id, group: pr.Group, expected: cur, last: last.Seq, lastID: last.ID, n: int64(len(rows))}
	}
	var retry int32
	var moved bool
	switch {
	case r != nil:
		retry, moved, err = b.advanceTogether(ctx, r, item)
	case item != nil:
		var got []moveResult
		got, err = b.moveCursors(ctx, []moveItem{*item})
		if err == nil {
			retry, moved = got[0].retry, got[0].moved
		}
	}
	if err != nil {
		return nil, true, fmt.Errorf("autoAck claim of partition %s: %w", p.id, err)
	}
	if item == nil {
		return nil, false, nil
	}
	if !moved {
		b.shared.fellBack.Add(1)
		return nil, false, nil
	}
	for i := range rows {
		rows[i].CursorFound, rows[i].BatchRetryCount = true, retry
	}
	b.shared.served.Add(1)
	cl := autoAckClaimed(q, p, rows)
	return &cl, true, nil
}
