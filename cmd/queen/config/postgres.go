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
	kv("host", quoteConnValue(p.Host))
	kv("port", strconv.Itoa(p.Port))
	kv("user", quoteConnValue(p.User))
	// Written even when empty so that a PGPASSWORD in the process
	// environment cannot stand in for PG_PASSWORD.
	kv("password", quoteConnValue(p.Password))
	kv("dbname", quoteConnValue(p.Database))
	kv("sslmode", sslMode(p))
	kv("connect_timeout", strconv.FormatInt(timeout, 10))
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
// PG_SSL_ROOT_CERT CA, and ServerName = PG_HOST) is set up elsewhere by the
// pool wiring, which replaces the TLSConfig pgx builds from this string.
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
