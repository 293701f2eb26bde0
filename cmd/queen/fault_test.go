package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/sql/pgtest"
)

// waitFor polls cond (every few ms) until it holds or the deadline passes.
func waitFor(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	end := time.After(deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-end:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// producers push batches of 10 to their own partition each, in order, until
// ctx ends or the broker stops answering 201.
func producers(ctx context.Context, t testing.TB, l *ledger, url *string, mu *sync.Mutex, queue string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			part := fmt.Sprintf("p%d", p)
			for seq := 0; ctx.Err() == nil; seq += 10 {
				items := make([]pushItem, 10)
				for i := range items {
					id := fmt.Sprintf("%s-%07d", part, seq+i)
					items[i] = pushItem{Queue: queue, Partition: part, TransactionID: id, Payload: map[string]any{"id": id}}
				}
				mu.Lock()
				u := *url
				mu.Unlock()
				ok, err := l.push(ctx, u, items)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return // the broker is gone or refusing: this producer stops
				}
			}
		})
	}
	return &wg
}

// The broker is SIGKILLed twice during a push load: once while pushes are
// committed and spooled (push maintenance on, so both paths are live), once
// in the middle of replaying the spool. After the restarts every push that
// was answered `queued` or `buffered` is delivered exactly once, in order
// per partition; nothing is delivered twice.
func TestFaultBrokerKilledDuringPushLoad(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Binary(t, "cmd/queen")
	env := brokerEnv(t, pgtest.NewDB(t), t.TempDir(), "FILE_BUFFER_MAX_BATCH=20")
	b := startBroker(t, bin, env)
	l := newLedger()
	var mu sync.Mutex
	url := b.url

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := producers(ctx, t, l, &url, &mu, "killed", 8)
	waitFor(t, "queued pushes", 20*time.Second, func() bool { return l.count("queued") >= 1500 })
	b.setMaintenance(true)
	waitFor(t, "buffered pushes", 20*time.Second, func() bool { return l.count("buffered") >= 1500 })
	b.kill() // producers are mid-request
	wg.Wait()
	cancel()

	b = startBroker(t, bin, env)
	spooled := b.pending()
	require.Positive(t, spooled, "the restarted broker found the spool")
	require.Equal(t, 1, b.logCount("spool holds records from before this start"))
	b.setMaintenance(false) // it was persisted on: the drain started held
	waitFor(t, "the replay to start", 20*time.Second, func() bool { return b.pending() < spooled })
	b.kill() // mid-replay, as far as the timing allows

	b = startBroker(t, bin, env)
	waitFor(t, "the spool to drain", 20*time.Second, func() bool { return b.pending() == 0 })
	acked, delivered := l.verify(t, consumeAll(t, b.url, "killed"))
	t.Logf("acknowledged %d (queued %d, buffered %d), delivered %d, spooled at the first kill %d",
		acked, l.count("queued"), l.count("buffered"), delivered, spooled)
}

// Graceful shutdown: the first SIGTERM makes /health say not ready, ends a
// parked long-poll with 204 at once, lets running pushes finish, flushes
// the spool and exits 0; nothing acknowledged is lost. A second SIGTERM
// while a request holds the shutdown exits at once.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Binary(t, "cmd/queen")
	env := brokerEnv(t, pgtest.NewDB(t), t.TempDir())
	b := startBroker(t, bin, env)
	l := newLedger()
	var mu sync.Mutex
	url := b.url

	longPoll := make(chan int, 1)
	go func() {
		status, _ := call(context.Background(), "GET", b.url+"/api/v1/pop/queue/empty-queue?wait=true&timeout=60000", nil)
		longPoll <- status
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := producers(ctx, t, l, &url, &mu, "graceful", 4)
	waitFor(t, "queued pushes", 20*time.Second, func() bool { return l.count("queued") >= 500 })
	b.setMaintenance(true) // half of the load goes through the spool
	waitFor(t, "buffered pushes", 20*time.Second, func() bool { return l.count("buffered") >= 500 })

	b.signal(syscall.SIGTERM)
	select {
	case status := <-longPoll:
		require.Equal(t, http.StatusNoContent, status, "the parked long-poll ends empty")
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not ended by the shutdown")
	}
	wg.Wait() // the producers stop when the listener closes
	cancel()
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the broker did not exit after SIGTERM")
	}
	require.Equal(t, 0, b.cmd.ProcessState.ExitCode(), "graceful exit")
	require.Equal(t, 1, b.logCount("shut down"))

	b = startBroker(t, bin, env)
	b.setMaintenance(false)
	waitFor(t, "the spool to drain", 20*time.Second, func() bool { return b.pending() == 0 })
	acked, delivered := l.verify(t, consumeAll(t, b.url, "graceful"))
	t.Logf("acknowledged %d (queued %d, buffered %d), delivered %d", acked, l.count("queued"), l.count("buffered"), delivered)

	// A request that never finishes its body holds the graceful shutdown;
	// the second signal ends the process at once.
	conn, err := net.Dial("tcp", b.url[len("http://"):])
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\":[")
	require.NoError(t, err)
	waitFor(t, "the held request to reach the broker", 10*time.Second, func() bool {
		status, _ := call(context.Background(), "GET", b.url+"/health", nil)
		return status == http.StatusOK
	})
	b.signal(syscall.SIGTERM)
	waitFor(t, "the drain to start", 10*time.Second, func() bool { return b.logCount("shutting down") == 1 })
	b.signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not end the process")
	}
	ws, _ := b.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled(), "killed by the second signal, not a clean exit: %v", b.cmd.ProcessState)
	require.Equal(t, syscall.SIGTERM, ws.Signal())
}
