package config

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// Where the hosts come from and what the connection string says about them.
func TestPostgresHosts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		hosts    []Host
		user, db string
		password string
		source   string
		target   string
	}{
		{"one host", map[string]string{"PG_HOST": "db1"},
			[]Host{{"db1", 5432}}, "postgres", "postgres", "", SourcePGVars, TargetReadWrite},
		{"host list with ports", map[string]string{"PG_HOST": "db1:6000, db2 ,[::1]:6001,::2,/run/pg,[fe80::1]", "PG_PORT": "7000"},
			[]Host{{"db1", 6000}, {"db2", 7000}, {"::1", 6001}, {"::2", 7000}, {"/run/pg", 7000}, {"fe80::1", 7000}},
			"postgres", "postgres", "", SourcePGVars, TargetReadWrite},
		{"url with several hosts", map[string]string{"PG_URL": "postgres://queen:s%40cret@db1:6000,db2/queue%20db"},
			[]Host{{"db1", 6000}, {"db2", 5432}}, "queen", "queue db", "s@cret", SourcePGURL, TargetReadWrite},
		{"postgresql scheme and primary", map[string]string{"DATABASE_URL": "postgresql://u@[::1]:6000,db2:6001/d?target_session_attrs=primary"},
			[]Host{{"::1", 6000}, {"db2", 6001}}, "u", "d", "", SourceDatabaseURL, TargetPrimary},
		{"PG_URL wins over DATABASE_URL", map[string]string{"PG_URL": "postgres://a@db1/x", "DATABASE_URL": "postgres://b@db9/y"},
			[]Host{{"db1", 5432}}, "a", "x", "", SourcePGURL, TargetReadWrite},
		{"query host and port replace the authority", map[string]string{"PG_URL": "postgres://ignored:1/d?host=db1,db2&port=6000,6001&user=u"},
			[]Host{{"db1", 6000}, {"db2", 6001}}, "u", "d", "", SourcePGURL, TargetReadWrite},
		{"one query port for every host", map[string]string{"PG_URL": "postgres:///d?host=%2Frun%2Fpg,db2&port=6000"},
			[]Host{{"/run/pg", 6000}, {"db2", 6000}}, "postgres", "d", "", SourcePGURL, TargetReadWrite},
		{"password from PG_PASSWORD", map[string]string{"PG_URL": "postgres://u@db1/d", "PG_PASSWORD": "pw"},
			[]Host{{"db1", 5432}}, "u", "d", "pw", SourcePGURL, TargetReadWrite},
		{"bare url takes the defaults", map[string]string{"DATABASE_URL": "postgres://"},
			[]Host{{"localhost", 5432}}, "postgres", "postgres", "", SourceDatabaseURL, TargetReadWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(tt.env))
			require.NoError(t, err)
			p := c.Postgres
			require.Equal(t, tt.hosts, p.Hosts)
			require.Equal(t, tt.user, p.User)
			require.Equal(t, tt.db, p.Database)
			require.Equal(t, tt.password, p.Password)
			require.Equal(t, tt.source, p.Source)
			require.Equal(t, tt.target, p.TargetSessionAttrs)

			// pgx reads the same list back: first host, then the others as
			// fallbacks, in order, each with its own port.
			pc, err := pgconn.ParseConfig(c.PostgresURL())
			require.NoError(t, err)
			got := []Host{{pc.Host, int(pc.Port)}}
			for _, fb := range pc.Fallbacks {
				got = append(got, Host{fb.Host, int(fb.Port)})
			}
			require.Equal(t, tt.hosts, got)
			require.Equal(t, tt.user, pc.User)
			require.Equal(t, tt.db, pc.Database)
			require.Equal(t, tt.password, pc.Password)
			require.NotNil(t, pc.ValidateConnect, "a server that refuses writes is skipped")
			require.Contains(t, c.PostgresURL(), "target_session_attrs="+tt.target)

			attrs := map[string]string{}
			for _, a := range c.Summary()["postgres"] {
				attrs[a.Key] = a.Value.String()
			}
			require.Equal(t, tt.source, attrs["source"])
			require.Equal(t, p.HostList(), attrs["hosts"])
			if tt.password != "" {
				require.NotContains(t, fmtSummary(c), tt.password)
			}
		})
	}
}

// A URL's sslmode sets the TLS variables, which stay the one place TLS is
// decided; a variable that disagrees is a problem.
func TestPostgresURLSSLMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env            map[string]string
		useSSL, reject bool
	}{
		{map[string]string{"PG_URL": "postgres://db/d?sslmode=disable"}, false, true},
		{map[string]string{"PG_URL": "postgres://db/d?sslmode=require"}, true, false},
		{map[string]string{"PG_URL": "postgres://db/d?sslmode=verify-full"}, true, true},
		{map[string]string{"PG_URL": "postgres://db/d?sslmode=verify-full", "PG_USE_SSL": "true"}, true, true},
		{map[string]string{"PG_URL": "postgres://db/d?sslmode=require", "PG_USE_SSL": "1", "PG_SSL_REJECT_UNAUTHORIZED": "false"}, true, false},
		{map[string]string{"PG_URL": "postgres://db/d", "PG_USE_SSL": "true"}, true, true},
	} {
		c, err := Load(env(tc.env))
		require.NoError(t, err, tc.env)
		require.Equal(t, tc.useSSL, c.Postgres.UseSSL, tc.env)
		require.Equal(t, tc.reject, c.Postgres.SSLRejectUnauthorized, tc.env)
	}
}

// Every bad combination is one line naming the variable, and never quotes
// the URL (it may hold a password).
func TestPostgresURLProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PG_HOST": "db1,,db2"}, `PG_HOST: has an empty entry in its host list`},
		{map[string]string{"PG_HOST": "db1:x"}, `PG_HOST: the port of "db1:x" is not a port number (1-65535)`},
		{map[string]string{"PG_HOST": "db1:0"}, `PG_HOST: the port of "db1:0" is not a port number (1-65535)`},
		{map[string]string{"PG_HOST": "[::1]:70000"}, `PG_HOST: the port of "[::1]:70000" is not a port number (1-65535)`},
		{map[string]string{"PG_HOST": ":5432"}, `PG_HOST: ":5432" is not a host or host:port`},
		{map[string]string{"PG_URL": "mysql://u:hunter2@db/d"}, `PG_URL: is not a postgres:// or postgresql:// URL`},
		{map[string]string{"DATABASE_URL": "host=db user=u password=hunter2"}, `DATABASE_URL: is not a postgres:// or postgresql:// URL`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d", "PG_HOST": "db2"}, `PG_HOST: is set together with PG_URL, which already names the server; unset one of them`},
		{map[string]string{"DATABASE_URL": "postgres://u:hunter2@db/d", "PG_DB": "x"}, `PG_DB: is set together with DATABASE_URL, which already names the server; unset one of them`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d", "PG_PASSWORD": "other"}, `PG_PASSWORD: is set together with a password in PG_URL; keep one of them`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslmode=prefer"}, `PG_URL: sslmode=prefer is not supported: TLS is either off or required; use disable, require or verify-full`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslmode=verify-ca"}, `PG_URL: sslmode=verify-ca is not supported: the broker always checks the host name; use verify-full`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslmode=on"}, `PG_URL: sslmode="on" is not a libpq sslmode`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslmode=disable", "PG_USE_SSL": "true"}, `PG_USE_SSL: disagrees with sslmode=disable in PG_URL; set TLS in one place`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslmode=require", "PG_USE_SSL": "true", "PG_SSL_REJECT_UNAUTHORIZED": "true"}, `PG_SSL_REJECT_UNAUTHORIZED: disagrees with sslmode=require in PG_URL; set TLS in one place`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslrootcert=/ca.pem"}, `PG_URL: parameter "sslrootcert" is not supported: put the CA certificate's PEM in PG_SSL_ROOT_CERT instead`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?sslcert=/c.pem"}, `PG_URL: parameter "sslcert" is not supported: TLS is set with PG_USE_SSL, PG_SSL_REJECT_UNAUTHORIZED and PG_SSL_ROOT_CERT`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?connect_timeout=3"}, `PG_URL: parameter "connect_timeout" is not supported: set QUEEN_PG_CONNECT_TIMEOUT_MS instead`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?pool_max_conns=3"}, `PG_URL: parameter "pool_max_conns" is not supported (accepted: host, port, dbname, user, password, sslmode, target_session_attrs)`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?target_session_attrs=any"}, `PG_URL: target_session_attrs="any" would let the broker connect to a server that refuses writes; use read-write or primary`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?host=a,b&port=1,2,3"}, `PG_URL: names 3 ports for 2 hosts; give one port, or one per host`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?port=x"}, `PG_URL: port "x" is not a port number (1-65535)`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db1,,db2/d"}, `PG_URL: has an empty entry in its host list`},
		{map[string]string{"PG_URL": "postgres://u:hunter2%zz@db/d"}, `PG_URL: has a malformed percent-escape`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?user=a&user=b"}, `PG_URL: parameter "user" is given more than once`},
		{map[string]string{"PG_URL": "postgres://u:hunter2@db/d?x=%zz"}, `PG_URL: has a malformed query string`},
	} {
		c, err := Load(env(tc.env))
		require.Error(t, err, tc.env)
		require.Equal(t, Config{}, c)
		require.Equal(t, []string{tc.want}, problems(err), tc.env)
		require.NotContains(t, err.Error(), "hunter2")
	}
}

func fmtSummary(c Config) string {
	var b strings.Builder
	for _, area := range SummaryAreas() {
		for _, a := range c.Summary()[area] {
			b.WriteString(a.String())
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// The URL reader is a parser at a trust boundary (an environment variable
// of any content): it never panics, never echoes a password, and whatever
// it accepts pgx reads back as the same hosts.
func FuzzPostgresURL(f *testing.F) {
	f.Add("postgres://u:pw@db1:6000,db2/d?sslmode=require&target_session_attrs=primary")
	f.Add("postgresql:///d?host=%2Frun,db&port=1,2")
	f.Add("postgres://[::1]:5432,[fe80::1%25eth0]/x")
	f.Add("postgres://u@:/?")
	f.Add("postgres://a@b@c/d")
	f.Add("postgres://%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Load(env(map[string]string{"PG_URL": raw}))
		if err != nil {
			for _, line := range problems(err) {
				require.True(t, strings.HasPrefix(line, "PG_URL: "), line)
			}
			return
		}
		require.NotEmpty(t, c.Postgres.Hosts)
		pc, err := pgconn.ParseConfig(c.PostgresURL())
		if err != nil {
			return // e.g. a host name pgx cannot resolve the syntax of
		}
		require.Equal(t, c.Postgres.Hosts[0].Port, int(pc.Port))
		require.Len(t, pc.Fallbacks, len(c.Postgres.Hosts)-1)
	})
}
