package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

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

// PGT-2 in openPool: a server whose certificate does not verify fails the
// boot at once, without the 60 s retry meant for a database still starting.
// The server here answers PostgreSQL's SSLRequest and then presents a
// self-signed certificate.
func TestOpenPoolFailsFastOnUnverifiedCertificate(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	t.Cleanup(func() { ln.Close() })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 8)
			if _, err := conn.Read(buf); err == nil {
				if _, err := conn.Write([]byte("S")); err == nil {
					_ = tls.Server(conn, srvTLS).Handshake()
				}
			}
			conn.Close()
		}
	}()

	cfg := loadEnv(t, map[string]string{
		"PG_HOST": "127.0.0.1", "PG_PORT": strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "PG_USE_SSL": "true",
	})
	var logs bytes.Buffer
	pool, err := openPool(t.Context(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.Nil(t, pool)
	var certErr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &certErr)
	require.NotContains(t, logs.String(), "retrying", "no retry loop")
}
