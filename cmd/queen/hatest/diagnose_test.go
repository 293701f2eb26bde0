package hatest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// diagnose describes acknowledged pushes that were never consumed: where
// they are in the database, and the partitions' cursors and leases, and
// what the brokers' spools hold. For a failing test's message only.
func diagnose(t testing.TB, dbURL string, l *load, brokers []*broker) string {
	t.Helper()
	missing := l.missing()
	slices.Sort(missing)
	var b strings.Builder
	fmt.Fprintf(&b, "%d missing, first ones: %v\n", len(missing), missing[:min(len(missing), 10)])
	l.mu.Lock()
	for _, id := range missing[:min(len(missing), 10)] {
		fmt.Fprintf(&b, "%s: delivered %d times, last refused ack %q\n", id, l.delivered[id], l.ackRefused[id])
	}
	fmt.Fprintf(&b, "first failed acks: %q\n", l.ackErrors)
	kinds := map[string]int{}
	var last pushAnswer
	for _, a := range l.answers {
		kinds[a.kind]++
		if a.at.After(last.at) {
			last = a
		}
	}
	deliveries := 0
	for _, n := range l.delivered {
		deliveries += n
	}
	fmt.Fprintf(&b, "push answers by kind %v, the latest %s %s from %s; pushed %d acknowledged, deliveries %d of %d messages, acked %d; pop failures %d, ack failures %d\n",
		kinds, last.kind, last.at.Format("15:04:05.000"), last.url, len(l.acked), deliveries, len(l.delivered), len(l.ackedAt), l.popFails, l.ackFails)
	l.mu.Unlock()
	for _, br := range brokers {
		_, raw := call(context.Background(), "GET", br.url+"/api/v1/status/buffers", nil)
		fmt.Fprintf(&b, "broker %s buffers: %s\n", br.name, raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		fmt.Fprintf(&b, "database: %v\n", err)
		return b.String()
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT m.transaction_id, p.name, m.seq, d.message_id IS NOT NULL
		FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
		LEFT JOIN queen.dead_letter_queue d ON d.message_id = m.id
		WHERE m.transaction_id = ANY($1) ORDER BY p.name, m.seq LIMIT 20`, missing)
	if err == nil {
		n := 0
		for rows.Next() {
			var tx, part string
			var seq int64
			var dlq bool
			if rows.Scan(&tx, &part, &seq, &dlq) == nil {
				n++
				fmt.Fprintf(&b, "stored: %s partition %s seq %d dead-lettered %v\n", tx, part, seq, dlq)
			}
		}
		fmt.Fprintf(&b, "%d of the first 20 missing found stored\n", n)
	}
	rows, err = conn.Query(ctx, `SELECT p.name, p.last_seq, c.consumer_group, c.last_seq, c.lease_expires_at, c.batch_size,
		c.acked_count, c.batch_retry_count FROM queen.partitions p LEFT JOIN queen.partition_consumers c ON c.partition_id = p.id
		ORDER BY p.name`)
	if err != nil {
		fmt.Fprintf(&b, "cursors: %v\n", err)
		return b.String()
	}
	for rows.Next() {
		var part string
		var pSeq int64
		var group *string
		var cSeq *int64
		var lease *time.Time
		var size, acked, retries *int32
		if rows.Scan(&part, &pSeq, &group, &cSeq, &lease, &size, &acked, &retries) == nil {
			fmt.Fprintf(&b, "partition %s last_seq %d group %v cursor %v lease %v batch %v acked %v retries %v\n",
				part, pSeq, deref(group), deref(cSeq), deref(lease), deref(size), deref(acked), deref(retries))
		}
	}
	return b.String()
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// waitCaughtUp waits until the queue's consumers have passed every stored
// message (every partition's cursor at its last sequence number), then
// checks that nothing was dead-lettered and no transactionId was stored
// twice in a partition. It reports false when the cursors did not catch
// up in time.
func waitCaughtUp(t testing.TB, dbURL, queue string, timeout time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var behind int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
			LEFT JOIN queen.partition_consumers c ON c.partition_id = p.id
			WHERE q.name = $1 AND p.last_seq > coalesce(c.last_seq, 0)`, queue).Scan(&behind)
		require.NoError(t, err)
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(50 * time.Millisecond)
	}
	var dead, storedTwice int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM queen.dead_letter_queue`).Scan(&dead))
	require.Zero(t, dead, "messages dead-lettered")
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM queen.messages
		GROUP BY partition_id, transaction_id HAVING count(*) > 1) d`).Scan(&storedTwice))
	require.Zero(t, storedTwice, "a transactionId stored twice in a partition")
	return true
}
