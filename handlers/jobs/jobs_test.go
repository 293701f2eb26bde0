package jobs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/metrics"
)

// The lifecycle tests count the goroutines of every Services in the
// process, so they do not call t.Parallel (parallel tests only start once
// the sequential ones have finished).

// The loops run the jobs on their timers; Stop ends them all, writes the
// last counters, and nothing runs afterwards.
func TestLoopsRunTheJobsUntilStop(t *testing.T) {
	records := make(chan slog.Record, 64)
	reg := metrics.New()
	var samples, samplesAfterStop atomic.Int64
	var stopped atomic.Bool
	b := setup(t, Config{
		Metrics: reg, Hostname: "loops", Logger: slog.New(signalHandler{records}),
		SampleInterval: 20 * time.Millisecond, RetentionInterval: 20 * time.Millisecond,
		EvictionInterval: 20 * time.Millisecond, CleanupInterval: 20 * time.Millisecond,
		JobQueueFunc: func() int {
			samples.Add(1)
			if stopped.Load() {
				samplesAfterStop.Add(1)
			}
			return 0
		},
	})
	ctx := t.Context()
	now := time.Now()
	q := b.queue("ret", queueOpts{enabled: true, retention: 60})
	b.messages(b.partition(q, "p"), 2, now.Add(-time.Hour))
	ev := b.queue("ev", queueOpts{maxWait: 60})
	b.messages(b.partition(ev, "p"), 3, now.Add(-time.Hour))
	b.exec(`INSERT INTO queen.worker_metrics (bucket, hostname, port, pid) VALUES ($1, 'old', 1, 1)`, now.Add(-30*24*time.Hour))

	before := loopGoroutines()
	b.svc.Start(ctx)
	b.svc.Start(ctx) // idempotent: no second set of loops
	require.Equal(t, before+loopCount, loopGoroutines())

	kinds := map[string]string{}
	deadline := time.After(20 * time.Second)
	for len(kinds) < 2 {
		select {
		case r := <-records:
			if r.Message == "messages deleted" {
				kinds[attr(r, "kind")] = attr(r, "count")
			}
		case <-deadline:
			t.Fatalf("the retention and eviction loops did not run: %v", kinds)
		}
	}
	require.Equal(t, map[string]string{KindRetention: "2", KindEviction: "3"}, kinds)
	eventually(t, "the cleanup loop to delete the old metrics row", func() bool {
		return b.count(`SELECT count(*) FROM queen.worker_metrics WHERE hostname = 'old'`) == 0
	})
	eventually(t, "the collector to sample", func() bool { return samples.Load() >= 3 })

	push(reg, "ret", 4)
	b.svc.Stop()
	stopped.Store(true)
	// Stop waited for every loop to call Done; the goroutines then return.
	eventually(t, "the loop goroutines to exit", func() bool { return loopGoroutines() == before })
	require.Equal(t, 4, b.count(`SELECT push_messages FROM queen.worker_metrics_summary`), "Stop wrote the last counters")
	b.svc.Stop() // idempotent
	b.svc.Start(ctx)
	require.Equal(t, before, loopGoroutines(), "no loops after Stop")
	require.Zero(t, samplesAfterStop.Load())
	require.Equal(t, 4, b.count(`SELECT push_messages FROM queen.worker_metrics_summary`))
}

// Stop waits for a job that is running, and only then writes the last
// minute. The job here is a retention run held up in its logging.
func TestStopWaitsForTheRunningJob(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var finished atomic.Bool
	reg := metrics.New()
	b := setup(t, Config{
		Metrics: reg, Hostname: "wait", RetentionInterval: time.Millisecond,
		Logger: slog.New(blockingHandler{entered: entered, release: release, finished: &finished}),
	})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the pool closes, should the test fail early
	q := b.queue("ret", queueOpts{enabled: true, retention: 60})
	b.messages(b.partition(q, "p"), 1, time.Now().Add(-time.Hour))
	before := loopGoroutines()
	b.svc.Start(t.Context())
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the retention loop did not run")
	}
	push(reg, "q", 1)
	stopDone := make(chan struct{})
	go func() {
		b.svc.Stop()
		close(stopDone)
	}()
	eventually(t, "Stop to cancel the loops", func() bool {
		b.svc.mu.Lock()
		defer b.svc.mu.Unlock()
		return b.svc.stopped
	})
	// A bounded look for the negative: a Stop that does not wait returns
	// within milliseconds of cancelling; a correct one cannot return here.
	select {
	case <-stopDone:
		t.Fatal("Stop returned while a job was still running")
	case <-time.After(300 * time.Millisecond):
	}
	require.False(t, finished.Load())
	letGo()
	select {
	case <-stopDone:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after the job finished")
	}
	require.True(t, finished.Load())
	eventually(t, "the loop goroutines to exit", func() bool { return loopGoroutines() == before })
	require.Equal(t, 1, b.count(`SELECT push_messages FROM queen.worker_metrics_summary`))
}

// blockingHandler holds up the job that logs "messages deleted" until
// release is closed.
type blockingHandler struct {
	entered  chan struct{}
	release  chan struct{}
	finished *atomic.Bool
}

func (h blockingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h blockingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "messages deleted" {
		return nil
	}
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-h.release
	h.finished.Store(true)
	return nil
}

func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingHandler) WithGroup(string) slog.Handler      { return h }

// Cancelling the context given to Start ends the loops too; Stop afterwards
// still returns and writes the last counters. Stop without Start writes
// nothing.
func TestCancelEndsTheLoops(t *testing.T) {
	reg := metrics.New()
	b := setup(t, Config{Metrics: reg, Hostname: "cancel", SampleInterval: time.Millisecond})
	before := loopGoroutines()
	ctx, cancel := context.WithCancel(t.Context())
	b.svc.Start(ctx)
	require.Equal(t, before+loopCount, loopGoroutines())
	cancel()
	// The loops see the cancellation on their own goroutines.
	eventually(t, "the loops to end", func() bool { return loopGoroutines() == before })
	push(reg, "q", 3)
	b.svc.Stop()
	require.Equal(t, 3, b.count(`SELECT push_messages FROM queen.worker_metrics_summary`))

	reg2 := metrics.New()
	idle := setup(t, Config{Metrics: reg2, Hostname: "never-started"})
	push(reg2, "q", 5)
	idle.svc.Stop()
	idle.svc.Start(t.Context())
	require.Equal(t, before, loopGoroutines())
	require.Zero(t, idle.count(`SELECT count(*) FROM queen.worker_metrics`))
}

// loopCount is how many loops Start launches: the collector, retention,
// eviction, the metrics cleanup and the statistics watch.
const loopCount = 5
