package broker

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgtest"
)

// statementCounter counts the broker's statements by their sqlc name.
type statementCounter struct {
	mu sync.Mutex
	n  map[string]int
}

var sqlcName = regexp.MustCompile(`-- name: (\w+)`)

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if m := sqlcName.FindStringSubmatch(d.SQL); m != nil {
		s.mu.Lock()
		s.n[m[1]]++
		s.mu.Unlock()
	}
	return ctx
}

func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statementCounter) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.n
	s.n = map[string]int{}
	return out
}

// setupCounted is setup with every statement of the broker counted.
func setupCounted(t *testing.T) (*testBundle, *statementCounter) {
	t.Helper()
	cfg := pgtest.NewPool(t).Config()
	counter := &statementCounter{n: map[string]int{}}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := New(Config{Pool: pool, RepollInterval: 50 * time.Millisecond})
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.Stop(context.Background())) })
	return &testBundle{t: t, b: b, pool: pool}, counter
}

// A queue-mode wildcard pop finds and claims its partition in one
// statement, and the ack of what it delivered reads no message.
func TestQueueModePopIsOneStatementAndItsAckReadsNoMessage(t *testing.T) {
	tb, counter := setupCounted(t)
	tb.push(item("one", "a", "a1", ""), item("one", "a", "a2", ""), item("one", "b", "b1", ""))
	counter.take()

	p := tb.pop(PopRequest{Tenant: DefaultTenant, Queue: "one", Batch: 10})
	require.NotNil(t, p)
	ran := counter.take()
	require.Equal(t, 1, ran["PartitionConsumerClaimNextAndRead"], ran)
	require.Zero(t, ran["PartitionListPopCandidates"], ran)
	require.Zero(t, ran["PartitionConsumerClaimAndRead"], ran)

	var items []AckItem
	for _, m := range p.Messages {
		items = append(items, ackOf(m.TransactionID, p, AckCompleted, ""))
	}
	res, err := tb.b.Ack(t.Context(), DefaultTenant, items)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Refused)
		require.Equal(t, "one", r.Queue)
	}
	ran = counter.take()
	require.Zero(t, ran["MessageListAckWindow"], ran)
	require.Zero(t, ran["MessageListByTransactionIDs"], ran)
	require.Equal(t, 1, ran["PartitionConsumerLockMany"], ran)
}

// The one-statement claim passes over a partition another claim holds
// right now (its try-lock), claims another, and claims nothing, with the
// candidates counted, when every candidate is held.
func TestClaimNextSkipsPartitionsBeingClaimed(t *testing.T) {
	tb := setup(t)
	tb.push(item("busy", "a", "a1", ""), item("busy", "b", "b1", ""))
	q, ok, err := tb.b.lookupQueue(t.Context(), key(DefaultTenant, "busy"))
	require.NoError(t, err)
	require.True(t, ok)
	parts := map[string]string{}
	rows, err := tb.pool.Query(t.Context(), "SELECT name, id::text FROM queen.partitions WHERE queue_id = $1", q.ID)
	require.NoError(t, err)
	for rows.Next() {
		var name, id string
		require.NoError(t, rows.Scan(&name, &id))
		parts[name] = id
	}
	require.NoError(t, rows.Err())

	// Another claim in flight: the try-lock of PartitionConsumerClaimAndRead.
	hold := func(tx pgx.Tx, part string) {
		_, err := tx.Exec(t.Context(), "SELECT pg_advisory_xact_lock(hashtextextended(format('%s/%s', $1::uuid, $2::text), 12648430))",
			parts[part], QueueModeGroup)
		require.NoError(t, err)
	}
	other, err := tb.pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = other.Rollback(context.Background()) }()
	hold(other, "a")

	claim := func() []db.PartitionConsumerClaimNextAndReadRow {
		lease := fmt.Sprintf("lease-%d", time.Now().UnixNano())
		rows, err := tb.b.q.PartitionConsumerClaimNextAndRead(t.Context(), db.PartitionConsumerClaimNextAndReadParams{
			QueueID: q.ID, ConsumerGroup: QueueModeGroup, MaxCandidates: 10, LeaseID: &lease, LeaseSeconds: 30, BatchSize: 10,
		})
		require.NoError(t, err)
		require.NotEmpty(t, rows)
		return rows
	}
	got := claim()
	require.EqualValues(t, 2, got[0].Candidates)
	require.True(t, got[0].Claimed)
	require.Equal(t, "b", got[0].PartitionName)
	require.Equal(t, "b1", got[0].TransactionID)

	// b is leased now, a held: one candidate, not claimed.
	got = claim()
	require.EqualValues(t, 1, got[0].Candidates)
	require.False(t, got[0].Claimed)

	// Nothing held, nothing pending outside a lease: no candidate.
	require.NoError(t, other.Rollback(t.Context()))
	got = claim()
	require.True(t, got[0].Claimed)
	require.Equal(t, "a", got[0].PartitionName)
	got = claim()
	require.Zero(t, got[0].Candidates)
	require.False(t, got[0].Claimed)
}

// Of several candidates, the claim try-locks only the one it claims: a
// lock on every candidate would hold off every other consumer's claim of
// them until this one commits.
func TestClaimNextLocksOneCandidate(t *testing.T) {
	tb := setup(t)
	tb.push(item("few", "a", "a1", ""), item("few", "b", "b1", ""), item("few", "c", "c1", ""), item("few", "d", "d1", ""))
	q, ok, err := tb.b.lookupQueue(t.Context(), key(DefaultTenant, "few"))
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := tb.pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	lease := "lease-one"
	rows, err := tb.b.q.WithTx(tx).PartitionConsumerClaimNextAndRead(t.Context(), db.PartitionConsumerClaimNextAndReadParams{
		QueueID: q.ID, ConsumerGroup: QueueModeGroup, MaxCandidates: 10, LeaseID: &lease, LeaseSeconds: 30, BatchSize: 10,
	})
	require.NoError(t, err)
	require.EqualValues(t, 4, rows[0].Candidates)
	require.True(t, rows[0].Claimed)
	var pid int
	require.NoError(t, tx.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	var locks int
	require.NoError(t, tb.pool.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1", pid).Scan(&locks))
	require.Equal(t, 1, locks)
}

// Consumers racing on a queue through the one-statement claim get every
// message exactly once, each partition's in order.
func TestQueueModeConsumersGetEachMessageOnceInOrder(t *testing.T) {
	tb := setup(t)
	const parts, per = 4, 60
	var items []PushItem
	for i := range per {
		for p := range parts {
			items = append(items, item("race", fmt.Sprintf("p%d", p), fmt.Sprintf("m-%d-%03d", p, i), ""))
		}
	}
	tb.push(items...)

	var mu sync.Mutex
	seen := map[string]int{}
	last := map[string]string{}
	var problems []string
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for {
				p, err := tb.b.Pop(t.Context(), PopRequest{Tenant: DefaultTenant, Queue: "race", Batch: 7})
				if err != nil || p == nil {
					if err != nil {
						mu.Lock()
						problems = append(problems, err.Error())
						mu.Unlock()
					}
					return
				}
				var acks []AckItem
				mu.Lock()
				for _, m := range p.Messages {
					seen[m.TransactionID]++
					if last[m.Partition] >= m.TransactionID {
						problems = append(problems, fmt.Sprintf("%s after %s", m.TransactionID, last[m.Partition]))
					}
					last[m.Partition] = m.TransactionID
					acks = append(acks, ackOf(m.TransactionID, p, AckCompleted, ""))
				}
				mu.Unlock()
				res, err := tb.b.Ack(t.Context(), DefaultTenant, acks)
				mu.Lock()
				if err != nil {
					problems = append(problems, err.Error())
				}
				for _, r := range res {
					if r.Refused != nil {
						problems = append(problems, r.TransactionID+": "+r.Refused.Error())
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, problems)
	require.Len(t, seen, parts*per)
	for tx, n := range seen {
		require.Equal(t, 1, n, tx)
	}
}
