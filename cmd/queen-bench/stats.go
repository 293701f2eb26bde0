package main

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// recorder keeps every latency sample of one worker; a run merges its
// workers' recorders once at the end, so adding takes no lock. Runs are
// bounded (at most -max-messages samples), so sorted samples are exact and
// small enough.
type recorder struct {
	samples []time.Duration
}

func (r *recorder) add(d time.Duration) { r.samples = append(r.samples, d) }

// mergeRecorders returns one recorder holding the samples of all.
func mergeRecorders(rs ...*recorder) *recorder {
	n := 0
	for _, r := range rs {
		n += len(r.samples)
	}
	out := &recorder{samples: make([]time.Duration, 0, n)}
	for _, r := range rs {
		out.samples = append(out.samples, r.samples...)
	}
	return out
}

// latency is the summary of a set of samples.
type latency struct {
	N        int
	P50, P99 time.Duration
	Max      time.Duration
}

func (r *recorder) summary() latency {
	s := slices.Clone(r.samples)
	slices.Sort(s)
	l := latency{N: len(s), P50: percentile(s, 50), P99: percentile(s, 99)}
	if len(s) > 0 {
		l.Max = s[len(s)-1]
	}
	return l
}

// percentile is the nearest-rank p-th percentile of sorted samples: the
// smallest sample such that at least p percent of the samples are at or
// below it. It is 0 for no samples; p is clamped to [0, 100].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// tally is what the workers of one run count together.
type tally struct {
	msgs     atomic.Int64
	errs     atomic.Int64
	last     atomic.Int64 // UnixNano of the latest counted message
	firstErr sync.Once
	errText  atomic.Pointer[string]
}

func (t *tally) count(n int64, at time.Time) {
	if n > 0 {
		t.msgs.Add(n)
		t.last.Store(at.UnixNano())
	}
}

func (t *tally) fail(err error) {
	t.errs.Add(1)
	t.firstErr.Do(func() {
		s := err.Error()
		t.errText.Store(&s)
	})
}

// errorNote is "" without errors, else the count and the first one.
func (t *tally) errorNote() string {
	n := t.errs.Load()
	if n == 0 {
		return ""
	}
	first := ""
	if p := t.errText.Load(); p != nil {
		first = *p
	}
	return fmt.Sprintf("%d errors (first: %s)", n, first)
}

// lastAt is the time of the latest counted message, or start if none.
func (t *tally) lastAt(start time.Time) time.Time {
	if ns := t.last.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return start
}

// budget hands out at most -max-messages messages to a run's workers.
type budget struct{ left atomic.Int64 }

func newBudget(n int64) *budget {
	b := &budget{}
	b.left.Store(n)
	return b
}

// take reserves up to n messages and returns how many it got (0: spent).
func (b *budget) take(n int) int {
	for {
		left := b.left.Load()
		if left <= 0 {
			return 0
		}
		got := min(int64(n), left)
		if b.left.CompareAndSwap(left, left-got) {
			return int(got)
		}
	}
}

// pacer spaces requests so that they add up to a target rate across all
// workers; a nil pacer never waits.
type pacer struct {
	mu       sync.Mutex
	next     time.Time
	interval time.Duration
}

// newPacer returns a pacer for rate messages/s in requests of batch, or
// nil for rate 0 (as fast as possible).
func newPacer(rate, batch int) *pacer {
	if rate <= 0 {
		return nil
	}
	return &pacer{interval: time.Duration(float64(time.Second) * float64(batch) / float64(rate))}
}

// wait blocks until the caller's slot; it returns false when the slot lies
// past the deadline.
func (p *pacer) wait(deadline time.Time) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	now := time.Now()
	slot := p.next
	if slot.Before(now) {
		slot = now
	}
	p.next = slot.Add(p.interval)
	p.mu.Unlock()
	if !slot.Before(deadline) {
		return false
	}
	// Pacing is the point of -rate: this sleep sets the offered load, it
	// does not wait for anything to happen.
	time.Sleep(time.Until(slot))
	return true
}
