package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// queue-ops `partitionsDeleted`: counted by the database in the transaction
// that deletes the partitions, per queue and minute. A deleted queue's
// partitions count under its own name, once (not again as the cascade
// deletes them); partitions deleted on their own count under their queue.
func TestQueueOpsCountsDeletedPartitions(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.push(item("gone", "p1", "", 1), item("gone", "p2", "", 2), item("gone", "p3", "", 3))
	b.push(item("kept", "k1", "", 1), item("kept", "k2", "", 2))
	b.configure("configured", nil) // its Default partition only

	b.doJSON("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK, nil)
	b.doJSON("DELETE", "/api/v1/resources/queues/configured", nil, http.StatusOK, nil)
	b.doJSON("DELETE", "/api/v1/resources/queues/configured", nil, http.StatusOK, nil) // nothing left: nothing counted
	// A partition deleted on its own, as a partition clean-up would.
	b.exec(`DELETE FROM queen.partitions p USING queen.queues q
	        WHERE q.id = p.queue_id AND q.name = 'kept' AND p.name = 'k1'`)

	type point struct {
		Bucket            string
		QueueName         string
		PartitionsCreated int
		PartitionsDeleted int
		PushRequests      int
	}
	var ops struct {
		Queues []string
		Series []point
	}
	deleted := func(query string) map[string]int {
		b.doJSON("GET", "/api/v1/analytics/queue-ops"+query, nil, http.StatusOK, &ops)
		out := map[string]int{}
		for _, s := range ops.Series {
			if s.PartitionsDeleted > 0 {
				out[s.QueueName] += s.PartitionsDeleted
			}
		}
		return out
	}
	require.Equal(t, map[string]int{"gone": 3, "kept": 1, "configured": 1}, deleted(""))
	require.Contains(t, ops.Queues, "gone", "a deleted queue still shows where its partitions went")
	require.Equal(t, map[string]int{"gone": 3}, deleted("?queue=gone"))

	// The counting rows are the database's, not a broker's minute: the
	// per-queue Prometheus gauges leave them out.
	status, raw := b.do("GET", "/metrics/prometheus", nil)
	require.Equal(t, http.StatusOK, status)
	for _, line := range strings.Split(string(raw), "\n") {
		require.False(t, strings.HasPrefix(line, "queen_queue_") && strings.Contains(line, `queue="gone"`), line)
	}
}
