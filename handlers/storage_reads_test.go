package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The storage read counts the tenant's payloads and nothing of another
// tenant's, and follows deletions.
func TestStorageIsPerTenant(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	const acme, globex = "0a000000-0000-0000-0000-00000000000a", "0b000000-0000-0000-0000-00000000000b"
	storage := func(tenant string) (bytes, messages int64) {
		status, body := b.raw("GET", "/api/v1/resources/storage", nil, "x-queen-tenant", tenant)
		require.Equal(t, http.StatusOK, status, body)
		var v struct{ RetainedBytes, Messages int64 }
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		return v.RetainedBytes, v.Messages
	}
	bytes, messages := storage(acme)
	require.Zero(t, bytes)
	require.Zero(t, messages)

	items := []any{}
	for range 3 {
		items = append(items, map[string]any{"queue": "orders", "payload": map[string]any{"text": strings.Repeat("abcdefgh", 100)}})
	}
	status, body := b.raw("POST", "/api/v1/push", map[string]any{"items": items}, "x-queen-tenant", acme)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = b.raw("POST", "/api/v1/push", map[string]any{"items": items[:1]}, "x-queen-tenant", globex)
	require.Equal(t, http.StatusCreated, status, body)

	var want int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT sum(pg_column_size(m.payload)) FROM queen.messages m
		JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.tenant_id = $1`, acme).Scan(&want))
	bytes, messages = storage(acme)
	require.Equal(t, want, bytes)
	require.EqualValues(t, 3, messages)
	require.Greater(t, bytes, int64(3*100), "a payload of 800 characters takes more than 100 bytes stored")
	other, messages := storage(globex)
	require.EqualValues(t, 1, messages)
	require.Less(t, other, bytes)

	status, body = b.raw("DELETE", "/api/v1/resources/queues/orders", nil, "x-queen-tenant", acme)
	require.Equal(t, http.StatusOK, status, body)
	bytes, messages = storage(acme)
	require.Zero(t, bytes)
	require.Zero(t, messages)
	_, messages = storage(globex)
	require.EqualValues(t, 1, messages, "another tenant's queue of the same name stays")
}
