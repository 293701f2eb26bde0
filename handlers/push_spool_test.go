package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/handlers/metrics"
)

// ENC-4 through the spool: a flagged queue's payload is sealed before it
// reaches the disk, and so is the payload of a queue this broker knows
// nothing about while a key is loaded; the replay stores the envelope as
// it is (not sealed twice) and every read serves the plaintext.
func TestSpoolKeepsPayloadsSealed(t *testing.T) {
	t.Parallel()
	b, sp := setupSpool(t, "", func(c *testConfig) { c.Cipher = testCipher(t, 0x22) })
	b.configure("vault", &client.QueueOptions{EncryptionEnabled: ptr(true)})
	b.setSwitch("/api/v1/system/maintenance", true)
	payload := map[string]any{"secret": secretMarker, "n": 7}
	want, err := json.Marshal(payload)
	require.NoError(t, err)
	for _, p := range b.push(item("vault", "", "v1", payload), item("vault", "", "v2", payload), item("unknown", "", "u1", payload)) {
		require.Equal(t, "buffered", p.Status)
	}

	files, err := filepath.Glob(filepath.Join(sp.Dir(), "queen-*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.False(t, bytes.Contains(raw, []byte(secretMarker)), "plaintext in %s", f)
		require.Contains(t, string(raw), `"encrypted":true`)
	}

	b.setSwitch("/api/v1/system/maintenance", false)
	waitDrained(t, sp)
	for _, q := range []string{"vault", "unknown"} {
		for tx, r := range b.stored(q) {
			require.True(t, r.encrypted, tx)
			require.True(t, crypto.IsEnvelope([]byte(r.payload)), "%s: %s", tx, r.payload)
			require.NotContains(t, r.payload, secretMarker)
		}
		p := b.pop("/api/v1/pop/queue/" + q + "?batch=10")
		require.NotNil(t, p)
		for _, m := range p.Messages {
			require.JSONEq(t, string(want), string(m.Data), "%s/%s: opened once, sealed once", q, m.TransactionID)
		}
	}
}

// Pushes answered `buffered` count as push requests when they are answered
// and as pushed messages when the replay stores them, never twice; a
// replayed duplicate is not a stored message.
func TestSpoolReplayIsCountedOnce(t *testing.T) {
	t.Parallel()
	reg := metrics.New()
	b, sp := setupSpool(t, "", func(c *testConfig) { c.Metrics = reg })
	counters := func(queue string) metrics.QueueCounters {
		for _, q := range reg.Queues() {
			if q.Queue == queue {
				return q.QueueCounters
			}
		}
		return metrics.QueueCounters{}
	}
	require.Equal(t, "queued", b.push(item("sm", "", "t0", 0))[0].Status)
	b.setSwitch("/api/v1/system/maintenance", true)
	for _, p := range b.push(item("sm", "", "t1", 1), item("sm", "", "t2", 2), item("other", "", "o1", 1)) {
		require.Equal(t, "buffered", p.Status)
	}
	require.Equal(t, "buffered", b.push(item("sm", "", "t0", 0))[0].Status, "a duplicate of a stored one")

	c := counters("sm")
	require.Equal(t, int64(3), c.PushRequests)
	require.Equal(t, int64(1), c.PushMessages, "nothing stored yet")
	require.Equal(t, int64(3), reg.Process().Of(metrics.OpPush))

	b.setSwitch("/api/v1/system/maintenance", false)
	waitDrained(t, sp)
	c = counters("sm")
	require.Equal(t, int64(3), c.PushRequests, "a replay is not a request")
	require.Equal(t, int64(3), c.PushMessages, "t0, then t1 and t2 from the spool; not t0 again")
	require.Equal(t, int64(1), counters("other").PushMessages)
	require.Equal(t, int64(3), reg.Process().Of(metrics.OpPush))

	var m struct {
		Queues map[string]struct {
			Pushed int `json:"pushed"`
		} `json:"queues"`
	}
	b.doJSON("GET", "/metrics", nil, http.StatusOK, &m)
	require.Equal(t, 3, m.Queues["sm"].Pushed)
}
