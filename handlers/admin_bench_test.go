package handlers

import (
	"testing"
	"time"
)

// BenchmarkAdminRoutes100kPartitions times the admin listing and dashboard
// routes on a seeded database: 20 queues of 5,000 partitions each (100,000
// partitions, 250,000 messages). Every partition holds 2 or 3 messages;
// the queue-mode group consumed all of them on 90% of the partitions
// (idle), one on the other 10%; one queue has 1,000 dead letters; a day of
// per-minute metrics rows exists for every queue. Numbers: docs/observability.md
// ("Scale: 100,000 partitions").
//
//	go test -run '^$' -bench BenchmarkAdminRoutes100kPartitions -benchtime 5x ./handlers/
func BenchmarkAdminRoutes100kPartitions(b *testing.B) {
	s := newSeededBench(b, []string{
		`INSERT INTO queen.queues (name, namespace, task)
		 SELECT 'q' || i, 'ns' || (i % 4), 'task' || (i % 3) FROM generate_series(0, 19) i`,
		`INSERT INTO queen.partitions (queue_id, name, last_seq, last_message_at, created_at)
		 SELECT q.id, 'p' || i, CASE WHEN i % 2 = 0 THEN 3 ELSE 2 END, now() - interval '10 minutes', now() - interval '2 days'
		 FROM queen.queues q CROSS JOIN generate_series(0, 4999) i`,
		`INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload, created_at)
		 SELECT gen_random_uuid(), p.id, s, p.name || '-' || s, '{"n": 1}', now() - interval '30 minutes' + (abs(hashtext(p.id::text)) % 1000000) * interval '1 millisecond' + s * interval '1 second'
		 FROM queen.partitions p CROSS JOIN LATERAL generate_series(1, p.last_seq) s`,
		`INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq, last_consumed_at, total_messages_consumed)
		 SELECT p.id, '__QUEUE_MODE__', CASE WHEN hashtext(p.name) % 10 = 0 THEN 1 ELSE p.last_seq END, now(), 2
		 FROM queen.partitions p`,
		`INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, original_created_at)
		 SELECT m.id, m.partition_id, '__QUEUE_MODE__', 'boom', m.created_at
		 FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = 'q0' AND m.seq = 1 LIMIT 1000`,
		`INSERT INTO queen.queue_lag_metrics (bucket, queue_name, hostname, port, pid, push_request_count, push_message_count, pop_count, lag_count, lag_sum_ms, max_lag_ms)
		 SELECT date_trunc('minute', now()) - m * interval '1 minute', q.name, 'bench', 6632, 1, 10, 100, 100, 100, 5000, 90
		 FROM queen.queues q CROSS JOIN generate_series(0, 1439) m`,
		`INSERT INTO queen.worker_metrics (bucket, hostname, port, pid, push_request_count, push_message_count, sample_count)
		 SELECT date_trunc('minute', now()) - m * interval '1 minute', 'bench', 6632, 1, 200, 2000, 60 FROM generate_series(0, 1439) m`,
		`ANALYZE`,
	})
	ctx := b.Context()
	reg, js := s.reg, s.jobs()

	day := "from=" + time.Now().Add(-24*time.Hour).UTC().Format(time.RFC3339) + "&to=" + time.Now().UTC().Format(time.RFC3339)
	s.getRoutes(b, []string{
		"/api/v1/resources/overview",
		"/api/v1/resources/queues",
		"/api/v1/resources/queues?limit=10",
		"/api/v1/resources/namespaces",
		"/api/v1/resources/partitions?limit=100",
		"/api/v1/resources/partitions?limit=100&offset=90000",
		"/api/v1/resources/queues/q1",
		"/api/v1/status",
		"/api/v1/status?" + day,
		"/api/v1/status/queues?limit=10",
		"/api/v1/status/queues/q1?limit=100",
		"/api/v1/status/queues/q1/messages?limit=50",
		"/api/v1/status/analytics?" + day,
		"/api/v1/analytics/queue-ops?" + day,
		"/api/v1/analytics/worker-metrics?" + day,
		"/api/v1/consumer-groups",
		"/api/v1/consumer-groups/lagging?minLagSeconds=60",
		"/api/v1/messages?limit=100",
		"/api/v1/dlq?limit=100",
		"/metrics/prometheus",
	})
	// The background jobs on the same database: one retention run (nothing
	// expires) and one metrics flush.
	b.Run("jobs/retention+eviction", func(b *testing.B) {
		for b.Loop() {
			if _, err := js.RunRetention(ctx, time.Now()); err != nil {
				b.Fatal(err)
			}
			if _, err := js.RunEviction(ctx, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jobs/flush", func(b *testing.B) {
		for b.Loop() {
			reg.Pushed("q1", 1)
			if err := js.Flush(ctx, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
