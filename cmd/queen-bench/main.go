// Command queen-bench drives a Queen-compatible broker over HTTP and prints a
// Markdown table, one line per run: messages per second, p50/p99 latency,
// messages per PostgreSQL commit, the broker's peak RSS, and the push rate as
// a ratio of the ceiling (the same rows inserted straight into PostgreSQL).
//
//	queen-bench <scenario> [flags]
//
// Scenarios: push, consume, mixed, fanout, wakeup, ceiling, parked, all, and
// backlog, which runs only when named. Every run stops by itself after
// -duration (and after -max-messages; backlog when its samples are in); only
// loopback targets are accepted. -pg (or PG_HOST and friends, as the broker reads them)
// enables the commit count and the ceiling; -pid enables the RSS column.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/client"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Scenarios in the order `all` runs them: the wake-up latency first, while
// the broker is idle; the ceilings after the push rows, so that they get
// their ratio; the ten thousand parked long-polls last, so that their
// connections and queues disturb no other row.
var scenarios = []string{"wakeup", "push", "consume", "mixed", "fanout", "ceiling", "ceiling-min", "parked"}

// aloneScenarios run only when named: the deep backlog fills a million
// messages (a minute or more) and leaves 100,000 partitions behind until
// its cleanup, which would disturb every row after it (make bench-backlog).
var aloneScenarios = []string{"backlog"}

// config is the command line after parsing and validation.
type config struct {
	Scenario     string
	URL          string   // -url as given: one base URL or a comma list
	URLs         []string // -url split at commas, trailing slashes trimmed
	PG           string   // "" disables the commit count and the ceiling
	PID          int      // 0 disables the RSS column
	PGPID        int      // the postmaster; 0 disables PostgreSQL's CPU per message
	Duration     time.Duration
	Producers    int
	Consumers    int
	Batch        int
	Partitions   int
	PayloadBytes int
	Groups       int
	AutoAck      bool   // consumers pop with autoAck and send no ack
	Queue        string // "" picks a unique name per run (see defaultQueue)
	PollTimeout  time.Duration
	Rate         int // total push msg/s for mixed and fanout; 0 is unthrottled
	Wakeups      int
	Parked       int           // long-polls parked by the parked scenario
	ParkedQueues int           // the queues they are spread over
	ParkTimeout  time.Duration // their long-poll timeout
	MaxMessages  int64
	StatsSettle  time.Duration
	Keep         bool
	// The backlog scenario: its size, the pops timed per shape, the
	// requests per dashboard route, and whether to reuse a kept queue.
	BacklogMessages   int
	BacklogPartitions int
	PopSamples        int
	AdminSamples      int
	AdminInterval     time.Duration
	BacklogReuse      bool
	BacklogDrain      bool
	BacklogRecent     bool
	AdminIdle         time.Duration
	AdminDelay        time.Duration
}

// configDefault holds the value of every flag that is not given.
var configDefault = config{
	URL:          "http://127.0.0.1:6632",
	Duration:     10 * time.Second,
	Producers:    4,
	Consumers:    4,
	Batch:        100,
	Partitions:   8,
	PayloadBytes: 256,
	Groups:       4,
	PollTimeout:  time.Second,
	Wakeups:      200,
	Parked:       10_000,
	ParkedQueues: 1_000,
	ParkTimeout:  30 * time.Second,
	MaxMessages:  10_000_000,
	StatsSettle:  11 * time.Second,

	BacklogMessages:   1_000_000,
	BacklogPartitions: 100_000,
	PopSamples:        200,
	AdminSamples:      10,
	AdminInterval:     time.Second,
}

const usageText = `usage: queen-bench <scenario> [flags]

scenarios:
  push      producers push batches for -duration
  consume   pop + batch ack until the queue is empty or -duration (prefills when run alone)
  mixed     push and consume at once; latency is push sent -> message popped
  fanout    like mixed with -groups consumer groups, each reading every message
            (-auto-ack: consumers pop with autoAck and send no ack)
  wakeup    p50/p99 from a push's answer to a parked long-poll's answer, idle broker;
            with several -url, push on the first and long-polls on the others
  ceiling   the same rows inserted straight into PostgreSQL (needs -pg)
  ceiling-min  like ceiling into a table with only the order and dedup keys
  parked    -parked long-polls over -parked-queues empty queues: commits/s, CPU and RSS
            of the idle broker over -duration, then -wakeups pushes to one queue, each
            timed from the push's answer to the parked pop's answer
  all       every scenario above, one table
  backlog   (not in all) fills one queue with -backlog-messages over -backlog-partitions,
            then times -pop-samples pops (+ ack) of each shape against the same pops on an
            empty queue fed before each, and every route the dashboard polls, page by page
            (-admin-samples refreshes per page, -admin-interval apart)

flags:
`

// namePattern is the broker's queue and group name rule (openapi Name),
// without the dot-only forms that the bench never needs.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]*$`)

// parseArgs reads the command line: one scenario, before or after the flags.
// It reports every problem at once. lookupEnv supplies PG_* when -pg is not
// given, so that `eval "$(scripts/localpg env)"` is enough for the ceiling.
func parseArgs(args []string, lookupEnv func(string) (string, bool)) (config, error) {
	cfg := configDefault
	fs := newFlagSet(&cfg, io.Discard)
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return cfg, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if cfg.PG == "" {
		cfg.PG = pgURLFromEnv(lookupEnv)
	}

	var errs []error
	switch len(positional) {
	case 0:
		errs = append(errs, errors.New("scenario: missing (one of "+scenarioList()+")"))
	case 1:
		cfg.Scenario = positional[0]
		if cfg.Scenario != "all" && !contains(scenarios, cfg.Scenario) && !contains(aloneScenarios, cfg.Scenario) {
			errs = append(errs, fmt.Errorf("scenario: unknown %q (one of %s)", cfg.Scenario, scenarioList()))
		}
	default:
		errs = append(errs, fmt.Errorf("scenario: want one, got %q", positional))
	}
	cfg.URLs = nil
	for _, u := range strings.Split(cfg.URL, ",") {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if err := checkLoopbackURL(u); err != nil {
			errs = append(errs, fmt.Errorf("-url: %w", err))
			continue
		}
		cfg.URLs = append(cfg.URLs, u)
	}
	if cfg.PG != "" {
		if err := checkLoopbackPG(cfg.PG); err != nil {
			errs = append(errs, fmt.Errorf("-pg: %w", err))
		}
	}
	if (cfg.Scenario == "ceiling" || cfg.Scenario == "ceiling-min") && cfg.PG == "" {
		errs = append(errs, fmt.Errorf("-pg: the %s scenario needs a PostgreSQL URL", cfg.Scenario))
	}
	errs = append(errs,
		checkRange("-pid", cfg.PID, 0, 1<<22),
		checkRange("-pg-pid", cfg.PGPID, 0, 1<<22),
		checkRange("-producers", cfg.Producers, 1, 256),
		checkRange("-consumers", cfg.Consumers, 1, 256),
		checkRange("-batch", cfg.Batch, 1, 1000),
		checkRange("-partitions", cfg.Partitions, 1, 1000000),
		checkRange("-payload-bytes", cfg.PayloadBytes, 0, 1<<20),
		checkRange("-groups", cfg.Groups, 1, 64),
		checkRange("-rate", cfg.Rate, 0, 10_000_000),
		checkRange("-wakeups", cfg.Wakeups, 1, 100_000),
		checkRange("-parked", cfg.Parked, 1, 100_000),
		checkRange("-parked-queues", cfg.ParkedQueues, 1, 100_000),
		checkDuration("-park-timeout", cfg.ParkTimeout, time.Second, 10*time.Minute),
		checkDuration("-duration", cfg.Duration, time.Second, time.Hour),
		checkDuration("-poll-timeout", cfg.PollTimeout, 10*time.Millisecond, time.Minute),
		checkDuration("-stats-settle", cfg.StatsSettle, 0, time.Minute),
		checkRange("-backlog-messages", cfg.BacklogMessages, 1, 100_000_000),
		checkRange("-backlog-partitions", cfg.BacklogPartitions, 1, min(cfg.BacklogMessages, 10_000_000)),
		checkRange("-pop-samples", cfg.PopSamples, 1, 100_000),
		checkRange("-admin-samples", cfg.AdminSamples, 1, 10_000),
		checkDuration("-admin-interval", cfg.AdminInterval, 0, time.Minute),
		checkDuration("-admin-idle", cfg.AdminIdle, 0, time.Hour),
		checkDuration("-admin-delay", cfg.AdminDelay, 0, time.Hour),
	)
	if cfg.BacklogRecent && !cfg.BacklogDrain {
		errs = append(errs, errors.New("-backlog-recent: only with -backlog-drain"))
	}
	if cfg.BacklogReuse && cfg.Queue == "" {
		errs = append(errs, errors.New("-backlog-reuse: needs the -queue of the earlier run (kept with -keep)"))
	}
	if cfg.MaxMessages < 1 {
		errs = append(errs, fmt.Errorf("-max-messages: must be at least 1, got %d", cfg.MaxMessages))
	}
	// The bench appends "-fanout-g63" and the like to the queue name.
	if cfg.Queue != "" && (len(cfg.Queue) > 200 || !namePattern.MatchString(cfg.Queue)) {
		errs = append(errs, fmt.Errorf("-queue: %q is not 1-200 characters of [A-Za-z0-9_.-]", cfg.Queue))
	}
	return cfg, errors.Join(errs...)
}

func newFlagSet(cfg *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("queen-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.URL, "url", cfg.URL, "broker base URL, or a comma list of brokers on one database: producers and consumers are spread over them round-robin (loopback only)")
	fs.StringVar(&cfg.PG, "pg", cfg.PG, "the broker's PostgreSQL URL, for xact_commit and the ceiling (default from PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB)")
	fs.IntVar(&cfg.PID, "pid", cfg.PID, "broker pid, for RSS from /proc/<pid>/status and its CPU per message")
	fs.IntVar(&cfg.PGPID, "pg-pid", cfg.PGPID, "postmaster pid of a local PostgreSQL, for the cluster's CPU per message (/proc)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each run")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "concurrent push requests (and ceiling connections)")
	fs.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "concurrent consumers (per group in fanout)")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "messages per push, per pop and per ceiling INSERT")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions per queue; each push goes to one")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", cfg.PayloadBytes, "size of each JSON payload")
	fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "consumer groups in fanout")
	fs.BoolVar(&cfg.AutoAck, "auto-ack", cfg.AutoAck, "consumers pop with autoAck=true (the cursor moves on delivery) and send no ack")
	fs.StringVar(&cfg.Queue, "queue", cfg.Queue, "queue name prefix (default bench-<time>-<pid>)")
	fs.DurationVar(&cfg.PollTimeout, "poll-timeout", cfg.PollTimeout, "long-poll timeout of consumers")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "total push msg/s in mixed and fanout (0: as fast as possible)")
	fs.IntVar(&cfg.Wakeups, "wakeups", cfg.Wakeups, "wake-ups to time in the wakeup and parked scenarios")
	fs.IntVar(&cfg.Parked, "parked", cfg.Parked, "long-polls the parked scenario keeps parked (mind ulimit -n of the bench and the broker)")
	fs.IntVar(&cfg.ParkedQueues, "parked-queues", cfg.ParkedQueues, "queues the parked long-polls are spread over")
	fs.DurationVar(&cfg.ParkTimeout, "park-timeout", cfg.ParkTimeout, "long-poll timeout of the parked scenario")
	fs.Int64Var(&cfg.MaxMessages, "max-messages", cfg.MaxMessages, "stop a run after this many messages")
	fs.DurationVar(&cfg.StatsSettle, "stats-settle", cfg.StatsSettle, "wait before reading xact_commit after a run (PostgreSQL flushes idle backends' stats within 10s)")
	fs.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the bench queues instead of deleting them at the end")
	fs.IntVar(&cfg.BacklogMessages, "backlog-messages", cfg.BacklogMessages, "pending messages the backlog scenario fills its queue with")
	fs.IntVar(&cfg.BacklogPartitions, "backlog-partitions", cfg.BacklogPartitions, "partitions the backlog is spread over")
	fs.IntVar(&cfg.PopSamples, "pop-samples", cfg.PopSamples, "pops timed per pop shape in the backlog scenario")
	fs.IntVar(&cfg.AdminSamples, "admin-samples", cfg.AdminSamples, "requests timed per dashboard route in the backlog scenario")
	fs.DurationVar(&cfg.AdminInterval, "admin-interval", cfg.AdminInterval, "backlog: time between two refreshes of a dashboard page (the dashboard's default is 5s)")
	fs.DurationVar(&cfg.AdminIdle, "admin-idle", cfg.AdminIdle, "backlog: after the polls, ask nothing for this long, then open every page once more (0: don't)")
	fs.DurationVar(&cfg.AdminDelay, "admin-delay", cfg.AdminDelay, "backlog: after the pops, ask nothing for this long before the first page (a broker left idle since its start)")
	fs.BoolVar(&cfg.BacklogReuse, "backlog-reuse", cfg.BacklogReuse, "backlog: skip the fill and measure the -queue an earlier run filled and kept (-keep)")
	fs.BoolVar(&cfg.BacklogDrain, "backlog-drain", cfg.BacklogDrain, "backlog: instead of the fresh-backlog pops and the dashboard, time the pops with the older half of the partitions consumed (needs -pg)")
	fs.BoolVar(&cfg.BacklogRecent, "backlog-recent", cfg.BacklogRecent, "backlog, with -backlog-drain: before each shape's pops, move the partitions' times up so that the newest is now, as a fill that just ended leaves them")
	return fs
}

// pgURLFromEnv builds a PostgreSQL URL from the broker's PG_* variables, or
// "" when PG_HOST is not set.
func pgURLFromEnv(lookupEnv func(string) (string, bool)) string {
	host, ok := lookupEnv("PG_HOST")
	if !ok || host == "" {
		return ""
	}
	get := func(key, def string) string {
		if v, ok := lookupEnv(key); ok && v != "" {
			return v
		}
		return def
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(get("PG_USER", "postgres"), get("PG_PASSWORD", "")),
		Host:     net.JoinHostPort(host, get("PG_PORT", "5432")),
		Path:     "/" + get("PG_DB", "postgres"),
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// scenarioList names every scenario for the usage errors.
func scenarioList() string {
	return strings.Join(scenarios, ", ") + ", all, " + strings.Join(aloneScenarios, ", ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// defaultQueue is a queue name that no earlier run used.
func defaultQueue(now time.Time, pid int) string {
	return "bench-" + now.UTC().Format("20060102-150405") + "-" + strconv.Itoa(pid)
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		defaults := configDefault
		newFlagSet(&defaults, stdout).PrintDefaults()
		return 0
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "queen-bench: "+line)
		}
		fmt.Fprintln(stderr, "queen-bench: run with -h for usage")
		return 2
	}
	if cfg.Queue == "" {
		cfg.Queue = defaultQueue(time.Now(), os.Getpid())
	}

	// The first signal ends the current run early and still prints the
	// table; a second one exits at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()

	b, err := newBench(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "queen-bench: "+err.Error())
		return 1
	}
	defer b.close()
	results, runErr := b.runAll(ctx)
	writeReport(stdout, b.header(), results)
	if runErr != nil {
		fmt.Fprintln(stderr, "queen-bench: "+runErr.Error())
		return 1
	}
	return 0
}

// newHTTPClient returns the one client of a bench: keep-alive connections
// for every concurrent request, no proxy (targets are local), no gzip.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// bench is one invocation: the flags, the one HTTP client with the client
// generated from the spec on top of it, and the optional PostgreSQL pool
// used for xact_commit (the ceiling opens its own).
type bench struct {
	cfg    config
	bases  []string // every broker of -url
	base   string   // the first one: health, cleanup and the wakeup scenario
	client *http.Client
	// apis holds one generated client per broker of -url, all on the one
	// HTTP client; api is the first broker's.
	apis   map[string]*client.ClientWithResponses
	api    *client.ClientWithResponses
	pg     *pgxpool.Pool // nil without -pg
	pgInfo string        // version and durability settings, for the header
	log    io.Writer
	queues []string // every queue a run pushed to, deleted at the end
}

func newBench(ctx context.Context, cfg config, log io.Writer) (*bench, error) {
	conns := cfg.Producers + cfg.Consumers*max(cfg.Groups, 1) + 8
	b := &bench{
		cfg:    cfg,
		bases:  cfg.URLs,
		base:   cfg.URLs[0],
		client: newHTTPClient(conns),
		log:    log,
	}
	b.apis = make(map[string]*client.ClientWithResponses, len(b.bases))
	for _, base := range b.bases {
		api, err := client.NewClientWithResponses(base, client.WithHTTPClient(b.client))
		if err != nil {
			return nil, fmt.Errorf("-url %s: %w", base, err)
		}
		b.apis[base] = api
	}
	b.api = b.apis[b.base]
	if err := b.checkHealth(ctx); err != nil {
		return nil, err
	}
	if cfg.PG != "" {
		pool, info, err := openStatsPool(ctx, cfg.PG)
		if err != nil {
			return nil, err
		}
		b.pg, b.pgInfo = pool, info
	}
	return b, nil
}

func (b *bench) close() {
	if b.pg != nil {
		b.pg.Close()
	}
	b.client.CloseIdleConnections()
}

// checkHealth fails fast when a broker of -url does not answer.
func (b *bench) checkHealth(ctx context.Context) error {
	for _, base := range b.bases {
		if err := b.checkOne(ctx, base); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) checkOne(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.apiAt(base).GetHealthWithResponse(ctx)
	if err != nil {
		return fmt.Errorf("broker at %s: %w (is it running? make run)", base, err)
	}
	if resp.StatusCode() != http.StatusOK {
		return fmt.Errorf("broker at %s: /health answered %s", base, resp.HTTPResponse.Status)
	}
	return nil
}

// baseFor spreads producers and consumers over the brokers: client i talks
// to broker i mod n.
func (b *bench) baseFor(i int) string { return b.bases[i%len(b.bases)] }

// apiAt is the generated client of one broker of -url.
func (b *bench) apiAt(base string) *client.ClientWithResponses { return b.apis[base] }

// queue names the queue of one scenario and remembers it for the cleanup.
func (b *bench) queue(suffix string) string {
	name := b.cfg.Queue + "-" + suffix
	if !contains(b.queues, name) {
		b.queues = append(b.queues, name)
	}
	return name
}
