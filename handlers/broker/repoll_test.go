package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parkPop starts a long-poll and returns where its answer arrives.
func (tb *testBundle) parkPop(req PopRequest) <-chan *PopResult {
	tb.t.Helper()
	timeout := time.Minute
	req.Wait, req.Timeout = true, &timeout
	got := make(chan *PopResult, 1)
	go func() {
		r, _ := tb.b.Pop(tb.t.Context(), req)
		got <- r
	}()
	return got
}

// unlinked is a second broker on the same database with no notifier link
// to tb: what it commits wakes nobody on tb.
func (tb *testBundle) unlinked() *Broker {
	tb.t.Helper()
	other := New(Config{Pool: tb.pool, RepollInterval: time.Hour})
	require.NoError(tb.t, other.Start(tb.t.Context()))
	tb.t.Cleanup(func() { require.NoError(tb.t, other.Stop(context.Background())) })
	return other
}

// waitParked waits until n pops are parked on the look key of req.
func (tb *testBundle) waitParked(req PopRequest, n int) {
	tb.t.Helper()
	k := tb.b.plan(req).lookKey()
	k.tenant = DefaultTenant
	require.Eventually(tb.t, func() bool { return tb.b.looks.Len(k) == n }, 10*time.Second, 2*time.Millisecond)
}

// Many pops parked on one key cost one shared look, not one each, and a
// key found ready wakes its pops, who claim. Looks are driven by hand here
// (the interval is an hour), so the counts are exact.
func TestParkedPopsShareOneLook(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "shared")
	ctx := t.Context()

	queueMode := PopRequest{Queue: "shared"}
	group := PopRequest{Queue: "shared", Group: "g1"}
	answers := make(chan *PopResult, 30)
	for range 20 {
		go func() { answers <- <-tb.parkPop(queueMode) }()
	}
	for range 3 {
		go func() { answers <- <-tb.parkPop(group) }()
	}
	tb.waitParked(queueMode, 20)
	tb.waitParked(group, 3)

	require.NoError(t, tb.b.repollOnce(ctx))
	require.EqualValues(t, 1, tb.b.repolled.statements.Load(), "one statement for every parked pop")
	require.EqualValues(t, 2, tb.b.repolled.keys.Load(), "one key per (queue, group), not per pop")
	require.Zero(t, tb.b.repolled.woken.Load(), "an empty queue wakes nobody")

	// Stored by a broker that announces nothing to this one: only the
	// shared look can find it.
	_, err := tb.unlinked().Push(ctx, DefaultTenant, []PushItem{item("shared", "", "m1", `{"n":1}`)})
	require.NoError(t, err)
	require.NoError(t, tb.b.repollOnce(ctx))
	require.EqualValues(t, 2, tb.b.repolled.statements.Load())
	require.EqualValues(t, 2, tb.b.repolled.woken.Load(), "both keys have m1 to claim")

	// One pop of each key gets m1; the others park again.
	var delivered []string
	for range 2 {
		select {
		case r := <-answers:
			require.NotNil(t, r)
			require.Len(t, r.Messages, 1)
			require.Equal(t, "m1", r.Messages[0].TransactionID)
			delivered = append(delivered, r.Group)
		case <-time.After(10 * time.Second):
			t.Fatal("a woken pop did not deliver m1")
		}
	}
	require.ElementsMatch(t, []string{QueueModeGroup, "g1"}, delivered)
	tb.waitParked(queueMode, 19)
	tb.waitParked(group, 2)
}

// A lease that expires announces nothing: the shared look finds it, and
// the pop parked behind it gets the message again.
func TestParkedPopGetsExpiredLease(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	ctx := t.Context()
	opts := QueueOptionsDefault()
	opts.LeaseTime = 1
	_, _, err := tb.b.Configure(ctx, "", "leased", "", "", opts)
	require.NoError(t, err)
	tb.push(item("leased", "", "m1", ""))
	first := tb.pop(PopRequest{Queue: "leased"})
	require.NotNil(t, first)

	req := PopRequest{Queue: "leased"}
	got := tb.parkPop(req)
	tb.waitParked(req, 1)
	var r *PopResult
	require.Eventually(t, func() bool {
		require.NoError(t, tb.b.repollOnce(ctx))
		select {
		case r = <-got:
			return true
		default:
			return false
		}
	}, 20*time.Second, 20*time.Millisecond)
	require.NotNil(t, r)
	require.Equal(t, "m1", r.Messages[0].TransactionID)
	require.NotEqual(t, first.LeaseID, r.LeaseID)
}

// A delayed message's push wakes the parked pop too early (it finds
// nothing due and parks again); the shared look wakes it when it is due.
func TestParkedPopGetsDelayedMessageWhenDue(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *Config) { c.RepollInterval = time.Hour })
	ctx := t.Context()
	opts := QueueOptionsDefault()
	opts.DelayedProcessing = 1
	_, _, err := tb.b.Configure(ctx, "", "later", "", "", opts)
	require.NoError(t, err)

	req := PopRequest{Queue: "later"}
	got := tb.parkPop(req)
	tb.waitParked(req, 1)
	tb.push(item("later", "", "m1", ""))
	var r *PopResult
	require.Eventually(t, func() bool {
		require.NoError(t, tb.b.repollOnce(ctx))
		select {
		case r = <-got:
			return true
		default:
			return false
		}
	}, 20*time.Second, 20*time.Millisecond)
	require.NotNil(t, r)
	require.Equal(t, "m1", r.Messages[0].TransactionID)
	require.Positive(t, tb.b.repolled.woken.Load(), "the look, not the push, delivered it")
}

// The safety net, with the real loop: pops parked on a queue and on a
// namespace get what a broker without a notifier link stored.
func TestRepollLoopDeliversUnannouncedPush(t *testing.T) {
	t.Parallel()
	tb := setup(t) // the loop looks every 50 ms
	ctx := t.Context()
	_, _, err := tb.b.Configure(ctx, "", "net", "ns1", "", QueueOptionsDefault())
	require.NoError(t, err)
	byQueue := PopRequest{Queue: "net"}
	byNamespace := PopRequest{Namespace: "ns1", Group: "audit"}
	fromQueue, fromNamespace := tb.parkPop(byQueue), tb.parkPop(byNamespace)
	tb.waitParked(byQueue, 1)
	tb.waitParked(byNamespace, 1)

	_, err = tb.unlinked().Push(ctx, DefaultTenant, []PushItem{item("net", "p1", "m1", "")})
	require.NoError(t, err)
	for _, got := range []<-chan *PopResult{fromQueue, fromNamespace} {
		select {
		case r := <-got:
			require.NotNil(t, r)
			require.Equal(t, "m1", r.Messages[0].TransactionID)
		case <-time.After(20 * time.Second):
			t.Fatal("the re-poll loop never delivered the unannounced push")
		}
	}
}

// A pop on a key a look just found empty parks without looking, as long as
// no wake-up of any kind happened since; what it then misses (a push by an
// unlinked broker) the shared look finds, as for every parked pop.
func TestNewPopOnKnownEmptyKeyParksWithoutLooking(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "known")
	ctx := t.Context()
	req := PopRequest{Queue: "known"}
	first := tb.parkPop(req)
	tb.waitParked(req, 1)
	k := tb.b.plan(req).lookKey()
	k.tenant = DefaultTenant
	require.Eventually(t, func() bool { return tb.b.knownEmpty(k) }, 10*time.Second, 2*time.Millisecond,
		"the first pop looks and finds the key empty")
	require.Zero(t, tb.b.repolled.skipped.Load())
	second := tb.parkPop(req)
	tb.waitParked(req, 2)
	// The pop is registered as parked just before it counts the skipped
	// look, so the count may trail the registration by a moment.
	require.Eventually(t, func() bool { return tb.b.repolled.skipped.Load() == 1 }, 10*time.Second, 2*time.Millisecond,
		"the second parks on what the first saw")

	_, err := tb.unlinked().Push(ctx, DefaultTenant, []PushItem{item("known", "", "m1", "")})
	require.NoError(t, err)
	require.NoError(t, tb.b.repollOnce(ctx))
	var r *PopResult
	select {
	case r = <-first:
	case r = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the shared look did not wake the parked pops")
	}
	require.NotNil(t, r)
	require.Equal(t, "m1", r.Messages[0].TransactionID)
}

// A wake-up for the key (or one naming no exact key), new options, or age
// end what a look knew about an empty key; a wake-up for another key does
// not.
func TestKnownEmptyEndsWithAWakeUpForTheKey(t *testing.T) {
	t.Parallel()
	b := New(Config{RepollInterval: time.Minute})
	k := lookKey{tenant: DefaultTenant, queue: "a", group: QueueModeGroup}
	seen := func() { b.sawEmpty(k, b.lookStart(k)) }
	require.False(t, b.knownEmpty(k))
	seen()
	require.True(t, b.knownEmpty(k))
	b.ApplyQueuesReady([]QueueKey{{Tenant: DefaultTenant, Queue: "elsewhere"}})
	require.True(t, b.knownEmpty(k), "a busy queue elsewhere")
	b.ApplyQueuesReady([]QueueKey{{Tenant: DefaultTenant, Queue: "a"}})
	require.False(t, b.knownEmpty(k), "a wake-up for the queue")

	seen()
	b.ApplyQueuesReady([]QueueKey{{Tenant: AnyTenant, Queue: "other"}})
	require.False(t, b.knownEmpty(k), "an announcement that names no tenant")

	seen()
	b.ApplyQueueChanged([]QueueKey{{Tenant: DefaultTenant, Queue: "a"}})
	require.False(t, b.knownEmpty(k), "new options")

	seen()
	b.rounds.Add(1)
	require.True(t, b.knownEmpty(k), "the re-poll round after the look")
	b.rounds.Add(1)
	require.False(t, b.knownEmpty(k), "the round after that did not see it empty")

	old := b.lookStart(k)
	old.at = old.at.Add(-staleEmptyRounds * time.Minute)
	b.sawEmpty(k, old)
	require.False(t, b.knownEmpty(k), "older than the clock's limit: a re-poll that stopped")
	b.forgetStaleEmpty(b.rounds.Load())
	require.Empty(t, b.empty)
}

// A shared re-poll late on the clock (its pool busy) does not expire what
// its last round saw: pops re-issued meanwhile on the empty key park
// without looking, instead of each making the look that keeps the pool
// busy and the next round later still.
func TestKnownEmptyOutlivesALateRepoll(t *testing.T) {
	t.Parallel()
	tb := setupWakeOnly(t, "late")
	ctx := t.Context()
	timeout := time.Hour
	req := PopRequest{Queue: "late", Wait: true, Timeout: &timeout}
	parked, p, err := tb.b.PopStart(ctx, req)
	require.NoError(t, err)
	require.Nil(t, parked)
	require.NotNil(t, p)
	t.Cleanup(p.Cancel)
	require.NoError(t, tb.b.repollOnce(ctx))
	require.EqualValues(t, 1, tb.b.repolled.statements.Load())

	// The round's record, as the clock sees it three intervals later with
	// no round started since (the next one queued behind a busy pool).
	k := p.look
	tb.b.emptyMu.Lock()
	e := tb.b.empty[k]
	e.at = e.at.Add(-3 * time.Hour)
	tb.b.empty[k] = e
	tb.b.emptyMu.Unlock()

	const reissued = 20
	for range reissued {
		res, q, err := tb.b.PopStart(ctx, req)
		require.NoError(t, err)
		require.Nil(t, res)
		require.NotNil(t, q)
		q.Cancel()
	}
	require.EqualValues(t, reissued, tb.b.repolled.skipped.Load(),
		"every re-issued pop parks on what the last round saw, none looks")
}
