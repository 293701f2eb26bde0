package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/sql/pgtest"
)

// TestSoak runs producers and consumers against the real binary for
// QUEEN_SOAK (a duration, e.g. 3m) while faults cycle: PostgreSQL stopped
// and started, the broker SIGKILLed and restarted, push maintenance on and
// off, a graceful SIGTERM and restart. Loopback only, bounded by the
// duration. It asserts zero loss and zero duplicates and logs its numbers
// (docs/spool.md). The normal test run soaks for 20 s, one round of every
// fault; for a longer soak run it alone:
//
//	QUEEN_SOAK=3m go test -run TestSoak -v -timeout 30m ./cmd/queen
func TestSoak(t *testing.T) {
	duration := 20 * time.Second
	if raw := os.Getenv("QUEEN_SOAK"); raw != "" {
		var err error
		duration, err = time.ParseDuration(raw)
		require.NoError(t, err)
	}
	bin := cmdtest.Binary(t, "cmd/queen")
	dbURL := pgtest.NewDB(t)
	env := brokerEnv(t, dbURL, t.TempDir())
	s := &soak{t: t, bin: bin, env: env, ledger: newLedger(), delivered: map[string]int{}, ackedOK: map[string]int{}, ackUnknown: map[string]int{}}
	s.start()
	s.b.mustCall("POST", "/api/v1/configure", map[string]any{"queue": "soak", "options": map[string]any{"leaseTime": 3}}, http.StatusOK)

	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() { s.produce(ctx, fmt.Sprintf("p%d", p)) })
	}
	cctx, stopConsumers := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	for range 4 {
		cwg.Go(func() { s.consume(cctx) })
	}

	began := time.Now()
	events := map[string]int{}
	for i := 0; time.Since(began) < duration; i++ {
		s.pause(4 * time.Second)
		switch i % 4 {
		case 0:
			pgtest.Stop(t)
			s.pause(3 * time.Second)
			pgtest.Start(t)
			events["postgres stopped 3 s"]++
		case 1:
			s.b.kill()
			s.start()
			events["broker SIGKILLed"]++
		case 2:
			s.b.setMaintenance(true)
			s.pause(3 * time.Second)
			s.b.setMaintenance(false)
			events["push maintenance 3 s"]++
		case 3:
			s.b.signal(syscall.SIGTERM)
			<-s.b.exited
			s.start()
			events["broker SIGTERM"]++
		}
	}
	stopLoad()
	wg.Wait()
	s.b.setMaintenance(false)
	waitFor(t, "the spool to drain", 2*time.Minute, func() bool { return s.b.pending() == 0 })
	acked := len(s.ledger.acked)
	waitFor(t, "every acknowledged push to be consumed", 2*time.Minute, func() bool {
		s.mu.Lock()
		var unknown []string
		for id := range s.ledger.acked {
			if s.ackedOK[id] > 0 {
				continue
			}
			if s.ackUnknown[id] == 0 {
				s.mu.Unlock()
				return false
			}
			unknown = append(unknown, id)
		}
		s.mu.Unlock()
		// Delivered, and acked by a request whose answer was lost: consumed
		// when the queue-mode cursor of its partition passed it.
		return consumedInDB(t, dbURL, unknown) == len(unknown)
	})
	stopConsumers()
	cwg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.afterAck.Load(), "a message was delivered again after its ack succeeded")
	redelivered := 0
	for _, n := range s.delivered {
		redelivered += n - 1
	}
	for id := range s.ackedOK {
		require.True(t, s.ledger.tried[id], "consumed %q was never pushed", id)
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var storedTwice, stored int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE n > 1), count(*) FROM (SELECT count(*) AS n FROM queen.messages GROUP BY partition_id, transaction_id) m`).Scan(&storedTwice, &stored))
	require.Zero(t, storedTwice)
	t.Logf("soak: %s, %d fault events %v", time.Since(began).Round(time.Second), sum(events), events)
	t.Logf("soak: pushes acknowledged %d (queued %d, buffered %d, duplicate on retry %d), push requests refused and retried %d",
		acked, s.ledger.count("queued"), s.ledger.count("buffered"), s.ledger.count("duplicate"), s.retries.Load())
	t.Logf("soak: stored %d, consumed and acked %d distinct, deliveries %d (redeliveries of messages whose ack failed %d), lost 0, delivered after ack %d, stored twice %d, ack answers lost %d",
		stored, len(s.ackedOK), sum(s.delivered), redelivered, s.afterAck.Load(), storedTwice, sum(s.ackUnknown))
}

// consumedInDB counts the messages of ids that the queue-mode cursor of
// their partition has passed.
func consumedInDB(t *testing.T, dbURL string, ids []string) int {
	t.Helper()
	if len(ids) == 0 {
		return 0
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM queen.messages m
		JOIN queen.partition_consumers c ON c.partition_id = m.partition_id AND c.consumer_group = '__QUEUE_MODE__'
		WHERE m.transaction_id = ANY($1) AND m.seq <= c.last_seq`, ids).Scan(&n))
	return n
}

type soak struct {
	t      *testing.T
	bin    string
	env    []string
	ledger *ledger

	bmu sync.Mutex
	b   *broker

	mu        sync.Mutex
	delivered map[string]int // txID -> deliveries
	ackedOK   map[string]int // txID -> successful acks
	// ackUnknown: txID -> acks sent whose answer was lost (the broker
	// killed while answering); the ack may or may not have been applied.
	ackUnknown map[string]int
	afterAck   atomic.Int64
	retries    atomic.Int64
}

func (s *soak) start() {
	b := startBroker(s.t, s.bin, s.env)
	s.bmu.Lock()
	s.b = b
	s.bmu.Unlock()
}

func (s *soak) url() string {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	return s.b.url
}

func (s *soak) pause(d time.Duration) { <-time.After(d) }

// produce pushes batches of 10 to one partition, retrying a refused batch
// with the same transactionIds, as a client should.
func (s *soak) produce(ctx context.Context, part string) {
	for seq := 0; ctx.Err() == nil; seq += 10 {
		items := make([]pushItem, 10)
		for i := range items {
			id := fmt.Sprintf("%s-%08d", part, seq+i)
			items[i] = pushItem{Queue: "soak", Partition: part, TransactionID: id, Payload: map[string]any{"id": id}}
		}
		for ctx.Err() == nil {
			ok, err := s.ledger.push(ctx, s.url(), items)
			if err != nil {
				s.t.Error(err)
				return
			}
			if ok {
				break
			}
			s.retries.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// consume long-polls, acks each batch, and records deliveries and acks.
func (s *soak) consume(ctx context.Context) {
	for ctx.Err() == nil {
		status, raw := call(ctx, "GET", s.url()+"/api/v1/pop/queue/soak?batch=100&partitions=4&wait=true&timeout=1000", nil)
		if status != http.StatusOK {
			if status != http.StatusNoContent {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			continue
		}
		var p struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				PartitionID   string `json:"partitionId"`
				LeaseID       string `json:"leaseId"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			s.t.Errorf("pop answer %s: %v", raw, err)
			return
		}
		s.mu.Lock()
		acks := make([]map[string]any, len(p.Messages))
		for i, m := range p.Messages {
			s.delivered[m.TransactionID]++
			if s.ackedOK[m.TransactionID] > 0 {
				s.afterAck.Add(1)
			}
			acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "leaseId": m.LeaseID}
		}
		s.mu.Unlock()
		status, raw = call(ctx, "POST", s.url()+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks})
		if status == 0 {
			// No answer: the broker may have applied the ack before it
			// was killed (then the batch is never delivered again) or not
			// (then it is redelivered after the lease).
			s.mu.Lock()
			for _, m := range p.Messages {
				s.ackUnknown[m.TransactionID]++
			}
			s.mu.Unlock()
			continue
		}
		if status != http.StatusOK {
			continue // redelivered after the lease expires
		}
		var res []struct {
			Success bool `json:"success"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || len(res) != len(acks) {
			s.t.Errorf("ack answer %s: %v", raw, err)
			return
		}
		s.mu.Lock()
		for i, r := range res {
			if r.Success {
				s.ackedOK[p.Messages[i].TransactionID]++
			}
		}
		s.mu.Unlock()
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
