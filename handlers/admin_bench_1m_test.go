package handlers

import "testing"

// BenchmarkAdminRoutes1MMessages times the routes whose page size the
// official clients push up (queenctl's `queue describe` and `messages list
// --limit 10000`) on one queue of 100,000 partitions holding 1,000,000
// messages, all stored in the last hour (the message listing's default
// window): every partition holds 10; the queue-mode group consumed all of
// them on 90% of the partitions and 5 on the others, a fifth of which it
// holds under a live lease; 1,000 messages are dead-lettered. Numbers:
// docs/observability.md ("Scale: one queue of 100,000 partitions").
//
//	go test -run '^$' -bench BenchmarkAdminRoutes1MMessages -benchtime 5x ./handlers/
func BenchmarkAdminRoutes1MMessages(b *testing.B) {
	s := newSeededBench(b, []string{
		`INSERT INTO queen.queues (name) VALUES ('big')`,
		`INSERT INTO queen.partitions (queue_id, name, last_seq, last_message_at, created_at)
		 SELECT q.id, 'p' || lpad(i::text, 6, '0'), 10, now() - interval '5 minutes', now() - interval '2 days'
		 FROM queen.queues q CROSS JOIN generate_series(0, 99999) i`,
		`INSERT INTO queen.messages (id, partition_id, seq, transaction_id, payload, created_at)
		 SELECT gen_random_uuid(), p.id, s, p.name || '-' || s, '{"n": 1}',
		        now() - interval '50 minutes' + (abs(hashtext(p.id::text)) % 2400000) * interval '1 millisecond' + s * interval '1 second'
		 FROM queen.partitions p CROSS JOIN generate_series(1, 10) s`,
		`INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq, last_consumed_at, total_messages_consumed,
		     lease_id, lease_acquired_at, lease_expires_at, batch_size)
		 SELECT p.id, '__QUEUE_MODE__', CASE WHEN h % 10 = 0 THEN 5 ELSE 10 END, now(), 5,
		        CASE WHEN h % 50 = 0 THEN gen_random_uuid()::text END,
		        CASE WHEN h % 50 = 0 THEN now() END,
		        CASE WHEN h % 50 = 0 THEN now() + interval '1 hour' END,
		        CASE WHEN h % 50 = 0 THEN 5 ELSE 0 END
		 FROM (SELECT id, abs(hashtext(name)) AS h FROM queen.partitions) p`,
		`INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, original_created_at)
		 SELECT m.id, m.partition_id, '__QUEUE_MODE__', 'boom', m.created_at
		 FROM queen.messages m WHERE m.seq = 1 LIMIT 1000`,
		`ANALYZE`,
	})
	s.getRoutes(b, []string{
		"/api/v1/resources/queues/big?limit=0",
		"/api/v1/resources/queues/big?limit=100",
		"/api/v1/resources/queues/big",
		"/api/v1/resources/queues/big?limit=10000",
		"/api/v1/resources/queues/big?limit=100&offset=99900",
		"/api/v1/messages",
		"/api/v1/messages?limit=1000",
		"/api/v1/messages?limit=10000",
		"/api/v1/messages?queue=big&limit=10000",
		"/api/v1/messages?queue=big&limit=10000&offset=90000",
		"/api/v1/messages?queue=big&status=pending&limit=10000",
		"/api/v1/resources/storage",
	})
}
