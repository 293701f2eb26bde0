package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// result is one row of the table.
type result struct {
	Scenario string
	Command  string
	Messages int64         // what msg/s counts
	Elapsed  time.Duration // the window msg/s divides by
	Latency  latency
	NoRate   bool    // msg/s means nothing for this run (wakeup)
	PushRate float64 // msg/s pushed, for the ratio to the ceiling; 0 for none
	Ratio    float64 // PushRate / ceiling rate; 0 for none
	RatioMin float64 // PushRate / ceiling-min rate; 0 for none
	Commits  int64   // xact_commit delta; -1 when unknown
	PeakRSS  int64   // bytes, highest VmRSS sampled during the run; -1 when unknown
	HWM      int64   // bytes, VmHWM at the end of the run; -1 when unknown
	Notes    []string
}

func (r *result) note(s string) {
	if s != "" {
		r.Notes = append(r.Notes, s)
	}
}

func (r result) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

func (r result) summaryLine() string {
	return fmt.Sprintf("%s: %d messages in %s, %s msg/s, p50 %s, p99 %s",
		r.Scenario, r.Messages, r.Elapsed.Round(time.Millisecond), fmtRate(r), fmtLatency(r.Latency.P50), fmtLatency(r.Latency.P99))
}

// command is the command line that repeats a run: the scenario and the
// flags that shape it, with their current values.
func (b *bench) command(scenario string, flags ...string) string {
	fs := newFlagSet(&b.cfg, io.Discard)
	parts := []string{"queen-bench", scenario}
	for _, name := range flags {
		if f := fs.Lookup(name); f != nil {
			parts = append(parts, "-"+name+" "+f.Value.String())
		}
	}
	return strings.Join(parts, " ")
}

// applyCeiling fills the ratios of every row with a push rate to the
// ceilings that ran.
func applyCeiling(results []result) {
	var ceiling, minimal float64
	for _, r := range results {
		switch r.Scenario {
		case "ceiling":
			ceiling = r.rate()
		case "ceiling-min":
			minimal = r.rate()
		}
	}
	for i := range results {
		if results[i].PushRate <= 0 {
			continue
		}
		if ceiling > 0 {
			results[i].Ratio = results[i].PushRate / ceiling
		}
		if minimal > 0 {
			results[i].RatioMin = results[i].PushRate / minimal
		}
	}
}

// measurement samples the broker's RSS during a run and reads xact_commit
// before and after it.
type measurement struct {
	b       *bench
	commits int64 // -1: unknown
	stop    chan struct{}
	done    sync.WaitGroup
	peak    int64
	cpu     cpuSample // at the start of the measured phase
}

// startMeasure starts the probes just before a run's measured phase.
func (b *bench) startMeasure(ctx context.Context) *measurement {
	m := &measurement{b: b, commits: b.xactCommit(ctx), stop: make(chan struct{}), peak: -1, cpu: b.sampleCPU()}
	if b.cfg.PID > 0 {
		m.done.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				if rss, _, err := readRSS(b.cfg.PID); err == nil {
					m.peak = max(m.peak, rss)
				}
				select {
				case <-m.stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	return m
}

// finish stops the probes and writes them into res. PostgreSQL backends
// flush their counters at most once a second, and an idle one only after
// up to 10 s, so xact_commit is read after -stats-settle.
func (m *measurement) finish(ctx context.Context, res *result) {
	m.finishRSS(res)
	if m.commits < 0 {
		return
	}
	if m.b.cfg.StatsSettle > 0 {
		fmt.Fprintf(m.b.log, "queen-bench: %s: waiting %s for PostgreSQL statistics\n", res.Scenario, m.b.cfg.StatsSettle)
		sleepUntil(ctx, time.Now().Add(m.b.cfg.StatsSettle))
	}
	if after := m.b.xactCommit(context.WithoutCancel(ctx)); after >= 0 {
		// Less the read that took the first sample.
		res.Commits = max(after-m.commits-1, 0)
	}
}

// finishRSS stops the probes and writes the RSS columns into res; the
// commit count stays unknown.
func (m *measurement) finishRSS(res *result) {
	res.note(cpuNote(m.cpu, m.b.sampleCPU(), res.Messages))
	close(m.stop)
	m.done.Wait()
	res.PeakRSS, res.HWM, res.Commits = m.peak, -1, -1
	if m.b.cfg.PID > 0 {
		if _, hwm, err := readRSS(m.b.cfg.PID); err == nil {
			res.HWM = hwm
		}
	}
}

// xactCommit is pg_stat_database.xact_commit of the -pg database, or -1.
func (b *bench) xactCommit(ctx context.Context) int64 {
	if b.pg == nil {
		return -1
	}
	var n int64
	err := b.pg.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		fmt.Fprintf(b.log, "queen-bench: read xact_commit: %v\n", err)
		return -1
	}
	return n
}

// openStatsPool connects to -pg with one connection and describes the
// server's durability for the header.
func openStatsPool(ctx context.Context, pgURL string) (*pgxpool.Pool, string, error) {
	pcfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, "", fmt.Errorf("-pg: %w", err)
	}
	pcfg.MaxConns = 1
	pcfg.ConnConfig.RuntimeParams["application_name"] = "queen-bench"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, "", fmt.Errorf("-pg: %w", err)
	}
	var version, db, syncCommit, fsync, walSync, sharedBuffers string
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_database(),
		current_setting('synchronous_commit'), current_setting('fsync'),
		current_setting('wal_sync_method'), current_setting('shared_buffers')`).
		Scan(&version, &db, &syncCommit, &fsync, &walSync, &sharedBuffers)
	if err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("-pg: %w", err)
	}
	info := fmt.Sprintf("PostgreSQL %s, database %s, synchronous_commit=%s, fsync=%s, wal_sync_method=%s, shared_buffers=%s",
		version, db, syncCommit, fsync, walSync, sharedBuffers)
	return pool, info, nil
}

// readRSS reads VmRSS and VmHWM (bytes) from /proc/<pid>/status.
func readRSS(pid int) (rss, hwm int64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus picks VmRSS and VmHWM out of a /proc/<pid>/status text.
func parseStatus(r io.Reader) (rss, hwm int64, err error) {
	rss, hwm = -1, -1
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, 0, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if rss < 0 || hwm < 0 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM (a kernel thread?)")
	}
	return rss, hwm, nil
}

// header describes the target and the machine, above the table.
func (b *bench) header() []string {
	lines := []string{
		brokersLine(b.bases, b.cfg.PID),
		fmt.Sprintf("client %d CPUs, %s/%s, %s, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), runtime.GOMAXPROCS(0)),
	}
	if b.pgInfo != "" {
		lines = append(lines, b.pgInfo)
	} else {
		lines = append(lines, "no -pg: msgs/commit and the ceiling are not measured")
	}
	return lines
}

// brokersLine names the broker, or the brokers that producers and
// consumers were spread over.
func brokersLine(bases []string, pid int) string {
	if len(bases) == 1 {
		return fmt.Sprintf("broker %s%s", bases[0], pidNote(pid))
	}
	return fmt.Sprintf("%d brokers on one database, producers and consumers spread round-robin: %s%s",
		len(bases), strings.Join(bases, ", "), pidNote(pid))
}

func pidNote(pid int) string {
	if pid == 0 {
		return " (no -pid: RSS not measured)"
	}
	return fmt.Sprintf(" (pid %d)", pid)
}

// writeReport prints the header and one Markdown table row per run.
func writeReport(w io.Writer, header []string, results []result) {
	for _, h := range header {
		fmt.Fprintln(w, "- "+h)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | command | msg/s | p50 | p99 | msgs/commit | broker peak RSS MB | vs ceiling | vs ceiling-min | notes |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Command, fmtRate(r), fmtLatency(r.Latency.P50), fmtLatency(r.Latency.P99),
			fmtPerCommit(r), fmtRSS(r), fmtRatio(r.Ratio), fmtRatio(r.RatioMin), strings.Join(r.Notes, "; "))
	}
}

func fmtRate(r result) string {
	if r.NoRate {
		return "–"
	}
	return strconv.FormatFloat(r.rate(), 'f', 0, 64)
}

// fmtLatency prints milliseconds with three significant digits or so.
func fmtLatency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

func fmtPerCommit(r result) string {
	if r.Commits < 0 {
		return "–"
	}
	if r.Commits == 0 {
		return "∞"
	}
	return strconv.FormatFloat(float64(r.Messages)/float64(r.Commits), 'f', 1, 64)
}

func fmtRSS(r result) string {
	if r.PeakRSS < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f (HWM %.0f)", float64(r.PeakRSS)/(1<<20), float64(r.HWM)/(1<<20))
}

func fmtRatio(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
