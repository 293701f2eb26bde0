package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedCommit is a commit function whose flushes report their items on
// entered and then wait for a token on release, so a test decides when each
// flush ends. It echoes the items as outputs.
type gatedCommit struct {
	entered chan []int
	release chan struct{}
}

func newGatedCommit() *gatedCommit {
	return &gatedCommit{entered: make(chan []int, 16), release: make(chan struct{})}
}

func (g *gatedCommit) commit(_ context.Context, items []int) ([]int, error) {
	g.entered <- items
	<-g.release
	return items, nil
}

// nextFlush is the items of the next flush to start; the test fails rather
// than hangs when none starts.
func (g *gatedCommit) nextFlush(t *testing.T) []int {
	t.Helper()
	select {
	case items := <-g.entered:
		return items
	case <-time.After(10 * time.Second):
		t.Fatal("no flush started")
		return nil
	}
}

// enqueue hands a job to the dispatcher. The channel is unbuffered, so when
// it returns the dispatcher holds the job (waiting, or in a flush).
func enqueue(c *coalescer[int, int], items ...int) *coalescedJob[int, int] {
	j := newJob[int, int](items)
	c.in <- j
	return j
}

func result(t *testing.T, j *coalescedJob[int, int]) []int {
	t.Helper()
	select {
	case r := <-j.done:
		require.NoError(t, r.err)
		return r.out
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
		return nil
	}
}

// An idle coalescer flushes a request at once; requests that arrive while a
// flush commits wait and share the next flush, as long as they are small.
func TestCoalescerSmallRequestsShareTheNextFlush(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 1000, MaxFlushes: 4, ParallelMin: 100}, g.commit)
	c.start()
	t.Cleanup(c.stop)

	first := enqueue(c, 0)
	require.Equal(t, []int{0}, g.nextFlush(t))
	var later []*coalescedJob[int, int]
	for i := 1; i <= 10; i++ {
		later = append(later, enqueue(c, i))
	}
	g.release <- struct{}{}
	require.Equal(t, []int{0}, result(t, first))
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, g.nextFlush(t), "one flush for all ten")
	g.release <- struct{}{}
	for i, j := range later {
		require.Equal(t, []int{i + 1}, result(t, j), "each request gets its own outputs back")
	}
}

// Once the waiting items reach ParallelMin a flush starts beside the running
// one, up to MaxFlushes; beyond that requests wait again.
func TestCoalescerLargeBatchesFlushInParallel(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 1000, MaxFlushes: 2, ParallelMin: 5}, g.commit)
	c.start()
	t.Cleanup(c.stop)

	a := enqueue(c, 1)
	require.Equal(t, []int{1}, g.nextFlush(t))
	b := enqueue(c, 2, 2, 2, 2, 2)
	require.Equal(t, []int{2, 2, 2, 2, 2}, g.nextFlush(t), "a large batch does not wait for the running flush")
	// Two flushes in flight: these wait, and the next flush takes both.
	cc := enqueue(c, 3, 3, 3, 3, 3)
	d := enqueue(c, 4)
	g.release <- struct{}{}
	require.Equal(t, []int{3, 3, 3, 3, 3, 4}, g.nextFlush(t), "no third flush while two are in flight")
	g.release <- struct{}{}
	g.release <- struct{}{}
	for _, j := range []*coalescedJob[int, int]{a, b, cc, d} {
		require.NotEmpty(t, result(t, j))
	}
}

// A flush takes whole requests up to MaxItems; a request larger than that
// flushes alone.
func TestCoalescerFlushesAreCappedAtMaxItems(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 3, MaxFlushes: 1, ParallelMin: 1000}, g.commit)
	c.start()
	t.Cleanup(c.stop)

	enqueue(c, 0)
	require.Equal(t, []int{0}, g.nextFlush(t))
	enqueue(c, 1, 1)
	enqueue(c, 2, 2)
	enqueue(c, 3, 3, 3, 3)
	g.release <- struct{}{}
	require.Equal(t, []int{1, 1}, g.nextFlush(t))
	g.release <- struct{}{}
	require.Equal(t, []int{2, 2}, g.nextFlush(t))
	g.release <- struct{}{}
	require.Equal(t, []int{3, 3, 3, 3}, g.nextFlush(t))
	g.release <- struct{}{}
}

// stop commits what is waiting before it returns.
func TestCoalescerStopFlushesWaitingRequests(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 100, MaxFlushes: 1, ParallelMin: 100}, g.commit)
	c.start()

	a := enqueue(c, 1)
	require.Equal(t, []int{1}, g.nextFlush(t))
	b := enqueue(c, 2)
	stopped := make(chan struct{})
	go func() {
		c.stop()
		close(stopped)
	}()
	g.release <- struct{}{}
	require.Equal(t, []int{2}, g.nextFlush(t))
	g.release <- struct{}{}
	require.Equal(t, []int{1}, result(t, a))
	require.Equal(t, []int{2}, result(t, b))
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return")
	}
}

// Right after a flush, within the linger, the next flush waits until as
// many items wait as the last one took: the requests it answered come back
// and share one commit instead of the first flushing alone. Stopping
// flushes what is held at once.
func TestCoalescerLingersAfterAFlush(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 100, MaxFlushes: 2, ParallelMin: 100, Linger: time.Hour}, g.commit)
	c.start()

	// Idle (no flush ever ended): at once.
	first := enqueue(c, 1, 2)
	require.Equal(t, []int{1, 2}, g.nextFlush(t))
	g.release <- struct{}{}
	require.Equal(t, []int{1, 2}, result(t, first))

	// One item waits for a second one: the last flush took two.
	x := enqueue(c, 3)
	y := enqueue(c, 4)
	require.Equal(t, []int{3, 4}, g.nextFlush(t), "one flush for both")
	g.release <- struct{}{}
	require.Equal(t, []int{3}, result(t, x))
	require.Equal(t, []int{4}, result(t, y))

	held := enqueue(c, 5)
	stopped := make(chan struct{})
	go func() {
		c.stop()
		close(stopped)
	}()
	require.Equal(t, []int{5}, g.nextFlush(t), "stop does not wait out the linger")
	g.release <- struct{}{}
	require.Equal(t, []int{5}, result(t, held))
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return")
	}
}

// A flush is recorded before its requests are answered, so a client that
// reads the metrics after its answer finds its flush there (a scrape used
// to race the deferred record).
func TestCoalescerRecordsAFlushBeforeAnsweringIt(t *testing.T) {
	t.Parallel()
	g := newGatedCommit()
	c := newCoalescer(coalescerLimits{MaxItems: 100, MaxFlushes: 1, ParallelMin: 100}, g.commit)
	recorded := make(chan int, 1)
	proceed := make(chan struct{})
	c.flushed = func(items int, _ time.Duration) {
		recorded <- items
		<-proceed
	}
	c.start()
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	defer c.stop()
	defer release() // before stop: a failed check must not leave the flush waiting

	j := enqueue(c, 1, 2, 3)
	require.Equal(t, []int{1, 2, 3}, g.nextFlush(t))
	g.release <- struct{}{}
	select {
	case n := <-recorded:
		require.Equal(t, 3, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the flush was not recorded")
	}
	select {
	case <-j.done:
		t.Fatal("answered before the flush was recorded")
	default:
	}
	release()
	require.Equal(t, []int{1, 2, 3}, result(t, j))
}
