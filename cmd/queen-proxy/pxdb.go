package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/cmd/queen-proxy/config"
	"github.com/queenforgo/queen/cmd/queen/pgtls"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

// openPXDB builds the pool, checks it with SELECT 1 and applies the proxy's
// migrations under their advisory lock (PROXY.md §1.5). Its error is the
// boot line: "pxdb unavailable: ..." or "migrations failed: ...".
func openPXDB(ctx context.Context, p config.PXDB) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(pxdbURL(p))
	if err != nil {
		return nil, fmt.Errorf("pxdb unavailable: PXDB_*: %w", err)
	}
	pcfg.MaxConns = int32(p.PoolSize)
	pcfg.ConnConfig.ConnectTimeout = p.Timeout
	// PXDB_USE_SSL and friends, as the broker's PG_USE_SSL: the Mozilla roots
	// compiled into the binary, a supplied CA, or encryption without
	// verification; never a silent fallback to plaintext.
	if err := pgtls.Configure(&pcfg.ConnConfig.Config, pgtls.Settings{
		UseSSL: p.UseSSL, RejectUnauthorized: p.SSLRejectUnauthorized, RootCertPEM: p.SSLRootCert,
	}); err != nil {
		return nil, fmt.Errorf("pxdb unavailable: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pxdb unavailable: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, p.Timeout)
	_, err = pool.Exec(pctx, "SELECT 1")
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pxdb unavailable: PXDB_HOST %s: %w", p.Host, err)
	}
	set := migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}
	if err := migrate.ApplySet(ctx, pool, set, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrations failed: %w", err)
	}
	return pool, nil
}

// pxdbURL is the pgx connection URL. Every part is set explicitly, the
// password even when empty, so that no PG* variable of the environment
// stands in for a PXDB_* one. It holds the password: never log it.
func pxdbURL(p config.PXDB) string {
	q := url.Values{}
	q.Set("sslmode", pxdbSSLMode(p))
	q.Set("application_name", "queen-proxy")
	q.Set("TimeZone", "UTC")
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(p.User, p.Password),
		Host:     hostPort(p.Host, p.Port),
		Path:     "/" + p.Database,
		RawQuery: q.Encode(),
	}
	return u.String()
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// pxdbSSLMode tells pgx whether to use TLS at all; pgtls.Configure then
// replaces the TLS configuration pgx derives from it.
func pxdbSSLMode(p config.PXDB) string {
	switch {
	case !p.UseSSL:
		return "disable"
	case p.SSLRejectUnauthorized || p.SSLRootCert != "":
		return "verify-full"
	}
	return "require"
}

// pxdbAdvisory is the boot warning for a legal but probably unintended
// PXDB TLS setting, or "".
func pxdbAdvisory(p config.PXDB) string {
	switch {
	case p.SSLRootCert != "" && !p.UseSSL:
		return "PXDB_SSL_ROOT_CERT is set but PXDB_USE_SSL is false: the connection to pxdb is plaintext"
	case p.UseSSL && p.SSLRootCert != "" && !p.SSLRejectUnauthorized:
		return "PXDB_SSL_REJECT_UNAUTHORIZED=false is ignored: PXDB_SSL_ROOT_CERT supplies the CA to verify against"
	case p.UseSSL && !p.SSLRejectUnauthorized:
		return "PXDB_SSL_REJECT_UNAUTHORIZED=false: the connection to pxdb is encrypted but not authenticated"
	}
	return ""
}
