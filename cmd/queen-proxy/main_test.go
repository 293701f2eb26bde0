package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// boot runs the command in process with env and returns its exit code and
// what it printed on stderr.
func boot(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &stdout, &stderr)
	return code, stderr.String()
}

// Every boot failure of PROXY.md §1.8 exits 1 with one line naming the
// variable (items 1-10; item 9 is the session key material).
func TestBootFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not a certificate"), 0o600))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	closedPort := strconv.Itoa(freePort(t))
	dev := "http://127.0.0.1:" + closedPort

	conflicting := pxdbEnv(t, pgtest.NewEmptyDB(t))
	func() {
		c, err := pgx.Connect(t.Context(), dbURL(conflicting))
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(t.Context(), "CREATE SCHEMA queen_proxy; CREATE TABLE queen_proxy.tenants (x int)")
		require.NoError(t, err)
	}()

	tests := []struct {
		name string
		env  map[string]string
		want string // the line starts with "queen-proxy: " and contains this
	}{
		{"1 one TLS variable", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_TLS_CERT": garbage}, "QUEEN_PROXY_TLS_CERT: set without QUEEN_PROXY_TLS_KEY"},
		{"2 unusable TLS material", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_TLS_CERT": garbage, "QUEEN_PROXY_TLS_KEY": garbage}, "QUEEN_PROXY_TLS_CERT/QUEEN_PROXY_TLS_KEY: TLS material unusable"},
		{"2 missing TLS files", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_TLS_CERT": "/nope.pem", "QUEEN_PROXY_TLS_KEY": "/nope.key"}, "TLS material unusable"},
		{"3 bind address with a port", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_BIND_ADDR": "127.0.0.1:6711"}, "QUEEN_PROXY_BIND_ADDR: "},
		{"4 malformed pxdb CA", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "PXDB_SSL_ROOT_CERT": "junk"}, "PXDB_SSL_ROOT_CERT: "},
		{"5 shared hosts without pxdb", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_SHARED_HOSTS": "api.test"}, "QUEEN_PROXY_SHARED_HOSTS: needs PXDB_HOST"},
		{"6 nothing to serve", map[string]string{}, "PXDB_HOST: nothing to serve"},
		{"7 pxdb unreachable", map[string]string{"PXDB_HOST": "127.0.0.1", "PXDB_PORT": closedPort, "PXDB_TIMEOUT_MS": "2000"}, "pxdb unavailable: PXDB_HOST 127.0.0.1"},
		{"8 a migration fails", conflicting, "migrations failed: apply migration 0001_init.up.sql"},
		{"9 broken session key", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_JWT_ED25519_PEM": "garbage"}, "QUEEN_PROXY_JWT_ED25519_PEM: "},
		{"spool directory unusable", with(pxdbEnv(t, pgtest.NewEmptyDB(t)), "QUEEN_PROXY_SPOOL_DIR", filepath.Join(garbage, "spool")), "QUEEN_PROXY_SPOOL_DIR "},
		{"trusted proxies unparsable", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_TRUSTED_PROXIES": "10.0.0.0/8, everyone"}, "QUEEN_PROXY_TRUSTED_PROXIES: "},
		{"10 port taken", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": dev, "QUEEN_PROXY_BIND_ADDR": "127.0.0.1", "QUEEN_PROXY_PORT": busyPort}, "QUEEN_PROXY_PORT/QUEEN_PROXY_BIND_ADDR: cannot listen"},
	}
	for _, tt := range tests {
		code, stderr := boot(t, tt.env)
		require.Equal(t, 1, code, "%s: %s", tt.name, stderr)
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.HasPrefix(l, "queen-proxy: ") {
				lines = append(lines, l)
			}
		}
		require.Len(t, lines, 1, "%s: one line, got:\n%s", tt.name, stderr)
		require.Contains(t, lines[0], tt.want, tt.name)
	}
}

// with returns env with more variables set.
func with(env map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// pxdbEnv is the environment that points the proxy at the database dbURL.
func pxdbEnv(t *testing.T, raw string) map[string]string {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return map[string]string{"PXDB_HOST": u.Hostname(), "PXDB_PORT": u.Port(), "PXDB_USER": u.User.Username(),
		"PXDB_DB": strings.TrimPrefix(u.Path, "/"), "QUEEN_PROXY_BIND_ADDR": "127.0.0.1", "QUEEN_PROXY_PORT": strconv.Itoa(freePort(t)),
		"QUEEN_PROXY_SPOOL_DIR": t.TempDir()}
}

func dbURL(env map[string]string) string {
	return "postgres://" + env["PXDB_USER"] + "@" + env["PXDB_HOST"] + ":" + env["PXDB_PORT"] + "/" + env["PXDB_DB"]
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// chain writes a CA and a leaf for 127.0.0.1 signed by it, and returns the
// CA pool and the leaf's certificate and key files.
func chain(t *testing.T) (*x509.CertPool, string, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "proxy"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "chain.pem"), filepath.Join(dir, "key.pem")
	chainPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	require.NoError(t, os.WriteFile(certFile, chainPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, certFile, keyFile
}

// A real TLS handshake with a generated chain: HTTP/2 and HTTP/1.1 both
// answer, plain HTTP on the same port does not; the first SIGTERM drains
// and exits 0.
func TestTLSListener(t *testing.T) {
	t.Parallel()
	roots, certFile, keyFile := chain(t)
	p := startProcess(t, "QUEEN_PROXY_DEV_CELL_URL=http://127.0.0.1:1", "QUEEN_PROXY_TLS_CERT="+certFile, "QUEEN_PROXY_TLS_KEY="+keyFile)
	require.Contains(t, p.logText(), "tls=true")
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	resp, err := h2.Get("https://127.0.0.1:" + p.port + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 2, resp.ProtoMajor, "h2 is offered over TLS")
	require.Equal(t, "h2", resp.TLS.NegotiatedProtocol)

	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}},
		Timeout: 10 * time.Second}
	resp, err = h1.Get("https://127.0.0.1:" + p.port + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, resp.ProtoMajor)

	resp, err = (&http.Client{Timeout: 10 * time.Second}).Get("http://127.0.0.1:" + p.port + "/healthz")
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode, "plain HTTP must not be served on the TLS port")
	}
	_, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Get("https://127.0.0.1:" + p.port + "/healthz")
	require.Error(t, err, "a client that does not trust the CA fails the handshake")

	require.Equal(t, 0, p.stop(), "a signal drains and exits 0:\n%s", p.logText())
	require.Contains(t, p.logText(), "shut down")
}

// Without TLS the listener is plaintext and says so.
func TestPlaintextListener(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "QUEEN_PROXY_DEV_CELL_URL=http://127.0.0.1:1", "QUEEN_PROXY_ENFORCE=true")
	resp, err := http.Get("http://127.0.0.1:" + p.port + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	require.JSONEq(t, `{"status":"ok","enforce":true,"tenant_header":true,"shared_hosts":0}`, body.String())
	require.Contains(t, p.logText(), "QUEEN_PROXY_TLS_CERT and QUEEN_PROXY_TLS_KEY unset: the listener is plaintext")
	require.Equal(t, 0, p.stop())
}

// With pxdb and no session key the proxy boots (API keys only), says so,
// and answers a login with 503 not_configured (PROXY.md §1.6).
func TestBootsWithoutSessionKey(t *testing.T) {
	t.Parallel()
	var env []string
	for k, v := range pxdbEnv(t, pgtest.NewEmptyDB(t)) {
		if k != "QUEEN_PROXY_PORT" && k != "QUEEN_PROXY_BIND_ADDR" {
			env = append(env, k+"="+v)
		}
	}
	p := startProcess(t, env...)
	require.Contains(t, p.logText(), "no session key: nobody can sign in")
	require.Contains(t, p.logText(), "sessions=none")
	resp, err := http.PostForm("http://127.0.0.1:"+p.port+"/auth/login", url.Values{"email": {"a@b.c"}, "password": {"x"}})
	require.NoError(t, err)
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.JSONEq(t, `{"error":"sign-in is not configured on this proxy","code":"not_configured"}`, body.String())
	require.Equal(t, 0, p.stop())
}
