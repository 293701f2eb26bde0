package pgtls_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/cmd/queen/pgtls"
	"github.com/queenforgo/queen/cmd/queen/roots"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// PGT-4 and PGT-5: what each combination trusts, whether it verifies, and
// what the boot log warns about.
func TestTrustTable(t *testing.T) {
	t.Parallel()
	const ca = "-----BEGIN CERTIFICATE-----\n..."
	for _, tc := range []struct {
		s        pgtls.Settings
		trust    pgtls.Trust
		verified bool
		advisory string // a fragment, or "" for none
	}{
		{pgtls.Settings{}, pgtls.Plaintext, false, ""},
		{pgtls.Settings{RejectUnauthorized: true}, pgtls.Plaintext, false, ""},
		{pgtls.Settings{RootCertPEM: ca}, pgtls.Plaintext, false, "PG_SSL_ROOT_CERT is set but PG_USE_SSL is false"},
		{pgtls.Settings{UseSSL: true, RejectUnauthorized: true}, pgtls.WebPKIRoots, true, ""},
		{pgtls.Settings{UseSSL: true}, pgtls.AcceptAny, false, "encrypted but not authenticated"},
		{pgtls.Settings{UseSSL: true, RejectUnauthorized: true, RootCertPEM: ca}, pgtls.SuppliedCA, true, ""},
		{pgtls.Settings{UseSSL: true, RootCertPEM: ca}, pgtls.SuppliedCA, true, "PG_SSL_REJECT_UNAUTHORIZED=false is ignored"},
	} {
		require.Equal(t, tc.trust, tc.s.Trust(), "%+v", tc.s)
		require.Equal(t, tc.verified, tc.s.Verified(), "%+v", tc.s)
		if tc.advisory == "" {
			require.Empty(t, tc.s.Advisory(), "%+v", tc.s)
		} else {
			require.Contains(t, tc.s.Advisory(), tc.advisory, "%+v", tc.s)
			require.NotContains(t, tc.s.Advisory(), ca)
		}
	}
}

func TestTLSConfigPerPolicy(t *testing.T) {
	t.Parallel()
	c, err := pgtls.Settings{}.TLSConfig("db")
	require.NoError(t, err)
	require.Nil(t, c, "plaintext has no TLS at all")

	c, err = pgtls.Settings{UseSSL: true, RejectUnauthorized: true}.TLSConfig("db.example.com")
	require.NoError(t, err)
	require.Same(t, roots.Mozilla(), c.RootCAs, "the compiled-in roots, not the system store")
	require.Equal(t, "db.example.com", c.ServerName)
	require.False(t, c.InsecureSkipVerify)

	c, err = pgtls.Settings{UseSSL: true}.TLSConfig("db")
	require.NoError(t, err)
	require.True(t, c.InsecureSkipVerify)

	_, err = pgtls.Settings{UseSSL: true, RootCertPEM: "not pem"}.TLSConfig("db")
	require.ErrorContains(t, err, "PG_SSL_ROOT_CERT")
}

// pki is a private CA with an intermediate, and a server certificate for
// 127.0.0.1 only, made for the test.
type pki struct {
	caPEM         string // the root, what PG_SSL_ROOT_CERT holds
	chainPEM, key []byte // server certificate + intermediate, and its key
}

var (
	serverPKIOnce sync.Once
	serverPKI     *pki
)

// tlsServer turns TLS on in the harness cluster once for the package.
func tlsServer(t *testing.T) *pki {
	t.Helper()
	serverPKIOnce.Do(func() {
		serverPKI = newPKI(t)
		pgtest.EnableTLS(t, serverPKI.chainPEM, serverPKI.key)
	})
	if serverPKI == nil {
		t.Fatal("TLS setup failed in another test")
	}
	return serverPKI
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	now := time.Now()
	serial := int64(0)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		require.NoError(t, err)
		cert, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		return cert, key
	}
	ca := func(name string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	}
	root, rootKey := issue(ca("queen test root"), nil, nil)
	inter, interKey := issue(ca("queen test intermediate"), root, rootKey)
	leaf, leafKey := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, inter, interKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	require.NoError(t, err)
	enc := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	return &pki{
		caPEM:    string(enc("CERTIFICATE", root.Raw)),
		chainPEM: append(enc("CERTIFICATE", leaf.Raw), enc("CERTIFICATE", inter.Raw)...),
		key:      enc("PRIVATE KEY", keyDER),
	}
}

// connect goes the way the broker's openPool goes: the environment through
// config.Load, the connection string, then pgtls.Configure. It returns
// whether the session is encrypted, as PostgreSQL sees it.
func connect(t *testing.T, env map[string]string) (bool, error) {
	t.Helper()
	srv := pgtest.ServerInfo()
	full := map[string]string{
		"PG_HOST": srv.Host, "PG_PORT": strconv.Itoa(srv.Port), "PG_USER": srv.User, "PG_DB": "postgres",
		"QUEEN_PG_CONNECT_TIMEOUT_MS": "5000",
	}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := full[k]; return v, ok })
	require.NoError(t, err)
	pcfg, err := pgxpool.ParseConfig(cfg.PostgresURL())
	require.NoError(t, err)
	require.NoError(t, pgtls.Configure(&pcfg.ConnConfig.Config, cfg.Postgres.TLS()))
	pcfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	require.NoError(t, err)
	defer pool.Close()
	var ssl bool
	err = pool.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
	return ssl, err
}

// PGT-1, PGT-2, PGT-3, PGT-5 against a real PostgreSQL serving a chain
// from a private CA.
func TestPostgresLink(t *testing.T) {
	t.Parallel()
	p := tlsServer(t)
	other := newPKI(t)

	t.Run("plaintext when off", func(t *testing.T) {
		ssl, err := connect(t, map[string]string{"PG_USE_SSL": "false"})
		require.NoError(t, err)
		require.False(t, ssl)
	})
	t.Run("verified with the private CA", func(t *testing.T) {
		ssl, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": p.caPEM})
		require.NoError(t, err)
		require.True(t, ssl)
	})
	t.Run("private CA on one env line", func(t *testing.T) {
		ssl, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": strings.ReplaceAll(p.caPEM, "\n", `\n`)})
		require.NoError(t, err)
		require.True(t, ssl)
	})
	t.Run("wrong host name refused", func(t *testing.T) {
		// localhost reaches the same server, but the certificate names
		// only 127.0.0.1.
		_, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": p.caPEM, "PG_HOST": "localhost"})
		var hostErr x509.HostnameError
		require.ErrorAs(t, err, &hostErr)
	})
	t.Run("the CA outranks reject-unauthorized=false", func(t *testing.T) {
		_, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": p.caPEM,
			"PG_SSL_REJECT_UNAUTHORIZED": "false", "PG_HOST": "localhost"})
		var hostErr x509.HostnameError
		require.ErrorAs(t, err, &hostErr)
	})
	t.Run("unknown CA refused: compiled-in roots", func(t *testing.T) {
		_, err := connect(t, map[string]string{"PG_USE_SSL": "true"})
		var authErr x509.UnknownAuthorityError
		require.ErrorAs(t, err, &authErr)
	})
	t.Run("unknown CA refused: another private CA", func(t *testing.T) {
		_, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": other.caPEM})
		var authErr x509.UnknownAuthorityError
		require.ErrorAs(t, err, &authErr)
	})
	// A host list (a failover group): each host's certificate must name
	// that host. localhost reaches the server but is not in its
	// certificate, so the first entry fails and the second, named right,
	// is verified; the other way round nothing is.
	t.Run("each host of a list verified under its own name", func(t *testing.T) {
		port := strconv.Itoa(pgtest.ServerInfo().Port)
		ssl, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": p.caPEM,
			"PG_HOST": "localhost:" + port + ",127.0.0.1:" + port})
		require.NoError(t, err)
		require.True(t, ssl)

		dead, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		deadAddr := dead.Addr().String()
		require.NoError(t, dead.Close())
		_, err = connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_ROOT_CERT": p.caPEM,
			"PG_HOST": deadAddr + ",localhost:" + port})
		var hostErr x509.HostnameError
		require.ErrorAs(t, err, &hostErr)
	})
	t.Run("reject-unauthorized=false encrypts without verifying", func(t *testing.T) {
		ssl, err := connect(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_REJECT_UNAUTHORIZED": "false", "PG_HOST": "localhost"})
		require.NoError(t, err)
		require.True(t, ssl)
	})
}

// PGT-1: TLS on never falls back to plaintext. A server that does not
// speak TLS at all (here: a listener that answers the SSLRequest with 'N',
// as PostgreSQL with ssl=off does) is a connection error.
func TestNoPlaintextFallback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // cleanups run last-in first-out: after the Close below
	t.Cleanup(func() { ln.Close() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 8)
			if _, err := conn.Read(buf); err == nil {
				_, _ = conn.Write([]byte("N"))
			}
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, env := range []map[string]string{
		{"PG_USE_SSL": "true"},
		{"PG_USE_SSL": "true", "PG_SSL_REJECT_UNAUTHORIZED": "false"},
	} {
		env["PG_HOST"], env["PG_PORT"], env["PG_DB"] = "127.0.0.1", strconv.Itoa(port), "postgres"
		cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		require.NoError(t, err)
		pcfg, err := pgconn.ParseConfig(cfg.PostgresURL())
		require.NoError(t, err)
		require.NoError(t, pgtls.Configure(pcfg, cfg.Postgres.TLS()))
		_, err = pgconn.ConnectConfig(t.Context(), pcfg)
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "server refused TLS connection"), err.Error())
	}
}

// Configure replaces pgx's own TLS choice on every host and leaves Unix
// sockets alone.
func TestConfigureHosts(t *testing.T) {
	t.Parallel()
	cfg, err := pgconn.ParseConfig("host=db1,db2,/run/postgresql sslmode=prefer")
	require.NoError(t, err)
	require.NoError(t, pgtls.Configure(cfg, pgtls.Settings{UseSSL: true, RejectUnauthorized: true}))
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	for _, fb := range all {
		if strings.HasPrefix(fb.Host, "/") {
			require.Nil(t, fb.TLSConfig, fb.Host)
			continue
		}
		require.NotNil(t, fb.TLSConfig, fb.Host)
		require.Equal(t, fb.Host, fb.TLSConfig.ServerName)
		require.Same(t, roots.Mozilla(), fb.TLSConfig.RootCAs)
		require.False(t, fb.TLSConfig.InsecureSkipVerify)
	}

	require.NoError(t, pgtls.Configure(cfg, pgtls.Settings{}))
	require.Nil(t, cfg.TLSConfig)
	for _, fb := range cfg.Fallbacks {
		require.Nil(t, fb.TLSConfig, fb.Host)
	}
}
