package config_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen-proxy/config"
)

func load(env map[string]string) (config.Config, error) {
	return config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(map[string]string{"QUEEN_PROXY_DEV_CELL_URL": "http://127.0.0.1:6632"})
	require.NoError(t, err)
	require.Equal(t, 6711, c.Port)
	require.Equal(t, "0.0.0.0:6711", c.ListenAddr())
	require.False(t, c.TLS())
	require.Equal(t, 35*time.Second, c.UpstreamTimeout)
	require.Equal(t, 90*time.Second, c.LongPollMax)
	require.Equal(t, 10*time.Second, c.LongPollMargin)
	require.Equal(t, 5*time.Second, c.ConnectTimeout)
	require.Equal(t, 10*time.Minute, c.StaleGrace)
	require.EqualValues(t, 16<<20, c.MaxBodyBytes)
	require.EqualValues(t, 10000, c.MaxBatchItems)
	require.EqualValues(t, 5000, c.CellMaxParked)
	require.False(t, c.Enforce)
	require.True(t, c.TenantHeader)
	require.Equal(t, time.Minute, c.Reconcile)
	require.Equal(t, 10*time.Second, c.StorageRefresh)
	require.Equal(t, "00000000-0000-0000-0000-000000000001", c.DevTenant)
	require.Equal(t, "queen_proxy", c.PXDB.Database)
	require.Equal(t, 16, c.PXDB.PoolSize)
	require.True(t, c.PXDB.SSLRejectUnauthorized)
	require.Equal(t, "dev-static", c.Mode())
	require.Equal(t, config.Sessions{Issuer: "queen-proxy", TTL: 24 * time.Hour, CookieName: "queen_session", RevocationSweep: time.Hour},
		c.Sessions)
	require.Equal(t, config.Usage{FlushInterval: 15 * time.Second, SpoolDir: "./queen-proxy-spool", RollupInterval: time.Hour,
		WarnPercent: 80, KeepDays: 90}, c.Usage)
}

func TestSessionAndUsageVariables(t *testing.T) {
	t.Parallel()
	c, err := load(map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_JWT_ISS": "me", "QUEEN_PROXY_JWT_TTL_S": "600",
		"QUEEN_PROXY_JWT_AUD": "acme.example.com", "QUEEN_PROXY_COOKIE_NAME": "sid", "QUEEN_PROXY_COOKIE_DOMAIN": ".Example.com",
		"QUEEN_PROXY_REVOCATION_STRICT": "true", "QUEEN_PROXY_REVOCATION_SWEEP_MS": "0", "QUEEN_PROXY_OPERATOR_ENABLED": "yes",
		"QUEEN_PROXY_TRUSTED_PROXIES": "loopback, 10.0.0.0/8", "QUEEN_PROXY_METER_FLUSH_MS": "1000", "QUEEN_PROXY_SPOOL_DIR": "/var/spool/qp",
		"QUEEN_PROXY_ROLLUP_MS": "60000", "QUEEN_PROXY_QUOTA_WARN_PERCENT": "90", "QUEEN_PROXY_USAGE_KEEP_DAYS": "30",
		"QUEEN_PROXY_RECONCILE_MS": "2500", "QUEEN_PROXY_STORAGE_REFRESH_MS": "500"})
	require.NoError(t, err)
	require.Equal(t, 2500*time.Millisecond, c.Reconcile)
	require.Equal(t, 500*time.Millisecond, c.StorageRefresh)
	s := c.Sessions
	require.Equal(t, "me", s.Issuer)
	require.Equal(t, 10*time.Minute, s.TTL)
	require.Equal(t, "acme.example.com", s.Audience)
	require.Equal(t, "sid", s.CookieName)
	require.Equal(t, "example.com", s.CookieDomain)
	require.True(t, s.RevocationStrict)
	require.Zero(t, s.RevocationSweep)
	require.True(t, s.OperatorEnabled)
	require.False(t, s.TrustedProxies.Empty())
	require.Equal(t, config.Usage{FlushInterval: time.Second, SpoolDir: "/var/spool/qp", RollupInterval: time.Minute,
		WarnPercent: 90, KeepDays: 30}, c.Usage)

	_, err = load(map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_JWT_TTL_S": "10", "QUEEN_PROXY_COOKIE_NAME": "a b",
		"QUEEN_PROXY_COOKIE_DOMAIN": "exa mple.com", "QUEEN_PROXY_TRUSTED_PROXIES": "everyone", "QUEEN_PROXY_QUOTA_WARN_PERCENT": "120",
		"QUEEN_PROXY_USAGE_KEEP_DAYS": "0", "QUEEN_PROXY_METER_FLUSH_MS": "5", "QUEEN_PROXY_OPERATOR_ENABLED": "sure",
		"QUEEN_PROXY_RECONCILE_MS": "50", "QUEEN_PROXY_STORAGE_REFRESH_MS": "499"})
	require.Error(t, err)
	for _, name := range []string{"QUEEN_PROXY_JWT_TTL_S", "QUEEN_PROXY_COOKIE_NAME", "QUEEN_PROXY_COOKIE_DOMAIN",
		"QUEEN_PROXY_TRUSTED_PROXIES", "QUEEN_PROXY_QUOTA_WARN_PERCENT", "QUEEN_PROXY_USAGE_KEEP_DAYS", "QUEEN_PROXY_METER_FLUSH_MS",
		"QUEEN_PROXY_OPERATOR_ENABLED", "QUEEN_PROXY_RECONCILE_MS", "QUEEN_PROXY_STORAGE_REFRESH_MS"} {
		require.Contains(t, err.Error(), name+": ")
	}
	require.Len(t, strings.Split(err.Error(), "\n"), 10, "one line per variable")
}

func TestParsing(t *testing.T) {
	t.Parallel()
	base := map[string]string{"PXDB_HOST": "db"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	c, err := load(with("QUEEN_PROXY_ENFORCE", "TRUE", "QUEEN_PROXY_TENANT_HEADER", "off", "QUEEN_PROXY_BIND_ADDR", "[::1]",
		"QUEEN_PROXY_SHARED_HOSTS", " API.Queen.Test:443, ,edge.test. ", "QUEEN_PROXY_DEV_TENANT", "AAAAAAAA-0000-0000-0000-00000000000B",
		"QUEEN_PROXY_DEFAULT_CLUSTER", "Acme", "PXDB_TIMEOUT_MS", "100", "QUEEN_PROXY_DEV_CELL_TOKEN", ""))
	require.NoError(t, err)
	require.True(t, c.Enforce)
	require.False(t, c.TenantHeader)
	require.Equal(t, "[::1]:6711", c.ListenAddr())
	require.Equal(t, []string{"api.queen.test", "edge.test"}, c.SharedHosts)
	require.Equal(t, "aaaaaaaa-0000-0000-0000-00000000000b", c.DevTenant)
	require.Equal(t, "acme", c.DefaultCluster)
	require.Equal(t, 100*time.Millisecond, c.PXDB.Timeout)
	require.Nil(t, c.DevCellToken, "an empty optional variable counts as unset")
	require.Equal(t, "pxdb", c.Mode())
}

// Every problem at once, one line each, starting with the variable; the
// boot failures of PROXY.md §1.8 that the configuration alone decides.
func TestRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"only the certificate (§1.8 item 1)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_TLS_CERT": "/c.pem"},
			[]string{"QUEEN_PROXY_TLS_CERT: set without QUEEN_PROXY_TLS_KEY"}},
		{"only the key (§1.8 item 1)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_TLS_KEY": "/k.pem"},
			[]string{"QUEEN_PROXY_TLS_KEY: set without QUEEN_PROXY_TLS_CERT"}},
		{"bind address with a port (§1.8 item 3)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_BIND_ADDR": "127.0.0.1:6711"},
			[]string{`QUEEN_PROXY_BIND_ADDR: "127.0.0.1:6711" carries a port`}},
		{"empty bind address (§1.8 item 3)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_BIND_ADDR": ""},
			[]string{"QUEEN_PROXY_BIND_ADDR: is set to the empty string"}},
		{"malformed root certificate, even without pxdb (§1.8 item 4)",
			map[string]string{"QUEEN_PROXY_DEV_CELL_URL": "http://b:1", "PXDB_SSL_ROOT_CERT": "-----BEGIN CERTIFICATE-----\\nnope\\n-----END CERTIFICATE-----"},
			[]string{"PXDB_SSL_ROOT_CERT: "}},
		{"shared hosts without pxdb (§1.8 item 5)", map[string]string{"QUEEN_PROXY_DEV_CELL_URL": "http://b:1", "QUEEN_PROXY_SHARED_HOSTS": "api.test"},
			[]string{"QUEEN_PROXY_SHARED_HOSTS: needs PXDB_HOST"}},
		{"nothing to serve (§1.8 item 6)", map[string]string{}, []string{"PXDB_HOST: nothing to serve"}},
		{"garbage session key (§1.8 item 9)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_JWT_ED25519_PEM": "garbage"},
			[]string{"QUEEN_PROXY_JWT_ED25519_PEM: holds no PEM block"}},
		{"a key of another kind (§1.8 item 9)", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_JWT_ED25519_PEM": ecKeyPEM(t),
			"QUEEN_PROXY_JWT_ED25519_PUB_PEM": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
			[]string{"QUEEN_PROXY_JWT_ED25519_PEM: is not a PKCS#8 Ed25519 private key", "QUEEN_PROXY_JWT_ED25519_PUB_PEM: is not an Ed25519 public key"}},
		{"bad values", map[string]string{"PXDB_HOST": "db", "QUEEN_PROXY_PORT": "abc", "QUEEN_PROXY_ENFORCE": "maybe",
			"PXDB_TIMEOUT_MS": "50", "QUEEN_PROXY_DEV_CELL_URL": "ftp://x", "QUEEN_PROXY_DEV_TENANT": "tenant-1",
			"QUEEN_PROXY_DEFAULT_CLUSTER": "no_such", "LOG_LEVEL": "loud", "PXDB_PASSWORD": "a\x00b"},
			[]string{`QUEEN_PROXY_PORT: "abc" is not an integer`, `QUEEN_PROXY_DEV_CELL_URL: "ftp://x" is not an http(s)`,
				`QUEEN_PROXY_DEV_TENANT: "tenant-1" is not a UUID`, `QUEEN_PROXY_DEFAULT_CLUSTER: "no_such" is not a cluster slug`,
				`QUEEN_PROXY_ENFORCE: "maybe" is not a boolean`, "PXDB_PASSWORD: contains a NUL byte",
				`PXDB_TIMEOUT_MS: "50" is out of range`, `LOG_LEVEL: "loud" is not one of`}},
	}
	for _, tt := range tests {
		_, err := load(tt.env)
		require.Error(t, err, tt.name)
		lines := strings.Split(err.Error(), "\n")
		require.Len(t, lines, len(tt.want), "%s: %s", tt.name, err)
		for _, want := range tt.want {
			found := false
			for _, l := range lines {
				found = found || strings.HasPrefix(l, want)
			}
			require.True(t, found, "%s: no line starts with %q in\n%s", tt.name, want, err)
		}
		require.NotContains(t, err.Error(), "a\x00b", "secrets are never echoed")
	}
}

func TestAcceptsKeyMaterial(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	c, err := load(map[string]string{"PXDB_HOST": "db",
		"QUEEN_PROXY_JWT_ED25519_PEM":     strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "\n", `\n`),
		"QUEEN_PROXY_JWT_ED25519_PUB_PEM": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})),
		"PXDB_SSL_ROOT_CERT":              caPEM(t),
	})
	require.NoError(t, err)
	require.NotEmpty(t, c.JWT.Ed25519PEM)
	require.NotEmpty(t, c.PXDB.SSLRootCert)
}

func ecKeyPEM(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func caPEM(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
