package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/queenforgo/queen/gen/client"
)

// parkedSetupWorkers bounds the concurrent requests that prepare the queues.
const parkedSetupWorkers = 16

// parkedArrival is a parked pop's non-empty answer.
type parkedArrival struct {
	p  *popResponse
	at time.Time
}

// parkedScenario measures what idle long-polls cost: -parked pops parked
// over -parked-queues empty queues, nothing pushed, for -duration: the
// broker database's commits (xact_commit), the broker's CPU and RSS. Then,
// with the pops still parked, -wakeups cycles push one message to the first
// queue and time the answer of one of its parked pops.
func (b *bench) parkedScenario(ctx context.Context) (result, error) {
	cfg := b.cfg
	if err := raiseFileLimit(uint64(cfg.Parked) + 256); err != nil {
		return result{}, err
	}
	queues := make([]string, cfg.ParkedQueues)
	for i := range queues {
		queues[i] = b.queue("parked-" + strconv.Itoa(i))
	}
	if err := b.parkedPrepare(ctx, queues); err != nil {
		return result{}, err
	}

	// Every parked pop holds a connection: the pool must not cap them
	// (MaxConnsPerHost stays 0) and must keep them alive between polls.
	hc := newHTTPClient(cfg.Parked + 64)
	defer hc.CloseIdleConnections()
	api, err := client.NewClientWithResponses(b.base, client.WithHTTPClient(hc))
	if err != nil {
		return result{}, err
	}
	parkCtx, stopParking := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		sent    atomic.Int64 // pops whose first request is on the wire
		t       tally
		arrived = make(chan parkedArrival, 16)
	)
	defer func() {
		stopParking()
		wg.Wait()
	}()
	ms := int(cfg.ParkTimeout.Milliseconds())
	parkStart := time.Now()
	for i := range cfg.Parked {
		// First timeouts spread evenly over the second half of the
		// timeout: after that the pops time out and come back at random
		// phases, a steady trickle as from independent clients, not a
		// storm of all of them at once every timeout.
		first := ms/2 + ms/2*i/cfg.Parked
		wg.Go(func() {
			b.parkLoop(parkCtx, api, queues[i%len(queues)], first, ms, &sent, &t, arrived)
		})
	}
	if err := waitFor(ctx, 2*time.Minute, func() bool { return sent.Load() == int64(cfg.Parked) }); err != nil {
		return result{}, fmt.Errorf("%d of %d long-polls sent: %w", sent.Load(), cfg.Parked, err)
	}
	sentIn := time.Since(parkStart)
	// Let the broker park them all and settle, and PostgreSQL flush the
	// statistics of the setup, before the idle window opens.
	fmt.Fprintf(b.log, "queen-bench: parked: %d long-polls sent, settling %s\n", cfg.Parked, cfg.StatsSettle)
	sleepUntil(ctx, time.Now().Add(cfg.StatsSettle))

	res := result{
		Scenario: "parked",
		Command:  b.command("parked", "parked", "parked-queues", "park-timeout", "duration", "wakeups"),
		NoRate:   true,
		Commits:  -1,
	}
	m := b.startMeasure(ctx)
	idle := b.measureIdle(ctx, cfg.Duration)
	res.note(fmt.Sprintf("all sent in %s", sentIn.Round(100*time.Millisecond)))
	res.note(idle.String(cfg.Parked, cfg.ParkedQueues))

	// A failed cycle ends the cycles but not the row: the idle numbers
	// stand, and the note says what failed.
	lat, cycles, err := b.parkedWakeups(ctx, queues[0], arrived)
	res.Messages, res.Elapsed, res.Latency = cycles, cfg.Duration, lat
	res.note(fmt.Sprintf("%d wake-ups with every pop parked, max %s", lat.N, fmtLatency(lat.Max)))
	if err != nil {
		res.note("wake-ups stopped: " + err.Error())
	}
	res.note(t.errorNote())
	m.finishRSS(&res)
	return res, nil
}

// parkedPrepare creates the queues and leaves each with one partition and
// a cursor past its only message: empty, as consumed queues are.
func (b *bench) parkedPrepare(ctx context.Context, queues []string) error {
	next := make(chan string)
	errs := make(chan error, parkedSetupWorkers)
	var wg sync.WaitGroup
	for range parkedSetupWorkers {
		wg.Go(func() {
			var resp bytes.Buffer
			var body []byte
			params := b.popParams("", 1, time.Second, false)
			for q := range next {
				body = appendPushBody(body[:0], q, "p0", q+"-", 0, 1, "", time.Now())
				if _, err := b.push(ctx, b.base, body, &resp); err != nil {
					errs <- err
					return
				}
				p, err := b.pop(ctx, b.base, q, params, &resp)
				if err == nil && p == nil {
					err = fmt.Errorf("queue %s: the warm-up pop found nothing", q)
				}
				if err == nil {
					_, err = b.ack(ctx, b.base, "", p, &resp)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, q := range queues {
		select {
		case next <- q:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// parkLoop keeps one long-poll parked on queue until ctx ends, handing the
// messages it gets to arrived.
func (b *bench) parkLoop(ctx context.Context, api *client.ClientWithResponses, queue string, firstMS, timeoutMS int,
	sent *atomic.Int64, t *tally, arrived chan<- parkedArrival) {
	wait, batch, ms := true, 1, firstMS
	params := &client.PopQueueParams{Batch: &batch, Wait: &wait, Timeout: &ms}
	var resp bytes.Buffer
	first := true
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond+requestTimeout)
		if first {
			first = false
			rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { sent.Add(1) },
			})
		}
		res, err := api.PopQueue(rctx, queue, params)
		ms = timeoutMS
		status, err := readAnswer(res, err, &resp)
		at := time.Now()
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			t.fail(fmt.Errorf("pop: %w", err))
			sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
		case status == http.StatusOK:
			var p popResponse
			if err := json.Unmarshal(resp.Bytes(), &p); err != nil {
				t.fail(fmt.Errorf("pop: decode answer: %w", err))
				continue
			}
			select {
			case arrived <- parkedArrival{&p, at}:
			case <-ctx.Done():
				return
			}
		case status != http.StatusNoContent:
			t.fail(fmt.Errorf("pop: status %d: %s", status, excerpt(resp.Bytes())))
			sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
		}
	}
}

// parkedWakeups pushes one message at a time to queue and times, from the
// push's answer, the answer of the parked pop that gets it.
func (b *bench) parkedWakeups(ctx context.Context, queue string, arrived <-chan parkedArrival) (latency, int64, error) {
	var (
		rec        recorder
		body       []byte
		resp, ackR bytes.Buffer
		n          int64
	)
	deadline := time.Now().Add(b.cfg.Duration)
	for i := 0; i < b.cfg.Wakeups && ctx.Err() == nil && time.Now().Before(deadline); i++ {
		body = appendPushBody(body[:0], queue, "p0", queue+"-w-", int64(i), 1, "", time.Now())
		if _, err := b.push(ctx, b.base, body, &resp); err != nil {
			return rec.summary(), n, err
		}
		answered := time.Now()
		var a parkedArrival
		select {
		case a = <-arrived:
		case <-time.After(wakeupPollTimeout):
			return rec.summary(), n, fmt.Errorf("no parked pop answered push %d within %s", i, wakeupPollTimeout)
		case <-ctx.Done():
			return rec.summary(), n, ctx.Err()
		}
		rec.add(max(a.at.Sub(answered), 0))
		if _, err := b.ack(ctx, b.base, "", a.p, &ackR); err != nil {
			return rec.summary(), n, err
		}
		n++
		// The ack's release wakes the queue's other parked pops, which
		// look, find nothing and park again: let that pass before the
		// next push.
		sleepUntil(ctx, time.Now().Add(wakeupPark))
	}
	return rec.summary(), n, nil
}

// idleSample is what one idle window measured.
type idleSample struct {
	Window  time.Duration
	Commits int64   // xact_commit delta, -1 unknown
	CPU     float64 // broker cores busy on average, -1 unknown
	RSS     int64   // broker VmRSS at the end, bytes, -1 unknown
}

// measureIdle reads xact_commit and the broker's CPU time at both ends of
// a window. PostgreSQL backends flush their counters about once a second
// while busy and within 10 s when idle; both ends lag alike in a steady
// state, so the delta over the window is the steady rate.
func (b *bench) measureIdle(ctx context.Context, window time.Duration) idleSample {
	s := idleSample{Window: window, Commits: -1, CPU: -1, RSS: -1}
	c0, cpu0 := b.xactCommit(ctx), cpuTicks(b.cfg.PID)
	sleepUntil(ctx, time.Now().Add(window))
	c1, cpu1 := b.xactCommit(ctx), cpuTicks(b.cfg.PID)
	if c0 >= 0 && c1 >= 0 {
		s.Commits = max(c1-c0-1, 0) // less the bench's own first read
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		s.CPU = float64(cpu1-cpu0) / clockTicks / window.Seconds()
	}
	if b.cfg.PID > 0 {
		if rss, _, err := readRSS(b.cfg.PID); err == nil {
			s.RSS = rss
		}
	}
	return s
}

func (s idleSample) String(parked, queues int) string {
	parts := []string{fmt.Sprintf("%d long-polls parked over %d queues, idle %s:", parked, queues, s.Window)}
	if s.Commits >= 0 {
		parts = append(parts, fmt.Sprintf("%.1f commits/s (%d)", float64(s.Commits)/s.Window.Seconds(), s.Commits))
	} else {
		parts = append(parts, "commits not measured (no -pg)")
	}
	if s.CPU >= 0 {
		parts = append(parts, fmt.Sprintf("broker CPU %.1f%% of a core", 100*s.CPU))
	}
	if s.RSS >= 0 {
		parts = append(parts, fmt.Sprintf("RSS %.0f MB", float64(s.RSS)/(1<<20)))
	}
	return strings.Join(parts, " ")
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux this bench runs on.
const clockTicks = 100

// cpuTicks is utime + stime of pid from /proc/<pid>/stat, or -1.
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	return parseCPUTicks(string(raw))
}

// parseCPUTicks reads fields 14 and 15 of a /proc/<pid>/stat line; the
// command name (field 2) may hold spaces, so fields count from its ")".
func parseCPUTicks(stat string) int64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return u + s
}

// raiseFileLimit makes sure this process may hold need descriptors (one
// per parked connection), raising the soft limit up to the hard one.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("-parked needs %d open files, the hard limit is %d (ulimit -Hn; the broker needs as many)", need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise the open-file limit to %d: %w", need, err)
	}
	return nil
}

// waitFor polls cond until it holds, ctx ends or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", limit)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleepUntil(ctx, time.Now().Add(20*time.Millisecond))
	}
	return nil
}
