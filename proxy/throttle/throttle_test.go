package throttle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/throttle"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

// Ten attempts a minute per address, whichever accounts they name; the
// eleventh waits until the oldest leaves the window.
func TestPerAddress(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := throttle.New(throttle.Config{NowFunc: c.now})
	for i := range 10 {
		_, ok := th.Attempt("10.0.0.1", "a"+string(rune('a'+i)))
		require.True(t, ok, "attempt %d", i+1)
		c.add(time.Second)
	}
	retry, ok := th.Attempt("10.0.0.1", "z")
	require.False(t, ok, "the eleventh within 60 s")
	require.Equal(t, 50*time.Second, retry)
	_, ok = th.Attempt("10.0.0.2", "z")
	require.True(t, ok, "another address has its own budget")
	c.add(retry)
	_, ok = th.Attempt("10.0.0.1", "z")
	require.True(t, ok, "released once the oldest attempt left the window")
	_, ok = th.Attempt("10.0.0.1", "z")
	require.False(t, ok, "one slot freed, one used")
}

// After five wrong passwords in a row an account waits 1 s, then 2 s, 4 s,
// ... up to the cap; a success clears it.
func TestPerAccountBackoff(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := throttle.New(throttle.Config{NowFunc: c.now, PerAddress: 1000, BackoffMax: 8 * time.Second})
	fail := func() {
		t.Helper()
		_, ok := th.Attempt("10.0.0.1", "ada@acme.test")
		require.True(t, ok)
		th.Failed("ada@acme.test")
	}
	for range 5 {
		fail()
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		retry, ok := th.Attempt("10.0.0.9", "ada@acme.test")
		require.False(t, ok, "locked from any address")
		require.Equal(t, want, retry)
		_, ok = th.Attempt("10.0.0.9", "bob@acme.test")
		require.True(t, ok, "other accounts are not")
		c.add(want - time.Millisecond)
		_, ok = th.Attempt("10.0.0.1", "ada@acme.test")
		require.False(t, ok)
		c.add(time.Millisecond)
		fail()
	}
	c.add(8 * time.Second)
	_, ok := th.Attempt("10.0.0.1", "ada@acme.test")
	require.True(t, ok)
	th.Succeeded("ada@acme.test")
	fail()
	_, ok = th.Attempt("10.0.0.1", "ada@acme.test")
	require.True(t, ok, "a success starts the count again")

	for range 4 { // five in a row with the one above
		fail()
	}
	_, ok = th.Attempt("10.0.0.1", "ada@acme.test")
	require.False(t, ok)
	c.add(time.Hour)
	_, ok = th.Attempt("10.0.0.1", "ada@acme.test")
	require.True(t, ok, "failures are forgotten an hour after the last")
}

func TestSweepKeepsWhatLimits(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := throttle.New(throttle.Config{NowFunc: c.now, PerAddress: 1, MaxTracked: 2})
	_, ok := th.Attempt("a", "x")
	require.True(t, ok)
	c.add(time.Minute)
	_, ok = th.Attempt("b", "x")
	require.True(t, ok)
	_, ok = th.Attempt("c", "x")
	require.True(t, ok, "the stale entry of a is swept")
	_, ok = th.Attempt("b", "x")
	require.False(t, ok, "b still limits")
}
