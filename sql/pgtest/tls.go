package pgtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var tlsMu sync.Mutex

// EnableTLS turns on ssl in the harness-started cluster, serving certPEM (the
// server certificate first, then any intermediates) and keyPEM, and returns
// once new connections are offered that certificate. Plaintext connections
// keep working (pg_hba's host lines match both), so tests that do not use
// TLS are unaffected. The setting lasts until the cluster is destroyed; a
// second call replaces the certificate. It skips the test when
// QUEEN_TEST_DATABASE_URL is set: the harness cannot reach that server's
// files.
func EnableTLS(t testing.TB, certPEM, keyPEM []byte) {
	t.Helper()
	c := managed(t)
	tlsMu.Lock()
	defer tlsMu.Unlock()

	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("pgtest: EnableTLS: certPEM does not start with a CERTIFICATE block")
	}
	leaf := block.Bytes
	// A new pair of files per call: the server reads them at reload.
	dir, err := os.MkdirTemp(c.root, "tls-")
	if err != nil {
		t.Fatalf("pgtest: EnableTLS: %v", err)
	}
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	for _, f := range []struct {
		path string
		data []byte
	}{{certFile, certPEM}, {keyFile, keyPEM}} {
		// PostgreSQL refuses a key readable by others than its owner.
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			t.Fatalf("pgtest: EnableTLS: %v", err)
		}
	}
	if c.cred != nil {
		for _, p := range []string{dir, certFile, keyFile} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				t.Fatalf("pgtest: EnableTLS: chown %s to the postgres user: %v", p, err)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	h := setup(t)
	for _, stmt := range []string{
		"ALTER SYSTEM SET ssl_cert_file = " + literal(certFile),
		"ALTER SYSTEM SET ssl_key_file = " + literal(keyFile),
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if err := h.exec(ctx, stmt); err != nil {
			t.Fatalf("pgtest: EnableTLS: %s: %v", stmt, err)
		}
	}

	// The reload is asynchronous: wait until a new connection is offered
	// this certificate.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		served, err := servedLeaf(ctx, c)
		if err == nil && bytes.Equal(served, leaf) {
			return
		}
		if err == nil {
			err = fmt.Errorf("another certificate is served")
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: EnableTLS: the server does not serve the certificate after %s: %v\nserver log (%s):\n%s",
				readyTimeout, lastErr, c.logPath, tail(c.logPath, 20))
		case <-tick.C:
		}
	}
}

// servedLeaf connects with TLS, trusting anything, and returns the DER of
// the certificate the server presented.
func servedLeaf(ctx context.Context, c *cluster) ([]byte, error) {
	cfg, err := pgx.ParseConfig(c.url("postgres").String())
	if err != nil {
		return nil, err
	}
	var leaf []byte
	cfg.TLSConfig = &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				leaf = cs.PeerCertificates[0].Raw
			}
			return nil
		},
	}
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	_ = conn.Close(ctx)
	return leaf, nil
}
