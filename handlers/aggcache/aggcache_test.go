package aggcache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clock is a settable clock; a computation "costs" what it advances it by.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type bundle struct {
	clk   *clock
	cache *Cache
	calls int
	mu    sync.Mutex
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clk := &clock{now: time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)}
	return &bundle{clk: clk, cache: New(Config{
		MinCost: 50 * time.Millisecond, Fresh: time.Second, MaxAge: 30 * time.Second, NowFunc: clk.Now,
	})}
}

// compute returns a computation that costs cost and answers its call number.
func (b *bundle) compute(cost time.Duration) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		b.mu.Lock()
		b.calls++
		n := b.calls
		b.mu.Unlock()
		b.clk.advance(cost)
		return n, nil
	}
}

func TestCheapAnswersStayLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for want := 1; want <= 3; want++ {
		v, err := Get(b.cache, context.Background(), "k", b.compute(10*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
}

func TestExpensiveAnswerServedThenRefreshedInTheBackground(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	v, err := Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, v)

	// Fresh: served as it is, nothing recomputed.
	v, err = Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, v)
	b.cache.Wait()
	require.Equal(t, 1, b.calls)

	// Stale: the old answer at once, one recomputation behind it, even
	// when asked twice.
	b.clk.advance(5 * time.Second)
	for range 2 {
		v, err = Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, 1, v)
	}
	b.cache.Wait()
	require.Equal(t, 2, b.calls)
	v, err = Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 2, v)

	// Past MaxAge the caller computes it again itself.
	b.clk.advance(time.Minute)
	v, err = Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 3, v)
	b.cache.Wait()
	require.Equal(t, 3, b.calls)
}

func TestAnswerThatBecameCheapIsForgotten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	b.clk.advance(2 * time.Second)
	_, err = Get(b.cache, ctx, "k", b.compute(time.Millisecond)) // stale: refresh, cheap now
	require.NoError(t, err)
	b.cache.Wait()
	v, err := Get(b.cache, ctx, "k", b.compute(time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 3, v, "live again once cheap")
}

func TestErrorsAreNotKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	boom := errors.New("boom")
	_, err := Get(b.cache, ctx, "k", func(context.Context) (int, error) {
		b.clk.advance(time.Second)
		return 0, boom
	})
	require.ErrorIs(t, err, boom)
	v, err := Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, v)

	// A failed background refresh keeps the old answer and lets the next
	// stale hit try again.
	b.clk.advance(2 * time.Second)
	v, err = Get(b.cache, ctx, "k", func(context.Context) (int, error) { return 0, boom })
	require.NoError(t, err)
	require.Equal(t, 1, v)
	b.cache.Wait()
	v, err = Get(b.cache, ctx, "k", b.compute(200*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, v)
	b.cache.Wait()
	require.Equal(t, 2, b.calls)
}

func TestKeysAndTypesAreSeparate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, err := Get(b.cache, ctx, "a", b.compute(time.Second))
	require.NoError(t, err)
	c, err := Get(b.cache, ctx, "b", b.compute(time.Second))
	require.NoError(t, err)
	require.NotEqual(t, a, c)
	s, err := Get(b.cache, ctx, "a", func(context.Context) (string, error) { return "other type", nil })
	require.NoError(t, err)
	require.Equal(t, "other type", s)
}

func TestNilCacheComputesEveryTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for want := 1; want <= 2; want++ {
		v, err := Get(nil, context.Background(), "k", b.compute(time.Second))
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	(*Cache)(nil).Wait()
}

func TestFreshLastsTwiceTheCost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := Get(b.cache, ctx, "k", b.compute(4*time.Second))
	require.NoError(t, err)
	b.clk.advance(3 * time.Second) // 7 s old (from its start), 4 s of work: fresh until 8 s
	v, err := Get(b.cache, ctx, "k", b.compute(4*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, v)
	b.cache.Wait()
	require.Equal(t, 1, b.calls)
	b.clk.advance(2 * time.Second)
	_, err = Get(b.cache, ctx, "k", b.compute(4*time.Second))
	require.NoError(t, err)
	b.cache.Wait()
	require.Equal(t, 2, b.calls)
}

func TestClearDropsAnswersAndComputationsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := Get(b.cache, ctx, "k", b.compute(time.Second))
	require.NoError(t, err)
	b.cache.Clear()
	v, err := Get(b.cache, ctx, "k", b.compute(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, v, "computed again after Clear")

	// A recomputation that started before a Clear is not kept.
	b.clk.advance(5 * time.Second)
	started, release := make(chan struct{}), make(chan struct{})
	v, err = Get(b.cache, ctx, "k", func(ctx context.Context) (int, error) {
		close(started)
		<-release
		return b.compute(time.Second)(ctx)
	})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	<-started
	b.cache.Clear()
	close(release)
	b.cache.Wait()
	v, err = Get(b.cache, ctx, "k", b.compute(time.Second))
	require.NoError(t, err)
	require.Equal(t, 4, v, "the answer of the recomputation (3) was dropped")
	(*Cache)(nil).Clear()
}

func TestSlowAnswersLiveFourTimesTheirCost(t *testing.T) {
	t.Parallel()
	b := setup(t) // MaxAge 30 s
	ctx := context.Background()
	_, err := Get(b.cache, ctx, "k", b.compute(10*time.Second))
	require.NoError(t, err)
	b.clk.advance(25 * time.Second) // 35 s from its start: past MaxAge, within 40 s
	v, err := Get(b.cache, ctx, "k", b.compute(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, v, "served while it recomputes")
	b.cache.Wait()
	require.Equal(t, 2, b.calls)
}

func TestAnswersNotToBeKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	huge := func(ctx context.Context) (int, error) {
		v, _ := b.compute(time.Second)(ctx)
		return v, ErrDontKeep
	}
	v, err := Get(b.cache, ctx, "k", huge)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	v, err = Get(b.cache, ctx, "k", huge)
	require.NoError(t, err)
	require.Equal(t, 2, v, "not kept: computed again")

	// An answer that grows too large while kept is dropped at its refresh.
	_, err = Get(b.cache, ctx, "k", b.compute(time.Second))
	require.NoError(t, err)
	b.clk.advance(3 * time.Second)
	v, err = Get(b.cache, ctx, "k", huge)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	b.cache.Wait()
	v, err = Get(b.cache, ctx, "k", huge)
	require.NoError(t, err)
	require.Equal(t, 5, v)
}

// With the default MaxAge, opening a page after minutes without a poll gets
// the last answer at once and the recomputation behind it; only after more
// than MaxAge does the caller wait for it.
func TestDefaultServesAfterAPause(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)}
	b := &bundle{clk: clk, cache: New(Config{NowFunc: clk.Now})}
	ctx := context.Background()
	v, err := Get(b.cache, ctx, "k", b.compute(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, v)

	b.clk.advance(ConfigDefault.MaxAge - 10*time.Second)
	v, err = Get(b.cache, ctx, "k", b.compute(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, v, "the answer of before the pause, at once")
	b.cache.Wait()
	v, err = Get(b.cache, ctx, "k", b.compute(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, v, "the recomputed one on the next poll")

	b.clk.advance(ConfigDefault.MaxAge + time.Second)
	v, err = Get(b.cache, ctx, "k", b.compute(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, 3, v, "past MaxAge: computed for the caller")
}
