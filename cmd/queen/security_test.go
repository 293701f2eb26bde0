package main

import (
	"bytes"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/cmd/queen/roots"
)

// ENC-1: a key loads the cipher and says so in one line that never shows
// the key; no key is no cipher and no line.
func TestNewCipherBootLine(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	c, err := newCipher(loadEnv(t, map[string]string{}).Encryption, logger)
	require.NoError(t, err)
	require.Nil(t, c)
	require.Empty(t, logs.String())

	key := bytes.Repeat([]byte{0xab}, 32)
	c, err = newCipher(loadEnv(t, map[string]string{"QUEEN_ENCRYPTION_KEY": hex.EncodeToString(key)}).Encryption, logger)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Contains(t, logs.String(), "encryption service initialized (AES-256-GCM)")
	require.NotContains(t, logs.String(), hex.EncodeToString(key))

	_, err = newCipher(config.Encryption{Key: key[:16]}, logger)
	require.Error(t, err)
}

// JWT-6: the JWKS is fetched over HTTPS verified against the compiled-in
// roots only: a certificate the system or the test trusts is not enough.
func TestJWKSClientTrustsCompiledRootsOnly(t *testing.T) {
	t.Parallel()
	c := jwksClient()
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	require.Same(t, roots.Mozilla(), tr.TLSClientConfig.RootCAs)

	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(idp.Close)
	_, err := c.Get(idp.URL)
	require.ErrorContains(t, err, "certificate signed by unknown authority")

	resp, err := idp.Client().Get(idp.URL) // the same server, trusting its own CA
	require.NoError(t, err)
	resp.Body.Close()
}
