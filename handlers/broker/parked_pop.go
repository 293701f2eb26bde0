package broker

import (
	"context"
	"sync"
	"time"

	"github.com/queenforgo/queen/handlers/waiters"
	"github.com/queenforgo/queen/sql/pgerr"
)

// ParkedPop is a pop with Wait whose first look found nothing (PopStart).
// It waits without a goroutine of its own: the announcements of commits
// (notifier.go), the shared re-poll (repoll.go), its timeout and the
// broker's Drain each mark it due and call the function given to Watch;
// whoever holds it then calls Resume, which looks again or ends it. So a
// long-poll taken out of net/http (handlers/longpoll) costs only what it
// holds, and Wait gives the blocking form for a request that keeps its
// goroutine.
type ParkedPop struct {
	b      *Broker
	pr     popPlan
	look   lookKey
	w      *waiters.Waiter[waitKey]
	lw     *waiters.Waiter[lookKey]
	timer  *time.Timer
	unpark func()

	mu     sync.Mutex
	due    uint8  // dueWoken, dueExpired
	notify func() // set by Watch
	done   bool
	// hint is the partition offered by the push whose wake-up set
	// dueWoken (pushed_hint.go); nil when a wake-up for anything did.
	hint *pushedPart
}

const (
	dueWoken   uint8 = 1 << iota // an announcement or the re-poll: look again
	dueExpired                   // the timeout: end empty
)

// park registers a pop with Wait before its first look, so that a wake-up
// between the look and the park still marks it due. It is looking until
// PopStart has made or skipped that look.
func (b *Broker) park(pr popPlan) *ParkedPop {
	p := &ParkedPop{b: b, pr: pr, look: pr.lookKey(), unpark: b.parked(key(pr.Tenant, pr.Queue))}
	wake := func() { p.signal(dueWoken) }
	if pr.AutoAck {
		// A push wakes as many autoAck pops of a key as it filled
		// partitions (wake_pushed.go), each offered one of them
		// (pushed_hint.go): a pop that finds more than it takes wakes the
		// next one (claimAutoAck), offering the partition it left when it
		// had one (handOn).
		woken := func(hint any) bool {
			h, _ := hint.(*pushedPart)
			return p.wake(h)
		}
		p.w = b.wait.RegisterClass(p.look, woken, pr.waitKeys...)
		p.lw = b.looks.RegisterClass(p.look, woken, p.look)
	} else {
		p.w = b.wait.RegisterFunc(wake, pr.waitKeys...)
		p.lw = b.looks.RegisterFunc(wake, p.look)
	}
	p.looking(true)
	p.timer = time.AfterFunc(pr.timeout, func() { p.signal(dueExpired) })
	return p
}

// Timeout is the pop's whole wait, defaults applied.
func (p *ParkedPop) Timeout() time.Duration { return p.pr.timeout }

// signal marks p due and tells its holder; true when the bit is new to a
// pop not yet answered. It runs under the waiter registry's lock or on a
// timer: notify must not block. notify is called under p.mu, so that once
// the pop is finished it is never called again (the holder may have
// handed its connection on by then).
func (p *ParkedPop) signal(bit uint8) bool {
	if bit == dueWoken {
		return p.wake(nil)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mark(bit)
}

// wake is signal(dueWoken) for a wake-up offering hint (nil: a wake-up for
// anything). A pop that can take the hint and was not due keeps it, and is
// not counted as due (due_looks.go): it claims that partition, and scans
// only if the claim finds nothing. A wake-up for anything drops a hint
// kept, and the pop counts as due.
func (p *ParkedPop) wake(hint *pushedPart) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := p.due&dueWoken == 0 && !p.done
	if p.pr.AutoAck && !p.done {
		switch {
		case fresh && hint != nil && p.pr.takesHint():
			p.hint = hint
		case fresh:
			p.b.dueLooks.add(p.look, 1)
		case hint == nil && p.hint != nil:
			p.hint = nil
			p.b.dueLooks.add(p.look, 1)
		}
	}
	return p.mark(dueWoken)
}

// mark sets bit and tells the holder; p.mu is held.
func (p *ParkedPop) mark(bit uint8) bool {
	fresh := p.due&bit == 0 && !p.done
	p.due |= bit
	if p.notify != nil {
		p.notify()
	}
	return fresh
}

// Watch sets fn, called (from any goroutine; it must return at once, and
// must not call back into p) each time Resume has something to do, and at
// once if it already has; never after the pop is answered.
func (p *ParkedPop) Watch(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		fn() // Resume says done
		return
	}
	p.notify = fn
	if p.due != 0 {
		fn()
	}
}

// Resume does what is due: after a wake-up it looks again; after the
// timeout, or once the broker drains, it ends empty. done reports that the
// pop is answered (res and err are then its answer); otherwise it is
// parked again and Watch's function will be called again. A call with
// nothing due is harmless.
func (p *ParkedPop) Resume(ctx context.Context) (res *PopResult, done bool, err error) {
	p.mu.Lock()
	due, finished, hint := p.due, p.done, p.hint
	if !finished && due&dueExpired == 0 && !p.b.draining.Load() {
		p.due &^= dueWoken // a wake-up from here on is after the look below
		p.undue(due, finished)
		p.hint = nil
	} // else finish hands on a wake-up it will not look for
	p.mu.Unlock()
	switch {
	case finished:
		return nil, true, nil
	case due&dueExpired != 0 || p.b.draining.Load():
		p.finish(nil, nil)
		return nil, true, nil
	case due&dueWoken == 0:
		return nil, false, nil
	}
	p.looking(true)
	start := p.b.lookStart(p.look)
	pr := p.pr
	pr.started, pr.hint = start, hint
	res, err = p.b.popOnce(ctx, pr)
	p.looking(false)
	if err != nil || res != nil {
		p.finish(res, err)
		return res, true, pgerr.Translate(err)
	}
	p.b.sawEmpty(p.look, start)
	return nil, false, nil
}

// looking marks p busy while it looks (its first look, or Resume's): a
// push offers its partitions to the pops of the key that are not looking
// first, and so does a hand-on (handOn): one parked claims it sooner. A
// pop looking takes only what those leave, and claims it after its look
// (or hands it on, when that look answers it).
func (p *ParkedPop) looking(on bool) {
	p.w.SetBusy(on)
	p.lw.SetBusy(on)
}

// Cancel ends the wait without looking again: the client went away. No
// claim is taken, so nothing is leased to nobody.
func (p *ParkedPop) Cancel() { p.finish(nil, nil) }

// Wait blocks until the pop is answered, or ctx ends (nil, nil, as a
// client that went away).
func (p *ParkedPop) Wait(ctx context.Context) (*PopResult, error) {
	ch := make(chan struct{}, 1)
	p.Watch(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	for {
		select {
		case <-ch:
			if res, done, err := p.Resume(ctx); done {
				return res, err
			}
		case <-ctx.Done():
			p.Cancel()
			return nil, nil
		}
	}
}

// finish unregisters p and records the pop, once. A wake-up p got and
// will not look for (it timed out, its client left, or it was answered
// by a look that started before the wake-up) goes to another pop parked
// on its key: some wake-ups wake one pop only (autoack_race.go), and what
// they announce must not wait for the shared re-poll. A wake-up offering
// a partition goes on with it (handOn), unless the answer delivered the
// last message the push stored there.
func (p *ParkedPop) finish(res *PopResult, err error) {
	p.mu.Lock()
	finished := p.done
	unlooked, hint := p.due&dueWoken != 0, p.hint
	p.undue(p.due, finished)
	p.done, p.notify, p.hint = true, nil, nil
	p.mu.Unlock()
	if finished {
		return
	}
	p.w.Cancel()
	p.lw.Cancel()
	p.timer.Stop()
	// A wake-up offering a partition whose pushed messages the answer
	// delivered is answered.
	if unlooked && (hint == nil || !res.delivered(hint.last)) {
		p.b.handOn(p.look, hint)
	}
	p.unpark()
	p.b.recordPop(p.pr.PopRequest, res, err)
}

// undue takes p out of its key's due count (due_looks.go) when due, its
// bits before dueWoken is cleared, had it counted (a pop with a hint is
// not counted). p.mu is held.
func (p *ParkedPop) undue(due uint8, finished bool) {
	if due&dueWoken != 0 && !finished && p.pr.AutoAck && p.hint == nil {
		p.b.dueLooks.add(p.look, -1)
	}
}
