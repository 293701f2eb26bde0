package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample p50", ms(7), 50, 7 * time.Millisecond},
		{"one sample p99", ms(7), 99, 7 * time.Millisecond},
		{"two samples p50 is the lower", ms(1, 2), 50, 1 * time.Millisecond},
		{"two samples p51 is the upper", ms(1, 2), 51, 2 * time.Millisecond},
		{"hundred p50", hundred, 50, 50 * time.Millisecond},
		{"hundred p99", hundred, 99, 99 * time.Millisecond},
		{"hundred p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p0 is the min", hundred, 0, 1 * time.Millisecond},
		{"p above 100 is clamped", hundred, 150, 100 * time.Millisecond},
		{"p below 0 is clamped", hundred, -5, 1 * time.Millisecond},
		{"ten samples p99 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, percentile(tt.sorted, tt.p))
		})
	}
}

func TestRecorderSummary(t *testing.T) {
	t.Parallel()
	a, b := &recorder{}, &recorder{}
	for _, d := range ms(5, 1, 3) {
		a.add(d)
	}
	for _, d := range ms(4, 2) {
		b.add(d)
	}
	s := mergeRecorders(a, b).summary()
	require.Equal(t, latency{N: 5, P50: 3 * time.Millisecond, P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}, s)
	// Summarizing does not reorder the recorder's own samples.
	require.Equal(t, ms(5, 1, 3), a.samples)
	require.Equal(t, latency{}, (&recorder{}).summary())
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := newBudget(250)
	require.Equal(t, 100, b.take(100))
	require.Equal(t, 100, b.take(100))
	require.Equal(t, 50, b.take(100))
	require.Equal(t, 0, b.take(100))
}

func TestNewPacer(t *testing.T) {
	t.Parallel()
	require.Nil(t, newPacer(0, 100))
	require.Equal(t, 50*time.Millisecond, newPacer(2000, 100).interval)
	// A nil pacer never waits, even past the deadline.
	var p *pacer
	require.True(t, p.wait(time.Time{}))
}

// noEnv is a lookupEnv with nothing set.
func noEnv(string) (string, bool) { return "", false }

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	withDefaults := func(f func(*config)) config {
		c := configDefault
		f(&c)
		if c.URLs == nil {
			c.URLs = []string{strings.TrimRight(c.URL, "/")}
		}
		return c
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want config
	}{
		{
			name: "scenario only",
			args: []string{"push"},
			want: withDefaults(func(c *config) { c.Scenario = "push" }),
		},
		{
			name: "scenario before flags, as make bench runs it",
			args: []string{"all", "-url", "http://127.0.0.1:6633", "-duration", "5s"},
			want: withDefaults(func(c *config) {
				c.Scenario, c.URL, c.Duration = "all", "http://127.0.0.1:6633", 5*time.Second
			}),
		},
		{
			name: "flags around the scenario",
			args: []string{"-producers", "8", "fanout", "-groups", "2", "-batch=50", "-keep"},
			want: withDefaults(func(c *config) {
				c.Scenario, c.Producers, c.Groups, c.Batch, c.Keep = "fanout", 8, 2, 50, true
			}),
		},
		{
			name: "every flag",
			args: []string{
				"mixed", "-url", "http://localhost:7000/", "-pg", "postgres://u@127.0.0.1:5432/q", "-pid", "42",
				"-duration", "1m", "-producers", "2", "-consumers", "3", "-batch", "1000", "-partitions", "1",
				"-payload-bytes", "0", "-groups", "64", "-queue", "my.queue_1", "-poll-timeout", "250ms",
				"-rate", "5000", "-wakeups", "10", "-max-messages", "7", "-stats-settle", "0s",
				"-parked", "20", "-parked-queues", "4", "-park-timeout", "5s",
				"-backlog-messages", "100", "-backlog-partitions", "10", "-pop-samples", "5",
				"-admin-samples", "2", "-admin-interval", "0s", "-backlog-reuse", "-keep",
			},
			want: config{
				Scenario: "mixed", URL: "http://localhost:7000/", URLs: []string{"http://localhost:7000"},
				PG: "postgres://u@127.0.0.1:5432/q", PID: 42,
				Duration: time.Minute, Producers: 2, Consumers: 3, Batch: 1000, Partitions: 1,
				PayloadBytes: 0, Groups: 64, Queue: "my.queue_1", PollTimeout: 250 * time.Millisecond,
				Rate: 5000, Wakeups: 10, MaxMessages: 7, StatsSettle: 0,
				Parked: 20, ParkedQueues: 4, ParkTimeout: 5 * time.Second,
				BacklogMessages: 100, BacklogPartitions: 10, PopSamples: 5, AdminSamples: 2, BacklogReuse: true, Keep: true,
			},
		},
		{
			name: "several brokers",
			args: []string{"push", "-url", "http://127.0.0.1:6632, http://127.0.0.1:6633/,http://[::1]:6634"},
			want: withDefaults(func(c *config) {
				c.Scenario, c.URL = "push", "http://127.0.0.1:6632, http://127.0.0.1:6633/,http://[::1]:6634"
				c.URLs = []string{"http://127.0.0.1:6632", "http://127.0.0.1:6633", "http://[::1]:6634"}
			}),
		},
		{
			name: "PG_* stands in for -pg",
			args: []string{"ceiling"},
			env:  map[string]string{"PG_HOST": "127.0.0.1", "PG_PORT": "54329", "PG_USER": "postgres", "PG_PASSWORD": "", "PG_DB": "queen"},
			want: withDefaults(func(c *config) {
				c.Scenario, c.PG = "ceiling", "postgres://postgres:@127.0.0.1:54329/queen?sslmode=disable"
			}),
		},
		{
			name: "-pg wins over PG_*",
			args: []string{"push", "-pg", "host=/tmp dbname=queen"},
			env:  map[string]string{"PG_HOST": "127.0.0.1"},
			want: withDefaults(func(c *config) { c.Scenario, c.PG = "push", "host=/tmp dbname=queen" }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseArgs(tt.args, env(tt.env))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseArgsProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string // every line of the error, in order
	}{
		{"no scenario", []string{"-duration", "5s"}, []string{"scenario: missing (one of wakeup, push, consume, mixed, fanout, ceiling, ceiling-min, parked, all, backlog)"}},
		{"two scenarios", []string{"push", "mixed"}, []string{`scenario: want one, got ["push" "mixed"]`}},
		{"unknown scenario", []string{"pushh"}, []string{`scenario: unknown "pushh" (one of wakeup, push, consume, mixed, fanout, ceiling, ceiling-min, parked, all, backlog)`}},
		{"backlog reuse without a queue", []string{"backlog", "-backlog-reuse"}, []string{"-backlog-reuse: needs the -queue of the earlier run (kept with -keep)"}},
		{"more partitions than messages", []string{"backlog", "-backlog-messages", "10", "-backlog-partitions", "11"}, []string{"-backlog-partitions: must be in [1, 10], got 11"}},
		{"remote broker", []string{"push", "-url", "http://10.1.2.3:6632"}, []string{`-url: host "10.1.2.3" is not a loopback address; the bench only drives local targets`}},
		{"not http", []string{"push", "-url", "ftp://127.0.0.1"}, []string{`-url: want an http or https URL, got "ftp://127.0.0.1"`}},
		{"one remote broker in a list", []string{"push", "-url", "http://127.0.0.1:6632,http://10.1.2.3:6632"}, []string{`-url: host "10.1.2.3" is not a loopback address; the bench only drives local targets`}},
		{"remote postgres", []string{"push", "-pg", "postgres://u@db.example.com/q"}, []string{`-pg: host "db.example.com" is not a loopback address; the bench only drives local targets`}},
		{"remote postgres keyword form", []string{"push", "-pg", "host=db.example.com dbname=q"}, []string{`-pg: host "db.example.com" is not a loopback address; the bench only drives local targets`}},
		{"ceiling without postgres", []string{"ceiling"}, []string{"-pg: the ceiling scenario needs a PostgreSQL URL"}},
		{"minimal ceiling without postgres", []string{"ceiling-min"}, []string{"-pg: the ceiling-min scenario needs a PostgreSQL URL"}},
		{"bad queue name", []string{"push", "-queue", "a/b"}, []string{`-queue: "a/b" is not 1-200 characters of [A-Za-z0-9_.-]`}},
		{
			name: "every problem at once",
			args: []string{"push", "-batch", "0", "-producers", "0", "-duration", "0s", "-max-messages", "0", "-groups", "65"},
			want: []string{
				"-producers: must be in [1, 256], got 0",
				"-batch: must be in [1, 1000], got 0",
				"-groups: must be in [1, 64], got 65",
				"-duration: must be in [1s, 1h0m0s], got 0s",
				"-max-messages: must be at least 1, got 0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseArgs(tt.args, noEnv)
			require.Error(t, err)
			require.Equal(t, tt.want, strings.Split(err.Error(), "\n"))
		})
	}
}

func TestParseArgsFlagErrors(t *testing.T) {
	t.Parallel()
	_, err := parseArgs([]string{"push", "-nope"}, noEnv)
	require.ErrorContains(t, err, "flag provided but not defined: -nope")
	_, err = parseArgs([]string{"push", "-batch", "many"}, noEnv)
	require.ErrorContains(t, err, `invalid value "many" for flag -batch`)
}

func TestCommand(t *testing.T) {
	t.Parallel()
	b := &bench{cfg: configDefault}
	b.cfg.Producers = 16
	require.Equal(t, "queen-bench push -duration 10s -producers 16 -batch 100", b.command("push", "duration", "producers", "batch"))
}

func TestAppendPushBody(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 123)
	pad := strings.Repeat("x", 256-payloadOverhead)
	body := appendPushBody(nil, "q1", "p3", "q1-0-", 10, 2, pad, now)
	var req struct {
		Items []struct {
			Queue, Partition, TransactionID string
			Payload                         json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal(body, &req))
	require.Len(t, req.Items, 2)
	for i, it := range req.Items {
		require.Equal(t, "q1", it.Queue)
		require.Equal(t, "p3", it.Partition)
		require.Equal(t, []string{"q1-0-10", "q1-0-11"}[i], it.TransactionID)
		require.Len(t, it.Payload, 256)
		ns, ok := payloadTime(it.Payload)
		require.True(t, ok)
		require.Equal(t, now.UnixNano(), ns)
	}
}

func TestPayloadTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data string
		want int64
		ok   bool
	}{
		{`{"t":1700000000000000123,"pad":"x"}`, 1700000000000000123, true},
		{`{"t": 42, "pad": "xx"}`, 42, true}, // jsonb's own spacing
		{`{"pad": "x", "t" :7}`, 7, true},
		{`{"pad":"x"}`, 0, false},
		{`{"t":"soon"}`, 0, false},
		{`{"t":}`, 0, false},
		{`{"t"`, 0, false},
		{`null`, 0, false},
		{`{"t":99999999999999999999}`, 0, false}, // overflows int64
	}
	for _, tt := range tests {
		got, ok := payloadTime([]byte(tt.data))
		require.Equal(t, tt.ok, ok, tt.data)
		require.Equal(t, tt.want, got, tt.data)
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	status := "Name:\tqueen\nVmPeak:\t 1300000 kB\nVmHWM:\t   40960 kB\nVmRSS:\t   30720 kB\nThreads:\t8\n"
	rss, hwm, err := parseStatus(strings.NewReader(status))
	require.NoError(t, err)
	require.Equal(t, int64(30<<20), rss)
	require.Equal(t, int64(40<<20), hwm)

	_, _, err = parseStatus(strings.NewReader("Name:\tkthreadd\n"))
	require.Error(t, err)
	_, _, err = parseStatus(strings.NewReader("VmRSS:\t12 MB\nVmHWM:\t1 kB\n"))
	require.Error(t, err)
	_, _, err = parseStatus(io.LimitReader(strings.NewReader(""), 0))
	require.Error(t, err)
}

func TestCeilingSchema(t *testing.T) {
	t.Parallel()
	require.Equal(t, "queen_bench_bench_20260101_120000_42", ceilingSchema("bench-20260101-120000-42"))
	require.Equal(t, "queen_bench_my_q_1", ceilingSchema("My.Q_1"))
	require.Len(t, ceilingSchema(strings.Repeat("a", 200)), 63)
}

func TestApplyCeiling(t *testing.T) {
	t.Parallel()
	rs := []result{
		{Scenario: "push", PushRate: 5000},
		{Scenario: "consume"},
		{Scenario: "ceiling", Messages: 20000, Elapsed: 2 * time.Second},
		{Scenario: "ceiling-min", Messages: 40000, Elapsed: 2 * time.Second},
	}
	applyCeiling(rs)
	require.InDelta(t, 0.5, rs[0].Ratio, 1e-9)
	require.InDelta(t, 0.25, rs[0].RatioMin, 1e-9)
	for _, r := range rs[1:] {
		require.Zero(t, r.Ratio)
		require.Zero(t, r.RatioMin)
	}
}

func TestFmtLatency(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0.42 ms", fmtLatency(420*time.Microsecond))
	require.Equal(t, "12.3 ms", fmtLatency(12300*time.Microsecond))
	require.Equal(t, "1500 ms", fmtLatency(1500*time.Millisecond))
}

// With several brokers, producers and consumers are spread round-robin and
// a consumer acks through the broker it pops from.
func TestSpreadOverBrokers(t *testing.T) {
	t.Parallel()
	cfg := configDefault
	cfg.Producers, cfg.Consumers = 5, 4
	bases := []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"}
	b := &bench{cfg: cfg, bases: bases, base: bases[0]}
	for i, p := range b.newProducers("q") {
		require.Equal(t, bases[i%3], p.base)
	}
	for i := range cfg.Consumers {
		c := b.newConsumer("q", "", i)
		require.Equal(t, bases[i%3], c.base)
		require.Equal(t, "q", c.queue)
		require.True(t, *c.params.Wait)
	}
	require.Equal(t, "3 brokers on one database, producers and consumers spread round-robin: "+
		"http://127.0.0.1:1, http://127.0.0.1:2, http://127.0.0.1:3 (no -pid: RSS not measured)", brokersLine(bases, 0))
	require.Equal(t, "broker http://127.0.0.1:1 (pid 7)", brokersLine(bases[:1], 7))
}

func TestParseCPUTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stat string
		want       int64
	}{
		{"plain", "4242 (queen) S 1 4242 4242 0 -1 4194560 1 0 0 0 150 25 0 0 20 0 9 0 100 0 0", 175},
		{"spaces and parens in the name", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 7},
		{"truncated", "7 (queen) S 1 2 3", -1},
		{"no name", "garbage", -1},
		{"not a number", "7 (queen) S 1 7 7 0 -1 0 0 0 0 0 x 4 0 0", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, parseCPUTicks(tt.stat))
		})
	}
}
