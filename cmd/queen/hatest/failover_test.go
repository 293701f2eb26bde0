package hatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/sql/pgtest/pgaf"
)

// PostgreSQL fails over under load: `pg_autoctl perform failover` hands the
// primary role to the synchronous standby while two brokers take pushes
// and pops through the multi-host connection string. Nothing acknowledged
// is lost (a `queued` answer survives because the standby had it before
// the commit was answered), acked messages are not delivered again, order
// per partition holds, and pushes answer `queued` again by themselves. The
// nodes serve TLS: the brokers' sessions on the new primary are encrypted
// too.
func TestFailoverPerform(t *testing.T) {
	r := startHA(t, pgaf.Options{SSL: true})
	r.steady()
	r.inject(performFailover)
	r.requireTLS()
	r.finish()
}

// The primary's postmaster is SIGKILLed under load; its keeper starts it
// again and crash recovery keeps every commit. The spool takes the pushes
// of those seconds.
func TestFailoverKillPostmaster(t *testing.T) {
	r := startHA(t, pgaf.Options{})
	r.steady()
	r.inject(killPostmaster)
	r.finish()
}

// fault is one kind of failure a run injects.
type fault struct {
	name   string
	inject func(r *haRun)
	// broker, for a broker's fault, is its index: its recovery is its own
	// first queued answer after the restart. -1 for the database's faults.
	broker int
}

var (
	performFailover = fault{"perform failover", func(r *haRun) { r.f.Failover(r.t) }, -1}
	killPostmaster  = fault{"postmaster SIGKILL", func(r *haRun) { r.f.KillPrimaryPostmaster(r.t) }, -1}
	// killPrimaryNode loses the primary's keeper and postgres together, as
	// when its machine dies: the monitor promotes the standby (which then
	// runs alone, without synchronous replication, until the old node is
	// back), and the old node rejoins as a standby once the new primary
	// serves.
	killPrimaryNode = fault{"primary node lost", func(r *haRun) {
		t, f := r.t, r.f
		old := primaryNode(t, f)
		f.KillNode(t, old)
		waitFor(t, "the monitor to promote the standby", 2*time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			p, err := f.Primary(ctx)
			return err == nil && p != nil && p != old
		})
		f.RestartNode(t, old)
	}, -1}
	// killBroker SIGKILLs the first broker and starts it again on its
	// spool; its producers retry until it is back.
	killBroker = fault{"broker SIGKILL", func(r *haRun) { r.killBroker(0) }, 0}
)

func primaryNode(t *testing.T, f *pgaf.Formation) *pgaf.Node {
	t.Helper()
	p, err := f.Primary(t.Context())
	require.NoError(t, err)
	require.NotNil(t, p)
	return p
}

// haRun is one formation, two brokers on it and the load through them.
type haRun struct {
	t       *testing.T
	f       *pgaf.Formation
	bin     string
	envs    []([]string)
	brokers []*broker
	load    *load
	faults  []faultResult
	// asyncAtStart is AsyncWindows once the formation was up: setting it up
	// passes through wait_primary once.
	asyncAtStart int

	stopProducers, stopConsumers context.CancelFunc
	producers, consumers         *sync.WaitGroup
	mu                           sync.Mutex // guards brokers for the routers
}

type faultResult struct {
	name      string
	disrupted int           // push requests answered other than queued
	recovery  time.Duration // fault to the first queued answer again
}

const (
	partitions = 6
	consumers  = 4
)

// startHA starts a formation and two brokers on its host list, configures
// the queue (2 s leases, so that an unacked batch comes back quickly) and
// starts the load: each producer sticks to one broker (a producer that
// moves a partition to another broker while the first still spools it
// could overtake its own spooled pushes), consumers start on alternate
// brokers and move to the other one when a request fails.
func startHA(t *testing.T, opts pgaf.Options) *haRun {
	f := pgaf.Start(t, opts)
	r := &haRun{t: t, f: f, bin: cmdtest.Binary(t, "cmd/queen")}
	var err error
	r.asyncAtStart, err = f.AsyncWindows(t.Context())
	require.NoError(t, err)
	db := dbEnv{hosts: f.Hosts(), user: f.User(), db: pgaf.Database, ssl: f.SSL()}
	for i := range 2 {
		r.envs = append(r.envs, brokerEnv(t, db))
		r.brokers = append(r.brokers, startBroker(t, fmt.Sprintf("b%d", i), r.bin, r.envs[i]))
	}
	t.Logf("ha: formation %s, brokers %s %s", f.Hosts(), r.brokers[0].url, r.brokers[1].url)
	status, raw := call(t.Context(), "POST", r.brokers[0].url+"/api/v1/configure",
		map[string]any{"queue": "ha", "options": map[string]any{"leaseTime": 2, "retryLimit": 1000}})
	require.Equal(t, http.StatusOK, status, "%s", raw)

	r.load = newLoad("ha", partitions,
		func(p, _ int) string { return r.url(p % 2) },
		func(c, attempt int) string { return r.url((c + attempt) % 2) })
	pctx, stopP := context.WithCancel(context.Background())
	cctx, stopC := context.WithCancel(context.Background())
	r.stopProducers, r.stopConsumers = stopP, stopC
	r.producers = r.load.startProducers(pctx)
	r.consumers = r.load.startConsumers(cctx, consumers)
	t.Cleanup(func() {
		stopP()
		stopC()
		r.producers.Wait()
		r.consumers.Wait()
	})
	return r
}

func (r *haRun) url(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.brokers[i].url
}

// steady waits for a few seconds' worth of load.
func (r *haRun) steady() { r.load.waitProgress(r.t, "steady load", 300) }

// inject runs a fault, waits until pushes answer queued again and the
// load goes on, and until the formation is back to a primary with a
// synchronous standby.
func (r *haRun) inject(fl fault) {
	t := r.t
	// The previous fault's spooled pushes are replayed first: their
	// buffered answers would count as this fault's.
	waitFor(t, "the spools to drain before "+fl.name, 3*time.Minute, func() bool {
		for i := range r.brokers {
			if pending(r.url(i)) != 0 {
				return false
			}
		}
		return true
	})
	at := time.Now()
	fl.inject(r)
	done := time.Now()
	url := ""
	if fl.broker >= 0 {
		url = r.url(fl.broker)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, _, ok := r.load.recovery(at, done, url); ok {
			break
		}
		if time.Now().After(deadline) {
			disrupted, _, _ := r.load.recovery(at, done, url)
			t.Fatalf("%s: %d push requests disrupted, and none answered queued after them within 3m:\n%s",
				fl.name, disrupted, diagnose(t, r.f.URL(), r.load, r.brokers))
		}
		<-time.After(20 * time.Millisecond)
	}
	disrupted, recovery, _ := r.load.recovery(at, done, url)
	r.faults = append(r.faults, faultResult{name: fl.name, disrupted: disrupted, recovery: recovery})
	t.Logf("ha: %s: %d push requests answered buffered or refused, queued again %s after the fault",
		fl.name, disrupted, recovery.Round(10*time.Millisecond))
	r.load.waitProgress(t, "load after "+fl.name, 200)
	r.f.WaitHealthy(t)
}

// killBroker SIGKILLs one broker and starts it again on the same spool.
func (r *haRun) killBroker(i int) {
	r.mu.Lock()
	b := r.brokers[i]
	r.mu.Unlock()
	b.kill()
	nb := startBroker(r.t, b.name, r.bin, r.envs[i])
	r.mu.Lock()
	r.brokers[i] = nb
	r.mu.Unlock()
}

// requireTLS checks that every broker session on the primary is encrypted.
func (r *haRun) requireTLS() {
	t := r.t
	conn, err := pgx.Connect(t.Context(), r.f.URL())
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var total, plain int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE NOT s.ssl)
		FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'queen'`).Scan(&total, &plain))
	require.Positive(t, total)
	require.Zero(t, plain, "broker sessions on the new primary without TLS")
}

// finish stops the producers, waits until everything acknowledged is
// consumed, stops the consumers and checks the ledger and the database.
func (r *haRun) finish() summary {
	t := r.t
	r.stopProducers()
	r.producers.Wait()
	if !r.load.waitDelivered(3*time.Minute) || !waitCaughtUp(t, r.f.URL(), r.load.queue, 3*time.Minute) {
		t.Fatalf("acknowledged pushes not consumed after 3m:\n%s", diagnose(t, r.f.URL(), r.load, r.brokers))
	}
	r.stopConsumers()
	r.consumers.Wait()
	s := r.load.verify(t)

	resets := 0
	for _, b := range r.brokers {
		resets += b.logCount("closing every pooled connection")
	}
	async, err := r.f.AsyncWindows(t.Context())
	require.NoError(t, err)
	async -= r.asyncAtStart
	t.Logf("ha: %s", s)
	t.Logf("ha: faults %d, pool resets logged %d, times a primary ran without a synchronous standby %d", len(r.faults), resets, async)
	return s
}

// pending is what a broker's spool holds, or -1 when it does not answer.
func pending(brokerURL string) int64 {
	status, raw := call(context.Background(), "GET", brokerURL+"/api/v1/status/buffers", nil)
	var st struct {
		Pending int64 `json:"pending"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &st) != nil {
		return -1
	}
	return st.Pending
}
