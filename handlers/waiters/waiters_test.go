package waiters

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotifyWakesOnlyMatchingWaiters(t *testing.T) {
	t.Parallel()
	r := New[string]()
	a := r.Register("q:a", "ns:x")
	b := r.Register("q:b")
	r.Notify("ns:x")
	r.Notify("ns:x") // a second wake-up never blocks the notifier
	require.Len(t, a.C, 1)
	require.Empty(t, b.C)
	require.Equal(t, 1, r.Len("q:a"))
	a.Cancel()
	a.Cancel() // idempotent
	require.Zero(t, r.Len("q:a"))
	require.Zero(t, r.Len("ns:x"))
	r.Notify("q:a") // nobody waits: no effect
	b.Cancel()
	require.Empty(t, r.byKey)
}

func TestNotifyMatchingWakesEveryMatchingKey(t *testing.T) {
	t.Parallel()
	r := New[[2]string]()
	a := r.Register([2]string{"t1", "orders"})
	b := r.Register([2]string{"t2", "orders"}, [2]string{"t2", "billing"})
	c := r.Register([2]string{"t1", "billing"})
	r.NotifyMatching(func(k [2]string) bool { return k[1] == "orders" })
	r.NotifyMatching(func(k [2]string) bool { return k[1] == "orders" }) // never blocks
	require.Len(t, a.C, 1)
	require.Len(t, b.C, 1)
	require.Empty(t, c.C)
}

func TestKeysListsKeysWithParkedWaiters(t *testing.T) {
	t.Parallel()
	r := New[string]()
	require.Empty(t, r.Keys(nil))
	a := r.Register("q:a")
	b := r.Register("q:a", "q:b")
	require.ElementsMatch(t, []string{"q:a", "q:b"}, r.Keys(nil))
	b.Cancel()
	require.Equal(t, []string{"x", "q:a"}, r.Keys([]string{"x"}))
	a.Cancel()
	require.Empty(t, r.Keys(nil))
}

func TestRegisterFuncCallsItsFunctionOnEveryNotification(t *testing.T) {
	t.Parallel()
	r := New[string]()
	calls := 0
	a := r.RegisterFunc(func() { calls++ }, "q:a", "ns:x")
	b := r.Register("q:a")
	r.Notify("q:a")
	r.NotifyMatching(func(k string) bool { return k == "ns:x" })
	require.Equal(t, 2, calls)
	require.Nil(t, a.C)
	require.Len(t, b.C, 1)
	a.Cancel()
	r.Notify("q:a")
	require.Equal(t, 2, calls)
	b.Cancel()
	require.Empty(t, r.byKey)
}

func TestNotifyLimitWakesNOfEachClassAndEveryOther(t *testing.T) {
	t.Parallel()
	r := New[string]()
	due := map[string]bool{}
	classed := func(name, class string) *Waiter[string] {
		return r.RegisterClass(class, func(any) bool {
			fresh := !due[name]
			due[name] = true
			return fresh
		}, "q:a")
	}
	for _, n := range []string{"x1", "x2", "x3"} {
		classed(n, "x")
	}
	for _, n := range []string{"y1", "y2"} {
		classed(n, "y")
	}
	plain := r.Register("q:a")

	require.Equal(t, map[any]int{"x": 1, "y": 1}, r.NotifyLimit("q:a", 1, nil))
	require.Len(t, plain.C, 1, "a waiter without a class is always woken")
	count := func(prefix byte) (n int) {
		for k, d := range due {
			if d && k[0] == prefix {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, count('x'))
	require.Equal(t, 1, count('y'))

	// Those already woken do not count: the next one wakes fresh waiters.
	require.Equal(t, map[any]int{"x": 2, "y": 1}, r.NotifyLimit("q:a", 5, nil), "the new wake-ups of each class")
	require.Equal(t, 3, count('x'))
	require.Equal(t, 2, count('y'))
	r.Notify("q:b") // another key: nothing
}

// The i-th new wake-up of each class is offered hint(i): the waiters of a
// class get different hints, each class the same ones. A waiter already
// woken is offered the hint of the next new wake-up, and a wake-up for
// anything (Notify) offers none.
func TestNotifyLimitOffersEachClassTheHintsInTurn(t *testing.T) {
	t.Parallel()
	r := New[string]()
	got := map[string][]any{}
	due := map[string]bool{}
	for _, name := range []string{"x1", "x2", "x3", "y1", "y2"} {
		r.RegisterClass(name[:1], func(h any) bool {
			got[name] = append(got[name], h)
			fresh := !due[name]
			due[name] = true
			return fresh
		}, "q:a")
	}
	hints := []any{"p1", "p2"}
	require.Equal(t, map[any]int{"x": 2, "y": 2}, r.NotifyLimit("q:a", 2, func(i int) any { return hints[i] }))
	first := func(class string) (out []any) {
		for name, hs := range got {
			if name[:1] == class {
				out = append(out, hs[0])
			}
		}
		return out
	}
	require.ElementsMatch(t, []any{"p1", "p2"}, first("x"), "each new wake-up of a class its own hint")
	require.ElementsMatch(t, []any{"p1", "p2"}, first("y"), "every class the same hints")

	clear(got)
	r.Notify("q:a")
	require.Len(t, got, 5)
	for _, hs := range got {
		require.Equal(t, []any{nil}, hs, "Notify offers no hint")
	}
}

func TestNotifyOneWakesOneWaiter(t *testing.T) {
	t.Parallel()
	r := New[string]()
	require.False(t, r.NotifyOne("q:a"), "nobody waits")
	a := r.Register("q:a")
	b := r.Register("q:a")
	require.True(t, r.NotifyOne("q:a"))
	require.Equal(t, 1, len(a.C)+len(b.C))
}

// NotifyOneHint gives the hint to one waiter that takes it as new, and to
// no other; with none left to take it, it wakes nobody.
func TestNotifyOneHintWakesOneWaiterThatTakesIt(t *testing.T) {
	t.Parallel()
	r := New[string]()
	got := map[string]any{}
	for _, name := range []string{"a", "b"} {
		r.RegisterClass("c", func(h any) bool {
			if _, due := got[name]; due {
				return false
			}
			got[name] = h
			return true
		}, "q:a")
	}
	plain := r.Register("q:a")
	require.True(t, r.NotifyOneHint("q:a", "p1"))
	require.Len(t, got, 1)
	require.True(t, r.NotifyOneHint("q:a", "p2"))
	require.ElementsMatch(t, []any{"p1", "p2"}, []any{got["a"], got["b"]}, "each its own hint")
	require.False(t, r.NotifyOneHint("q:a", "p3"), "both woken already")
	require.Empty(t, plain.C, "a waiter without a class is not offered hints")
}

// A busy waiter is offered a wake-up only when the idle waiters of its
// class do not take it. (Repeated:
// the waiters are visited in the map's order, which varies.)
func TestBusyWaitersAreOfferedWhatIdleOnesLeave(t *testing.T) {
	t.Parallel()
	for range 20 {
		r := New[string]()
		got := map[string]any{}
		ws := map[string]*Waiter[string]{}
		for _, name := range []string{"b1", "b2", "b3", "b4", "idle"} {
			ws[name] = r.RegisterClass("c", func(h any) bool {
				if _, due := got[name]; due {
					return false
				}
				got[name] = h
				return true
			}, "q:a")
			ws[name].SetBusy(name != "idle")
		}
		hints := []any{"p1", "p2"}
		hint := func(i int) any { return hints[i] }
		require.Equal(t, map[any]int{"c": 1}, r.NotifyLimit("q:a", 1, hint))
		require.Equal(t, map[string]any{"idle": "p1"}, got, "the idle waiter first")
		require.Equal(t, map[any]int{"c": 2}, r.NotifyLimit("q:a", 2, hint), "busy ones when the idle ones are woken")
		require.Len(t, got, 3)
	}
}

// A hand-on (NotifyOneHint) goes to an idle waiter when one takes it, and
// to a busy one when none does: the busy one acts on it after what it is
// doing, instead of the caller waking every pop of the key. (Repeated: the
// waiters are visited in the map's order, which varies.)
func TestNotifyOneHintOffersBusyWaitersWhatIdleOnesLeave(t *testing.T) {
	t.Parallel()
	for range 20 {
		r := New[string]()
		got := map[string]any{}
		for _, name := range []string{"b1", "b2", "idle"} {
			w := r.RegisterClass("c", func(h any) bool {
				if _, due := got[name]; due {
					return false
				}
				got[name] = h
				return true
			}, "q:a")
			w.SetBusy(name != "idle")
		}
		require.True(t, r.NotifyOneHint("q:a", "p1"))
		require.Equal(t, map[string]any{"idle": "p1"}, got, "the idle waiter first")
		require.True(t, r.NotifyOneHint("q:a", "p2"), "a busy one when the idle one is woken")
		require.Len(t, got, 2)
		require.True(t, r.NotifyOneHint("q:a", "p3"))
		require.False(t, r.NotifyOneHint("q:a", "p4"), "all woken")
	}
}
