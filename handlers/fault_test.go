package handlers

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

// With PostgreSQL down, every data-plane call answers a 5xx (clients retry
// and fail over), never a silent success; when it comes back the same broker
// serves again without a restart. Not parallel: it stops the shared cluster.
func TestDatabaseOutageAnswers5xxAndRecovers(t *testing.T) {
	b := setup(t)
	out := b.push(item("outage", "", "before", 1))

	pgtest.Stop(t)
	status, body := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("outage", "", "during", 1)}})
	require.GreaterOrEqual(t, status, 500, "%s", body)
	require.Contains(t, string(body), `"error"`)
	status, _ = b.do("GET", "/api/v1/pop/queue/outage", nil)
	require.GreaterOrEqual(t, status, 500)
	status, _ = b.do("POST", "/api/v1/ack", map[string]any{"transactionId": "before", "partitionId": out[0].PartitionID})
	require.GreaterOrEqual(t, status, 500)
	status, _ = b.do("GET", "/health", nil)
	require.Equal(t, http.StatusServiceUnavailable, status)

	pgtest.Start(t)
	p := b.pop("/api/v1/pop/queue/outage?batch=10&wait=true&timeout=5000")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1, "the push during the outage was refused, not half-stored")
	require.Equal(t, "before", p.Messages[0].TransactionID)
	require.Equal(t, "queued", b.push(item("outage", "", "after", 1))[0].Status)
}
