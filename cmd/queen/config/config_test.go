package config

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/spool"
)

// env is a getenv over a map: a key present with "" is set-but-empty.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// problems splits a joined error into its lines.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// testCertPEM returns a freshly made self-signed CA certificate in PEM.
func testCertPEM(t testing.TB) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "queen test ca"},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

const (
	hexKey    = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	hexKeyUp  = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
	notHexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeefg"
)

func TestLoadDefaults(t *testing.T) {
	t.Parallel()

	want := Config{
		Server: Server{
			Port:            6632,
			BindAddr:        netip.MustParseAddr("0.0.0.0"),
			LogLevel:        slog.LevelInfo,
			LogFormat:       "text",
			MaxBodyBytes:    16777216,
			ShutdownTimeout: 30 * time.Second,
			GCPercent:       200,
			SoftMemoryLimit: true,
		},
		Postgres: Postgres{
			Hosts:                 []Host{{Name: "localhost", Port: 5432}},
			Port:                  5432,
			User:                  "postgres",
			Database:              "postgres",
			Source:                SourcePGVars,
			TargetSessionAttrs:    TargetReadWrite,
			PoolSize:              20,
			SSLRejectUnauthorized: true,
			ConnectTimeout:        5 * time.Second,
		},
		Pop: Pop{
			DefaultBatchSize: 1,
			DefaultTimeout:   30 * time.Second,
			RepollInterval:   time.Second,
			HoldParked:       true,
		},
		Push:  Push{MaxBatch: 2000, MaxFlushes: 3, ParallelMin: 300},
		Auth:  defaultAuth(),
		Spool: Spool{FlushInterval: 100 * time.Millisecond, MaxBatch: 100, EventsPerFile: 10000},
		Jobs:  JobsDefault(),
		Mesh:  MeshDefault(),
	}

	for name, getenv := range map[string]func(string) (string, bool){
		"unset": env(nil),
		"nil":   nil,
		// Every variable but QUEEN_BIND_ADDR set to empty or blank means its default.
		"empty": env(map[string]string{
			"PORT": "", "GOGC": " ", "LOG_LEVEL": "", "LOG_FORMAT": " ", "QUEEN_MAX_BODY_BYTES": "",
			"QUEEN_SHUTDOWN_TIMEOUT_MS": "", "PG_HOST": "", "PG_PORT": "\t", "PG_USER": "",
			"PG_PASSWORD": "", "PG_DB": "", "DB_POOL_SIZE": "", "PG_USE_SSL": "",
			"PG_SSL_REJECT_UNAUTHORIZED": " ", "PG_SSL_ROOT_CERT": "", "QUEEN_PG_CONNECT_TIMEOUT_MS": "",
			"DEFAULT_BATCH_SIZE": "", "DEFAULT_TIMEOUT": "", "DEFAULT_SUBSCRIPTION_MODE": "",
			"QUEEN_POP_REPOLL_MS": "", "QUEEN_POP_HOLD": " ", "QUEEN_PUSH_MAX_BATCH": "", "JWT_ENABLED": "",
			"JWT_ALGORITHM": "", "JWT_SECRET": "", "JWT_PUBLIC_KEY": "", "JWT_JWKS_URL": "",
			"JWT_ISSUER": "", "JWT_AUDIENCE": "", "JWT_CLOCK_SKEW": "", "QUEEN_ENCRYPTION_KEY": "",
			"FILE_BUFFER_DIR": "", "JWT_JWKS_REFRESH_INTERVAL": "", "JWT_JWKS_TIMEOUT_MS": " ",
			"JWT_ROLES_CLAIM": "", "JWT_ROLES_ARRAY_CLAIM": "", "JWT_ROLE_ADMIN": "",
			"JWT_ROLE_READ_WRITE": "", "JWT_ROLE_READ_ONLY": "", "JWT_ROLE_WRITE_ONLY": "",
			// JWT_SKIP_PATHS is the exception: empty means skip nothing (see TestLoadAuth).
		}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Load(getenv)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, "0.0.0.0:6632", got.ListenAddr())
			require.False(t, got.Encryption.Enabled())
			require.False(t, got.Spool.Enabled())
		})
	}
}

func TestLoadGoodValues(t *testing.T) {
	t.Parallel()

	cert := testCertPEM(t)
	oneLineCert := strings.ReplaceAll(strings.TrimSpace(cert), "\n", `\n`)

	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"port trimmed", map[string]string{"PORT": " 8080 "}, func(t *testing.T, c Config) {
			require.Equal(t, 8080, c.Server.Port)
		}},
		{"job retentions in days", map[string]string{
			"METRICS_RETENTION_DAYS": "1", "QUEEN_QUEUE_METRICS_RETENTION_DAYS": "3650", "PARTITION_CLEANUP_DAYS": "2",
		}, func(t *testing.T, c Config) {
			require.Equal(t, 24*time.Hour, c.Jobs.HistoryRetention)
			require.Equal(t, 3650*24*time.Hour, c.Jobs.QueueMetricsRetention)
			require.Equal(t, 48*time.Hour, c.Jobs.PartitionRetention)
		}},
		{"port bounds", map[string]string{"PORT": "1", "PG_PORT": "65535"}, func(t *testing.T, c Config) {
			require.Equal(t, 1, c.Server.Port)
			require.Equal(t, 65535, c.Postgres.Port)
		}},
		{"bind ipv4", map[string]string{"QUEEN_BIND_ADDR": "127.0.0.1"}, func(t *testing.T, c Config) {
			require.Equal(t, "127.0.0.1:6632", c.ListenAddr())
		}},
		{"bind ipv6", map[string]string{"QUEEN_BIND_ADDR": "::1"}, func(t *testing.T, c Config) {
			require.Equal(t, "[::1]:6632", c.ListenAddr())
		}},
		{"bind bracketed ipv6", map[string]string{"QUEEN_BIND_ADDR": "[::]", "PORT": "7000"}, func(t *testing.T, c Config) {
			require.Equal(t, "[::]:7000", c.ListenAddr())
		}},
		{"bind localhost", map[string]string{"QUEEN_BIND_ADDR": " LocalHost "}, func(t *testing.T, c Config) {
			require.Equal(t, netip.MustParseAddr("127.0.0.1"), c.Server.BindAddr)
		}},
		{"log level and format", map[string]string{"LOG_LEVEL": "DEBUG", "LOG_FORMAT": "Json"}, func(t *testing.T, c Config) {
			require.Equal(t, slog.LevelDebug, c.Server.LogLevel)
			require.Equal(t, LogFormatJSON, c.Server.LogFormat)
		}},
		{"gogc", map[string]string{"GOGC": " 150 "}, func(t *testing.T, c Config) {
			require.Equal(t, 150, c.Server.GCPercent)
		}},
		{"gogc off", map[string]string{"GOGC": "Off"}, func(t *testing.T, c Config) {
			require.Equal(t, -1, c.Server.GCPercent)
		}},
		{"gomemlimit set: the runtime's, not the broker's soft limit", map[string]string{"GOMEMLIMIT": "400MiB"}, func(t *testing.T, c Config) {
			require.False(t, c.Server.SoftMemoryLimit)
		}},
		{"log level warn", map[string]string{"LOG_LEVEL": "warn"}, func(t *testing.T, c Config) {
			require.Equal(t, slog.LevelWarn, c.Server.LogLevel)
		}},
		{"parked long-polls held outside net/http by default", map[string]string{"QUEEN_POP_HOLD": ""}, func(t *testing.T, c Config) {
			require.True(t, c.Pop.HoldParked)
		}},
		{"parked long-polls kept in net/http", map[string]string{"QUEEN_POP_HOLD": "off"}, func(t *testing.T, c Config) {
			require.False(t, c.Pop.HoldParked)
		}},
		{"log level error", map[string]string{"LOG_LEVEL": " Error"}, func(t *testing.T, c Config) {
			require.Equal(t, slog.LevelError, c.Server.LogLevel)
		}},
		{"integer minimums", map[string]string{
			"QUEEN_MAX_BODY_BYTES": "1024", "DB_POOL_SIZE": "1", "DEFAULT_BATCH_SIZE": "1",
			"DEFAULT_TIMEOUT": "0", "QUEEN_POP_REPOLL_MS": "10", "QUEEN_PUSH_MAX_BATCH": "1",
			"QUEEN_PUSH_MAX_FLUSHES": "1", "QUEEN_PUSH_PARALLEL_MIN": "1",
			"JWT_CLOCK_SKEW": "0", "QUEEN_SHUTDOWN_TIMEOUT_MS": "1", "QUEEN_PG_CONNECT_TIMEOUT_MS": "1",
		}, func(t *testing.T, c Config) {
			require.Equal(t, int64(1024), c.Server.MaxBodyBytes)
			require.Equal(t, 1, c.Postgres.PoolSize)
			require.Equal(t, 1, c.Pop.DefaultBatchSize)
			require.Equal(t, time.Duration(0), c.Pop.DefaultTimeout)
			require.Equal(t, 10*time.Millisecond, c.Pop.RepollInterval)
			require.Equal(t, 1, c.Push.MaxBatch)
			require.Equal(t, 1, c.Push.MaxFlushes)
			require.Equal(t, 1, c.Push.ParallelMin)
			require.Equal(t, time.Duration(0), c.Auth.ClockSkew)
			require.Equal(t, time.Millisecond, c.Server.ShutdownTimeout)
			require.Equal(t, time.Millisecond, c.Postgres.ConnectTimeout)
		}},
		{"integer maximums", map[string]string{
			"DB_POOL_SIZE": "1000", "DEFAULT_BATCH_SIZE": "+1000", "DEFAULT_TIMEOUT": "86400000",
			"QUEEN_PUSH_MAX_BATCH": "50000", "JWT_CLOCK_SKEW": "86400", "QUEEN_PUSH_MAX_FLUSHES": "64",
		}, func(t *testing.T, c Config) {
			require.Equal(t, 1000, c.Postgres.PoolSize)
			require.Equal(t, 1000, c.Pop.DefaultBatchSize)
			require.Equal(t, 24*time.Hour, c.Pop.DefaultTimeout)
			require.Equal(t, 50000, c.Push.MaxBatch)
			require.Equal(t, 64, c.Push.MaxFlushes)
			require.Equal(t, 24*time.Hour, c.Auth.ClockSkew)
		}},
		{"subscription mode", map[string]string{"DEFAULT_SUBSCRIPTION_MODE": "New-Only"}, func(t *testing.T, c Config) {
			require.Equal(t, "new-only", c.Pop.DefaultSubscriptionMode)
		}},
		{"postgres strings kept as given", map[string]string{
			"PG_HOST": "db.internal", "PG_USER": "queen", "PG_PASSWORD": " p w'\\ ", "PG_DB": "queen db",
		}, func(t *testing.T, c Config) {
			require.Equal(t, []Host{{Name: "db.internal", Port: 5432}}, c.Postgres.Hosts)
			require.Equal(t, "queen", c.Postgres.User)
			require.Equal(t, " p w'\\ ", c.Postgres.Password)
			require.Equal(t, "queen db", c.Postgres.Database)
		}},
		{"postgres tls", map[string]string{"PG_USE_SSL": "yes", "PG_SSL_REJECT_UNAUTHORIZED": "off"}, func(t *testing.T, c Config) {
			require.True(t, c.Postgres.UseSSL)
			require.False(t, c.Postgres.SSLRejectUnauthorized)
		}},
		{"root cert pem", map[string]string{"PG_SSL_ROOT_CERT": cert}, func(t *testing.T, c Config) {
			require.Equal(t, strings.TrimSpace(cert), c.Postgres.SSLRootCert)
		}},
		{"root cert bundle with comments", map[string]string{"PG_SSL_ROOT_CERT": "# ca one\n" + cert + "# ca two\n" + cert}, func(t *testing.T, c Config) {
			require.Equal(t, 2, strings.Count(c.Postgres.SSLRootCert, "BEGIN CERTIFICATE"))
		}},
		{"root cert one line", map[string]string{"PG_SSL_ROOT_CERT": oneLineCert}, func(t *testing.T, c Config) {
			require.Equal(t, strings.TrimSpace(cert), c.Postgres.SSLRootCert)
		}},
		{"auth", map[string]string{
			"JWT_ENABLED": "1", "JWT_ALGORITHM": "RS256", "JWT_SECRET": "s", "JWT_PUBLIC_KEY": "pk",
			"JWT_JWKS_URL": "https://idp.example/jwks", "JWT_ISSUER": "iss", "JWT_AUDIENCE": "aud", "JWT_CLOCK_SKEW": "5",
		}, func(t *testing.T, c Config) {
			want := defaultAuth()
			want.Enabled, want.Algorithm, want.Secret, want.PublicKey = true, "RS256", "s", "pk"
			want.JWKSURL, want.Issuer, want.Audience, want.ClockSkew = "https://idp.example/jwks", "iss", "aud", 5*time.Second
			require.Equal(t, want, c.Auth)
		}},
		{"jwt algorithm not validated here", map[string]string{"JWT_ALGORITHM": "ES256"}, func(t *testing.T, c Config) {
			require.Equal(t, "ES256", c.Auth.Algorithm)
		}},
		{"encryption key", map[string]string{"QUEEN_ENCRYPTION_KEY": hexKey}, func(t *testing.T, c Config) {
			require.True(t, c.Encryption.Enabled())
			require.Len(t, c.Encryption.Key, 32)
			require.Equal(t, byte(0x11), c.Encryption.Key[1])
		}},
		{"encryption key upper case with trailing newline", map[string]string{"QUEEN_ENCRYPTION_KEY": hexKeyUp + "\n"}, func(t *testing.T, c Config) {
			require.Len(t, c.Encryption.Key, 32)
			require.Equal(t, byte(0xff), c.Encryption.Key[15])
		}},
		{"spool", map[string]string{"FILE_BUFFER_DIR": "/var/lib/queen/buffers"}, func(t *testing.T, c Config) {
			require.True(t, c.Spool.Enabled())
			require.Equal(t, "/var/lib/queen/buffers", c.Spool.Dir)
			require.Equal(t, spool.FlushIntervalDefault, c.Spool.FlushInterval)
			require.Equal(t, spool.MaxBatchDefault, c.Spool.MaxBatch)
			require.Equal(t, spool.EventsPerFileDefault, c.Spool.EventsPerFile)
		}},
		{"spool tuning", map[string]string{"FILE_BUFFER_FLUSH_MS": "250", "FILE_BUFFER_MAX_BATCH": "500", "FILE_BUFFER_EVENTS_PER_FILE": "20"}, func(t *testing.T, c Config) {
			require.Equal(t, 250*time.Millisecond, c.Spool.FlushInterval)
			require.Equal(t, 500, c.Spool.MaxBatch)
			require.Equal(t, 20, c.Spool.EventsPerFile)
		}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(tt.env))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestLoadBooleans(t *testing.T) {
	t.Parallel()

	for value, want := range map[string]bool{
		"true": true, "TRUE": true, "1": true, "yes": true, "Yes": true, "on": true, " ON\n": true,
		"false": false, "False": false, "0": false, "no": false, "NO": false, "off": false, " off ": false,
	} {
		for _, name := range []string{"JWT_ENABLED", "PG_USE_SSL", "PG_SSL_REJECT_UNAUTHORIZED"} {
			c, err := Load(env(map[string]string{name: value}))
			require.NoError(t, err, "%s=%q", name, value)
			got := map[string]bool{
				"JWT_ENABLED":                c.Auth.Enabled,
				"PG_USE_SSL":                 c.Postgres.UseSSL,
				"PG_SSL_REJECT_UNAUTHORIZED": c.Postgres.SSLRejectUnauthorized,
			}[name]
			require.Equal(t, want, got, "%s=%q", name, value)
		}
	}
}

func TestLoadBadValues(t *testing.T) {
	t.Parallel()

	cert := testCertPEM(t)
	keyPEM := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n"
	junkPEM := "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n"

	tests := []struct {
		name, value string
		want        string // the whole problem line
	}{
		{"PORT", "abc", `PORT: "abc" is not a port number (1-65535)`},
		{"PORT", "0", `PORT: "0" is not a port number (1-65535)`},
		{"PORT", "65536", `PORT: "65536" is not a port number (1-65535)`},
		{"PORT", "6632x", `PORT: "6632x" is not a port number (1-65535)`},
		{"PORT", "0x1A", `PORT: "0x1A" is not a port number (1-65535)`},
		{"PG_PORT", "-1", `PG_PORT: "-1" is not a port number (1-65535)`},
		{"QUEEN_BIND_ADDR", "", `QUEEN_BIND_ADDR: is set to the empty string (unset it for the default 0.0.0.0)`},
		{"QUEEN_BIND_ADDR", "  ", `QUEEN_BIND_ADDR: is set to the empty string (unset it for the default 0.0.0.0)`},
		{"QUEEN_BIND_ADDR", "0.0.0.0:7000", `QUEEN_BIND_ADDR: "0.0.0.0:7000" carries a port; give the host only and set the port with PORT`},
		{"QUEEN_BIND_ADDR", "[::1]:6632", `QUEEN_BIND_ADDR: "[::1]:6632" carries a port; give the host only and set the port with PORT`},
		{"QUEEN_BIND_ADDR", "localhost:80", `QUEEN_BIND_ADDR: "localhost:80" carries a port; give the host only and set the port with PORT`},
		{"QUEEN_BIND_ADDR", "example.com", `QUEEN_BIND_ADDR: "example.com" is not an IP address (use an IPv4 or IPv6 literal, or localhost)`},
		{"QUEEN_BIND_ADDR", "1.2.3", `QUEEN_BIND_ADDR: "1.2.3" is not an IP address (use an IPv4 or IPv6 literal, or localhost)`},
		{"QUEEN_BIND_ADDR", "a\nb", `QUEEN_BIND_ADDR: "a\nb" is not an IP address (use an IPv4 or IPv6 literal, or localhost)`},
		{"GOGC", "200%", `GOGC: "200%" is not an integer`},
		{"GOGC", "0", `GOGC: "0" is out of range (1-2147483647)`},
		{"GOGC", "-1", `GOGC: "-1" is out of range (1-2147483647)`},
		{"LOG_LEVEL", "verbose", `LOG_LEVEL: "verbose" is not one of debug, info, warn, error`},
		{"LOG_FORMAT", "xml", `LOG_FORMAT: "xml" is not one of text, json`},
		{"QUEEN_MAX_BODY_BYTES", "1023", `QUEEN_MAX_BODY_BYTES: "1023" is out of range (minimum 1024)`},
		{"QUEEN_MAX_BODY_BYTES", "16MiB", `QUEEN_MAX_BODY_BYTES: "16MiB" is not an integer`},
		{"QUEEN_MAX_BODY_BYTES", "99999999999999999999", `QUEEN_MAX_BODY_BYTES: "99999999999999999999" is out of range (minimum 1024)`},
		{"QUEEN_SHUTDOWN_TIMEOUT_MS", "0", `QUEEN_SHUTDOWN_TIMEOUT_MS: "0" is out of range (1-86400000)`},
		{"QUEEN_SHUTDOWN_TIMEOUT_MS", "1e3", `QUEEN_SHUTDOWN_TIMEOUT_MS: "1e3" is not an integer`},
		{"QUEEN_SHUTDOWN_TIMEOUT_MS", "86400001", `QUEEN_SHUTDOWN_TIMEOUT_MS: "86400001" is out of range (1-86400000)`},
		{"DB_POOL_SIZE", "0", `DB_POOL_SIZE: "0" is out of range (1-1000)`},
		{"DB_POOL_SIZE", "1001", `DB_POOL_SIZE: "1001" is out of range (1-1000)`},
		{"DB_POOL_SIZE", "2 0", `DB_POOL_SIZE: "2 0" is not an integer`},
		{"PG_USE_SSL", "enabled", `PG_USE_SSL: "enabled" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{"PG_SSL_REJECT_UNAUTHORIZED", "y", `PG_SSL_REJECT_UNAUTHORIZED: "y" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{"PG_SSL_ROOT_CERT", "not a pem", `PG_SSL_ROOT_CERT: holds no PEM certificate`},
		{"PG_SSL_ROOT_CERT", keyPEM, `PG_SSL_ROOT_CERT: PEM block 1 is not a CERTIFICATE`},
		{"PG_SSL_ROOT_CERT", junkPEM, `PG_SSL_ROOT_CERT: certificate 1 is not a valid X.509 certificate`},
		{"PG_SSL_ROOT_CERT", cert + "-----BEGIN CERTIFICATE-----\nAAAA", `PG_SSL_ROOT_CERT: PEM block 2 is malformed`},
		{"QUEEN_PG_CONNECT_TIMEOUT_MS", "-5", `QUEEN_PG_CONNECT_TIMEOUT_MS: "-5" is out of range (1-86400000)`},
		{"PG_HOST", "db\x00", `PG_HOST: "db\x00" contains a NUL byte`},
		{"PG_PASSWORD", "pw\x00", `PG_PASSWORD: contains a NUL byte`},
		{"DEFAULT_BATCH_SIZE", "0", `DEFAULT_BATCH_SIZE: "0" is out of range (1-1000)`},
		{"DEFAULT_BATCH_SIZE", "1001", `DEFAULT_BATCH_SIZE: "1001" is out of range (1-1000)`},
		{"DEFAULT_TIMEOUT", "-1", `DEFAULT_TIMEOUT: "-1" is out of range (0-86400000)`},
		{"DEFAULT_TIMEOUT", "30s", `DEFAULT_TIMEOUT: "30s" is not an integer`},
		{"DEFAULT_SUBSCRIPTION_MODE", "old", `DEFAULT_SUBSCRIPTION_MODE: "old" is not one of all, new, new-only (or empty)`},
		{"QUEEN_POP_REPOLL_MS", "9", `QUEEN_POP_REPOLL_MS: "9" is out of range (10-86400000)`},
		{"QUEEN_PUSH_MAX_BATCH", "0", `QUEEN_PUSH_MAX_BATCH: "0" is out of range (minimum 1)`},
		{"QUEEN_PUSH_MAX_FLUSHES", "65", `QUEEN_PUSH_MAX_FLUSHES: "65" is out of range (1-64)`},
		{"QUEEN_PUSH_PARALLEL_MIN", "0", `QUEEN_PUSH_PARALLEL_MIN: "0" is out of range (minimum 1)`},
		{"JWT_ENABLED", "enabled", `JWT_ENABLED: "enabled" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{"QUEEN_POP_HOLD", "sometimes", `QUEEN_POP_HOLD: "sometimes" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{"JWT_ENABLED", "2", `JWT_ENABLED: "2" is not a boolean (use true/false, 1/0, yes/no or on/off)`},
		{"JWT_CLOCK_SKEW", "-1", `JWT_CLOCK_SKEW: "-1" is out of range (0-86400)`},
		{"JWT_CLOCK_SKEW", "30s", `JWT_CLOCK_SKEW: "30s" is not an integer`},
		{"PARTITION_CLEANUP_DAYS", "0", `PARTITION_CLEANUP_DAYS: "0" is out of range (1-3650)`},
		{"QUEEN_ENCRYPTION_KEY", hexKey[:63], `QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters (32 bytes), got 63 characters`},
		{"QUEEN_ENCRYPTION_KEY", hexKey + "0", `QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters (32 bytes), got 65 characters`},
		{"QUEEN_ENCRYPTION_KEY", notHexKey, `QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters (32 bytes) and holds a non-hex character`},
		{"QUEEN_ENCRYPTION_KEY", "secret-passphrase", `QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters (32 bytes), got 17 characters`},
	}

	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s=%q", tt.name, tt.value), func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(map[string]string{tt.name: tt.value}))
			require.Error(t, err)
			require.Equal(t, Config{}, c)
			require.Equal(t, []string{tt.want}, problems(err))
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()

	_, err := Load(env(map[string]string{
		"PORT":                 "abc",
		"QUEEN_BIND_ADDR":      "example.com",
		"PG_PORT":              "99999",
		"DB_POOL_SIZE":         "0",
		"JWT_ENABLED":          "enabled",
		"QUEEN_ENCRYPTION_KEY": "short",
		"LOG_LEVEL":            "loud",
		"PG_HOST":              "fine",
	}))
	require.Error(t, err)

	var named []string
	for _, line := range problems(err) {
		name, _, ok := strings.Cut(line, ": ")
		require.True(t, ok, line)
		named = append(named, name)
	}
	require.ElementsMatch(t, []string{
		"PORT", "QUEEN_BIND_ADDR", "PG_PORT", "DB_POOL_SIZE", "JWT_ENABLED", "QUEEN_ENCRYPTION_KEY", "LOG_LEVEL",
	}, named)
}
