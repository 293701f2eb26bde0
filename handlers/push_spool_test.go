package handlers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/crypto"
)

// ENC-4 through the spool: a flagged queue's payload is sealed before it
// reaches the disk, and so is the payload of a queue this broker knows
// nothing about while a key is loaded; the replay stores the envelope as
// it is (not sealed twice) and every read serves the plaintext.
func TestSpoolKeepsPayloadsSealed(t *testing.T) {
	t.Parallel()
	b, sp := setupSpool(t, "", func(c *Config) { c.Cipher = testCipher(t, 0x22) })
	b.configure("vault", map[string]any{"encryptionEnabled": true})
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
