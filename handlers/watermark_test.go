package handlers

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// backdate moves the stored clock readings an hour into the past, as if an
// hour had gone by since the last push: partitions look idle, and the
// watermarks computed so far move with them. The brokers' start hints are
// clock readings kept in memory: stamping reset_at makes them drop theirs.
func (b *testBundle) backdate() {
	b.t.Helper()
	_, err := b.pool.Exec(b.t.Context(), "UPDATE queen.partitions SET last_message_at = last_message_at - interval '1 hour'")
	require.NoError(b.t, err)
	_, err = b.pool.Exec(b.t.Context(), "UPDATE queen.consumer_watermarks SET scan_from = scan_from - interval '1 hour', reset_at = clock_timestamp()")
	require.NoError(b.t, err)
}

func (b *testBundle) watermark(group string) time.Time {
	b.t.Helper()
	var at time.Time
	err := b.pool.QueryRow(b.t.Context(), "SELECT scan_from FROM queen.consumer_watermarks WHERE consumer_group = $1", group).Scan(&at)
	require.NoError(b.t, err)
	return at
}

// Idle partitions drop below the watermark; nothing still pending ever does,
// and what can make old partitions pending again resets it.
func TestPopWatermarkSkipsOnlyIdlePartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("wm", &client.QueueOptions{LeaseTime: ptr(1)})
	b.push(item("wm", "a", "a1", 1), item("wm", "b", "b1", 1), item("wm", "c", "c1", 1))

	// The group drains two partitions; the third stays leased by a
	// consumer that dies.
	for range 2 {
		p := b.pop("/api/v1/pop/queue/wm?consumerGroup=g")
		require.NotNil(t, p)
		require.True(t, b.ack(p.Messages[0].TransactionID, p.PartitionID, "completed", "g", p.LeaseID).Success)
	}
	held := b.pop("/api/v1/pop/queue/wm?consumerGroup=g")
	require.NotNil(t, held)
	heldTx := held.Messages[0].TransactionID
	b.backdate()

	// An empty scan advances the watermark, but not past the held
	// partition, which is still pending under its lease.
	require.Nil(t, b.pop("/api/v1/pop/queue/wm?consumerGroup=g"))
	var cAt time.Time
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT last_message_at FROM queen.partitions WHERE id = $1", held.PartitionID).Scan(&cAt))
	require.False(t, b.watermark("g").After(cAt), "the watermark passed a pending partition")

	// It comes back when its lease expires.
	again := b.pop("/api/v1/pop/queue/wm?consumerGroup=g&wait=true&timeout=10000")
	require.NotNil(t, again)
	require.Equal(t, heldTx, again.Messages[0].TransactionID)
	require.True(t, b.ack(heldTx, again.PartitionID, "completed", "g", again.LeaseID).Success)

	// Everything consumed and idle: the watermark moves above all of it.
	require.Nil(t, b.pop("/api/v1/pop/queue/wm?consumerGroup=g"))
	require.True(t, b.watermark("g").After(cAt), "idle partitions should fall below the watermark")

	// A new push lands above the watermark.
	b.push(item("wm", "a", "a2", 2))
	p := b.pop("/api/v1/pop/queue/wm?consumerGroup=g")
	require.NotNil(t, p)
	require.Equal(t, "a2", p.Messages[0].TransactionID)
	require.True(t, b.ack("a2", p.PartitionID, "completed", "g", p.LeaseID).Success)

	// A seek back makes the idle partitions pending again: they are found.
	b.doJSON("POST", "/api/v1/consumer-groups/g/queues/wm/seek",
		map[string]any{"timestamp": time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)}, http.StatusOK, nil)
	p = b.pop("/api/v1/pop/queue/wm?consumerGroup=g&batch=10&partitions=3")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 4)

	// Deleting the group's cursors does too.
	b.backdate()
	require.Nil(t, b.pop("/api/v1/pop/queue/wm?consumerGroup=other&autoAck=true&batch=10&partitions=3&subscriptionMode=new"))
	b.doJSON("DELETE", "/api/v1/consumer-groups/g", nil, http.StatusOK, nil)
	p = b.pop("/api/v1/pop/queue/wm?consumerGroup=g&batch=10&partitions=3")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 4)
}
