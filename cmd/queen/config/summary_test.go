package config

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()

	cert := testCertPEM(t)
	// Secret values that pass, each long and distinctive enough to grep for.
	good := map[string]string{
		"PG_PASSWORD":          "pg-password-7f3a91",
		"JWT_SECRET":           "jwt-secret-c4e8d2",
		"JWT_PUBLIC_KEY":       "jwt-public-key-9b1f60",
		"QUEEN_ENCRYPTION_KEY": hexKey,
		"PG_SSL_ROOT_CERT":     cert,
		"JWT_JWKS_URL":         "https://user:jwks-pass-5d2e@idp.example/jwks",
	}
	// Secret values that fail, with other failures next to them.
	bad := map[string]string{
		"PG_PASSWORD":          "pg-password-7f3a91\x00",
		"JWT_SECRET":           "jwt-secret-c4e8d2",
		"JWT_PUBLIC_KEY":       "jwt-public-key-9b1f60",
		"QUEEN_ENCRYPTION_KEY": "enc-key-3a7c5e-not-hex-" + strings.Repeat("z", 41),
		"PG_SSL_ROOT_CERT":     "-----BEGIN PRIVATE KEY-----\nroot-cert-8e4b1a\n-----END PRIVATE KEY-----\n",
		"PORT":                 "nope",
	}
	secrets := []string{
		"pg-password-7f3a91", "jwt-secret-c4e8d2", "jwt-public-key-9b1f60", hexKey, "BEGIN CERTIFICATE",
		cert[40:80], "jwks-pass-5d2e", "enc-key-3a7c5e", "root-cert-8e4b1a", "PRIVATE KEY",
	}

	_, err := Load(env(bad))
	require.Error(t, err)
	require.Len(t, problems(err), 4) // PG_PASSWORD, QUEEN_ENCRYPTION_KEY, PG_SSL_ROOT_CERT, PORT
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}

	c, err := Load(env(good))
	require.NoError(t, err)
	summary := fmt.Sprint(c.Summary())
	for _, s := range secrets {
		require.NotContains(t, summary, s)
	}

	attrs := map[string]string{}
	for area, list := range c.Summary() {
		for _, a := range list {
			attrs[area+"."+a.Key] = a.Value.String()
		}
	}
	require.Equal(t, "<set:18 chars>", attrs["postgres.password"])
	require.Equal(t, fmt.Sprintf("<set:%d chars>", len(strings.TrimSpace(cert))), attrs["postgres.ssl_root_cert"])
	require.Equal(t, "<set:17 chars>", attrs["auth.secret"])
	require.Equal(t, "<set:21 chars>", attrs["auth.public_key"])
	require.Equal(t, "https://user:xxxxx@idp.example/jwks", attrs["auth.jwks_url"])
	require.Equal(t, "<set:64 chars>", attrs["encryption.key"])
	require.Equal(t, "true", attrs["encryption.enabled"])

	def, err := Load(env(nil))
	require.NoError(t, err)
	for area, list := range def.Summary() {
		for _, a := range list {
			attrs[area+"."+a.Key] = a.Value.String()
		}
	}
	require.Equal(t, "<unset>", attrs["postgres.password"])
	require.Equal(t, "<unset>", attrs["postgres.ssl_root_cert"])
	require.Equal(t, "<unset>", attrs["auth.secret"])
	require.Equal(t, "<unset>", attrs["auth.public_key"])
	require.Equal(t, "<unset>", attrs["encryption.key"])
}

func TestSummaryAreas(t *testing.T) {
	t.Parallel()

	c, err := Load(env(nil))
	require.NoError(t, err)
	summary := c.Summary()
	require.Len(t, summary, len(SummaryAreas()))
	for _, area := range SummaryAreas() {
		require.NotEmpty(t, summary[area], area)
	}

	attrs := map[string]string{}
	for _, a := range summary["postgres"] {
		attrs[a.Key] = a.Value.String()
	}
	require.Equal(t, "plaintext", attrs["ssl_trust"])
	require.Equal(t, "false", attrs["ssl_verified"])
}

func TestPostgresURL(t *testing.T) {
	t.Parallel()

	cert := testCertPEM(t)
	tests := []struct {
		name        string
		env         map[string]string
		sslmode     string
		trust       string
		wantTLS     bool
		wantVerify  bool
		wantTimeout time.Duration
	}{
		{"defaults", nil, "sslmode=disable", "plaintext", false, false, 5 * time.Second},
		{"tls verified", map[string]string{"PG_USE_SSL": "true"}, "sslmode=verify-full", "webpki-roots", true, true, 5 * time.Second},
		{"tls accept any", map[string]string{"PG_USE_SSL": "on", "PG_SSL_REJECT_UNAUTHORIZED": "off"}, "sslmode=require", "accept-any", true, false, 5 * time.Second},
		{"root cert outranks reject off", map[string]string{
			"PG_USE_SSL": "1", "PG_SSL_REJECT_UNAUTHORIZED": "0", "PG_SSL_ROOT_CERT": cert,
		}, "sslmode=verify-full", "supplied-ca", true, true, 5 * time.Second},
		{"timeout rounds up", map[string]string{"QUEEN_PG_CONNECT_TIMEOUT_MS": "1500"}, "sslmode=disable", "plaintext", false, false, 2 * time.Second},
		{"sub-second timeout", map[string]string{"QUEEN_PG_CONNECT_TIMEOUT_MS": "1"}, "sslmode=disable", "plaintext", false, false, time.Second},
		{"awkward strings", map[string]string{
			"PG_HOST": "db.example", "PG_PORT": "6543", "PG_USER": "o'brien",
			"PG_PASSWORD": ` it's a \ pass=word `, "PG_DB": "my db",
		}, "sslmode=disable", "plaintext", false, false, 5 * time.Second},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(tt.env))
			require.NoError(t, err)

			dsn := c.PostgresURL()
			require.Contains(t, dsn, tt.sslmode)

			pc, err := pgconn.ParseConfig(dsn)
			require.NoError(t, err)
			require.Equal(t, c.Postgres.Hosts[0].Name, pc.Host)
			require.Equal(t, uint16(c.Postgres.Port), pc.Port)
			require.NotNil(t, pc.ValidateConnect, "target_session_attrs=read-write")
			require.Equal(t, c.Postgres.User, pc.User)
			require.Equal(t, c.Postgres.Password, pc.Password)
			require.Equal(t, c.Postgres.Database, pc.Database)
			require.Equal(t, "UTC", pc.RuntimeParams["TimeZone"])
			require.Equal(t, "off", pc.RuntimeParams["jit"])
			require.Equal(t, "queen", pc.RuntimeParams["application_name"])
			require.Equal(t, tt.wantTimeout, pc.ConnectTimeout)
			require.Equal(t, tt.wantTLS, pc.TLSConfig != nil)
			if tt.wantTLS {
				require.Equal(t, !tt.wantVerify, pc.TLSConfig.InsecureSkipVerify)
			}
			require.Empty(t, pc.Fallbacks, "no plaintext fallback")

			attrs := map[string]string{}
			for _, a := range c.Summary()["postgres"] {
				attrs[a.Key] = a.Value.String()
			}
			require.Equal(t, tt.trust, attrs["ssl_trust"])
			require.Equal(t, fmt.Sprint(tt.wantVerify), attrs["ssl_verified"])
		})
	}
}

func TestListenAddr(t *testing.T) {
	t.Parallel()

	require.Equal(t, "0.0.0.0:0", Config{}.ListenAddr())

	for bind, want := range map[string]string{
		"0.0.0.0":      "0.0.0.0:9000",
		"::":           "[::]:9000",
		"fe80::1%eth0": "[fe80::1%eth0]:9000",
		"localhost":    "127.0.0.1:9000",
	} {
		c, err := Load(env(map[string]string{"QUEEN_BIND_ADDR": bind, "PORT": "9000"}))
		require.NoError(t, err, bind)
		require.Equal(t, want, c.ListenAddr())
	}
}

var (
	// A key error line may say only these things: no part of the value.
	keyProblem = regexp.MustCompile(`^QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters \(32 bytes\)(, got \d+ characters| and holds a non-hex character)$`)
	// Likewise for the root certificate.
	certProblem = regexp.MustCompile(`^PG_SSL_ROOT_CERT: (holds no PEM certificate|PEM block \d+ is (not a CERTIFICATE|malformed)|certificate \d+ is not a valid X\.509 certificate)$`)
)

func FuzzLoad(f *testing.F) {
	f.Add("6632", "0.0.0.0", "false", "20", "", "")
	f.Add("", "", "", "", "", "")
	f.Add("abc", "0.0.0.0:7000", "enabled", "0", "short", "not pem")
	f.Add("65536", "[::1]", "ON", "1000", hexKey, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	f.Add(" 1 ", "fe80::1%eth0", " no ", "+7", hexKeyUp+"\n", `-----BEGIN CERTIFICATE-----\nAAAA`)
	f.Add("-1", "localhost", "1", "99999999999999999999", notHexKey, "-----BEGIN X-----\n-----END X-----\n")
	f.Add("\x00", "\n", "\xff", "\t", "\x00", "\x00")

	vars := []string{"PORT", "QUEEN_BIND_ADDR", "JWT_ENABLED", "DB_POOL_SIZE", "QUEEN_ENCRYPTION_KEY", "PG_SSL_ROOT_CERT"}
	f.Fuzz(func(t *testing.T, port, bind, jwt, pool, key, cert string) {
		values := []string{port, bind, jwt, pool, key, cert}
		m := make(map[string]string, len(vars))
		for i, name := range vars {
			m[name] = values[i]
		}

		c, err := Load(env(m))
		if err != nil {
			for _, line := range problems(err) {
				name, _, ok := strings.Cut(line, ": ")
				require.True(t, ok, "problem line without a variable: %q", line)
				require.Contains(t, vars, name, "problem names an unset variable: %q", line)
				switch name {
				case "QUEEN_ENCRYPTION_KEY":
					require.Regexp(t, keyProblem, line)
				case "PG_SSL_ROOT_CERT":
					require.Regexp(t, certProblem, line)
				}
			}
			return
		}

		require.GreaterOrEqual(t, c.Server.Port, 1)
		require.LessOrEqual(t, c.Server.Port, 65535)
		require.GreaterOrEqual(t, c.Postgres.PoolSize, 1)
		require.LessOrEqual(t, c.Postgres.PoolSize, 1000)
		require.True(t, c.Server.BindAddr.IsValid())
		require.True(t, len(c.Encryption.Key) == 0 || len(c.Encryption.Key) == 32)
		_, _, err = net.SplitHostPort(c.ListenAddr())
		require.NoError(t, err)
		if k := strings.TrimSpace(key); len(k) >= 8 {
			require.NotContains(t, fmt.Sprint(c.Summary()), k)
		}
	})
}

// defaultAuth is the Auth of an empty environment.
func defaultAuth() Auth {
	return Auth{
		Algorithm:           "HS256",
		JWKSRefreshInterval: time.Hour,
		JWKSTimeout:         5 * time.Second,
		ClockSkew:           30 * time.Second,
		SkipPaths:           []string{"/health", "/metrics/prometheus", "/metrics", "/"},
		RolesClaim:          "role",
		RolesArrayClaim:     "roles",
		RoleAdmin:           "admin",
		RoleReadWrite:       "read-write",
		RoleReadOnly:        "read-only",
		RoleWriteOnly:       "write-only",
	}
}

// The JWT variables of SECURITY-REQUIREMENTS §3.1 beyond the key material.
func TestLoadAuth(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, a Auth)
	}{
		{"skip paths split and trimmed", map[string]string{"JWT_SKIP_PATHS": " /status , ,/open/,/health,"}, func(t *testing.T, a Auth) {
			require.Equal(t, []string{"/status", "/open/", "/health"}, a.SkipPaths)
		}},
		{"skip paths set but empty means none (CFG-2)", map[string]string{"JWT_SKIP_PATHS": ""}, func(t *testing.T, a Auth) {
			require.NotNil(t, a.SkipPaths)
			require.Empty(t, a.SkipPaths)
		}},
		{"skip paths only commas", map[string]string{"JWT_SKIP_PATHS": " , ,"}, func(t *testing.T, a Auth) {
			require.Empty(t, a.SkipPaths)
		}},
		{"jwks timings", map[string]string{"JWT_JWKS_REFRESH_INTERVAL": "1", "JWT_JWKS_TIMEOUT_MS": "250"}, func(t *testing.T, a Auth) {
			require.Equal(t, time.Second, a.JWKSRefreshInterval)
			require.Equal(t, 250*time.Millisecond, a.JWKSTimeout)
		}},
		{"role names", map[string]string{
			"JWT_ROLES_CLAIM": "scope", "JWT_ROLES_ARRAY_CLAIM": "groups", "JWT_ROLE_ADMIN": "queen:admin",
			"JWT_ROLE_READ_WRITE": "queen:rw", "JWT_ROLE_READ_ONLY": "queen:ro", "JWT_ROLE_WRITE_ONLY": "queen:wo",
		}, func(t *testing.T, a Auth) {
			require.Equal(t, "scope", a.RolesClaim)
			require.Equal(t, "groups", a.RolesArrayClaim)
			require.Equal(t, "queen:admin", a.RoleAdmin)
			require.Equal(t, "queen:rw", a.RoleReadWrite)
			require.Equal(t, "queen:ro", a.RoleReadOnly)
			require.Equal(t, "queen:wo", a.RoleWriteOnly)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(tt.env))
			require.NoError(t, err)
			tt.check(t, c.Auth)
		})
	}

	for _, tt := range []struct{ name, value, want string }{
		{"JWT_JWKS_REFRESH_INTERVAL", "0", `JWT_JWKS_REFRESH_INTERVAL: "0" is out of range (1-86400)`},
		{"JWT_JWKS_REFRESH_INTERVAL", "1h", `JWT_JWKS_REFRESH_INTERVAL: "1h" is not an integer`},
		{"JWT_JWKS_TIMEOUT_MS", "0", `JWT_JWKS_TIMEOUT_MS: "0" is out of range (1-86400000)`},
		{"JWT_JWKS_TIMEOUT_MS", "-5", `JWT_JWKS_TIMEOUT_MS: "-5" is out of range (1-86400000)`},
	} {
		_, err := Load(env(map[string]string{tt.name: tt.value}))
		require.Equal(t, []string{tt.want}, problems(err), "%s=%q", tt.name, tt.value)
	}
}
