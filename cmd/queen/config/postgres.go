package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/queenforgo/queen/cmd/queen/pgtls"
)

// PostgresURL is the pgx connection string, in keyword/value form with every
// free-form value quoted and escaped. It pins the session time zone to UTC,
// names the application "queen", and carries the connect timeout in whole
// seconds (rounded up; the pool wiring may set the exact
// Postgres.ConnectTimeout on the parsed config). The pool size is not part of
// the string: the pool wiring sets it from Postgres.PoolSize.
//
// Every host of the list is in it, with one port each, and
// target_session_attrs=read-write (or primary) always, one host included:
// a new connection skips a server that refuses writes (a standby, or a
// demoted primary), so after a failover the pool finds the new primary by
// itself; with one host, a DNS name that resolves to every node works the
// same way, and a name or address that points at a standby fails the
// connection instead of every write. The check costs one round trip per new
// connection, and pooled connections live long.
//
// The string holds the password: never log it.
func (c Config) PostgresURL() string {
	p := c.Postgres
	timeout := int64((p.ConnectTimeout + time.Second - 1) / time.Second)
	if timeout < 1 {
		timeout = 1
	}

	var b strings.Builder
	kv := func(key, value string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(value)
	}
	names, ports := make([]string, len(p.Hosts)), make([]string, len(p.Hosts))
	for i, h := range p.Hosts {
		names[i], ports[i] = h.Name, strconv.Itoa(h.Port)
	}
	kv("host", quoteConnValue(strings.Join(names, ",")))
	kv("port", quoteConnValue(strings.Join(ports, ",")))
	kv("user", quoteConnValue(p.User))
	// Written even when empty so that a PGPASSWORD in the process
	// environment cannot stand in for PG_PASSWORD.
	kv("password", quoteConnValue(p.Password))
	kv("dbname", quoteConnValue(p.Database))
	kv("sslmode", sslMode(p))
	kv("connect_timeout", strconv.FormatInt(timeout, 10))
	kv("target_session_attrs", p.TargetSessionAttrs)
	kv("application_name", "queen")
	kv("TimeZone", "UTC")
	// The admin counts over many partitions have large cost estimates, and
	// JIT compilation then costs more than it saves (2 s of a 4.6 s query
	// with 100k partitions, docs/observability.md); the data plane's
	// statements are too cheap to be compiled anyway.
	kv("jit", "off")
	return b.String()
}

// sslMode maps PG_USE_SSL / PG_SSL_REJECT_UNAUTHORIZED / PG_SSL_ROOT_CERT to
// libpq's sslmode (SECURITY-REQUIREMENTS PGT-1..3, PGT-5): no TLS at all when
// off, never "prefer". The mode only tells pgx whether to verify; the TLS
// config itself (roots from the compiled-in Mozilla bundle, or the
// PG_SSL_ROOT_CERT CA, and ServerName = each host of the list) is set up
// elsewhere by the pool wiring, which replaces the TLSConfig pgx builds from
// this string.
func sslMode(p Postgres) string {
	switch {
	case !p.UseSSL:
		return "disable"
	case p.SSLRejectUnauthorized || p.SSLRootCert != "":
		// A supplied CA outranks PG_SSL_REJECT_UNAUTHORIZED=false (PGT-5).
		return "verify-full"
	default:
		return "require"
	}
}

// TLS returns the settings the pool wiring hands to pgtls.Configure.
func (p Postgres) TLS() pgtls.Settings {
	return pgtls.Settings{UseSSL: p.UseSSL, RejectUnauthorized: p.SSLRejectUnauthorized, RootCertPEM: p.SSLRootCert}
}

// sslTrust names what the PostgreSQL link trusts, for the boot block
// (PGT-4). It asks pgtls, which builds the TLS configuration, so that the
// boot line cannot disagree with the connection.
func sslTrust(p Postgres) (trust string, verified bool) {
	s := p.TLS()
	return string(s.Trust()), s.Verified()
}

// quoteConnValue quotes a keyword/value connection string value: single
// quotes around it, backslash before every backslash and single quote.
func quoteConnValue(v string) string {
	var b strings.Builder
	b.Grow(len(v) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' || v[i] == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// HostList is the hosts as PG_HOST writes them, for the boot block.
func (p Postgres) HostList() string {
	out := make([]string, len(p.Hosts))
	for i, h := range p.Hosts {
		out[i] = h.String()
	}
	return strings.Join(out, ",")
}
