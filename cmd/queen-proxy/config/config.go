// Package config turns queen-proxy's environment into a Config.
//
// Load is a pure function: it reads only through the getenv it is given,
// does no I/O (the TLS files are read by main, after Load) and reports every
// problem at once, one line each, starting with the variable's name. Values
// of secret variables are never echoed.
//
// Parsing is the broker's, which is stricter than the reference proxy's
// (PROXY.md §1.1): a boolean that is not one of true/false, 1/0, yes/no,
// on/off, or an integer that does not parse, fails the boot instead of
// falling back to a default (docs/proxy.md).
package config

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/queenforgo/queen/proxy/clientip"
)

// Defaults (PROXY.md §1.2-§1.5).
const (
	PortDefault            = 6711
	BindAddrDefault        = "0.0.0.0"
	DevTenantDefault       = "00000000-0000-0000-0000-000000000001"
	UpstreamTimeoutDefault = 35 * time.Second
	LongPollMaxDefault     = 90 * time.Second
	LongPollMarginDefault  = 10 * time.Second
	ConnectTimeoutDefault  = 5 * time.Second
	PXDBTimeoutDefault     = 5 * time.Second
	ShutdownDrainDefault   = 5 * time.Second
	StaleGraceDefault      = 10 * time.Minute
	MaxBodyBytesDefault    = 16 << 20
	MaxBatchItemsDefault   = 10000
	CellMaxParkedDefault   = 5000
	ReconcileDefault       = time.Minute
	StorageRefreshDefault  = 10 * time.Second
	PXDBPortDefault        = 5432
	PXDBUserDefault        = "postgres"
	PXDBDatabaseDefault    = "queen_proxy"
	PXDBPoolSizeDefault    = 16

	JWTIssuerDefault        = "queen-proxy"
	JWTTTLDefault           = 24 * time.Hour
	CookieNameDefault       = "queen_session"
	RevocationSweepDefault  = time.Hour
	MeterFlushDefault       = 15 * time.Second
	SpoolDirDefault         = "./queen-proxy-spool"
	RollupDefault           = time.Hour
	QuotaWarnPercentDefault = 80
	UsageKeepDaysDefault    = 90
)

// Config is the proxy's whole configuration.
type Config struct {
	Port      int        // QUEEN_PROXY_PORT
	BindAddr  netip.Addr // QUEEN_PROXY_BIND_ADDR
	TLSCert   string     // QUEEN_PROXY_TLS_CERT: path of the PEM chain ("" with TLSKey: plaintext)
	TLSKey    string     // QUEEN_PROXY_TLS_KEY: path of the PEM key
	LogLevel  slog.Level // LOG_LEVEL
	LogFormat string     // LOG_FORMAT: text or json

	DevCellURL     string   // QUEEN_PROXY_DEV_CELL_URL: dev-static upstream
	DevCellToken   *string  // QUEEN_PROXY_DEV_CELL_TOKEN (secret)
	DevTenant      string   // QUEEN_PROXY_DEV_TENANT
	DefaultCluster string   // QUEEN_PROXY_DEFAULT_CLUSTER
	SharedHosts    []string // QUEEN_PROXY_SHARED_HOSTS: lower case, port and root dot stripped
	DevInsecure    bool     // QUEEN_PROXY_DEV_INSECURE

	UpstreamTimeout time.Duration // QUEEN_PROXY_UPSTREAM_TIMEOUT_MS
	LongPollMax     time.Duration // QUEEN_PROXY_LONGPOLL_MAX_MS
	LongPollMargin  time.Duration // QUEEN_PROXY_LONGPOLL_MARGIN_MS
	ConnectTimeout  time.Duration // QUEEN_PROXY_UPSTREAM_CONNECT_TIMEOUT_MS
	ShutdownDrain   time.Duration // QUEEN_PROXY_SHUTDOWN_DRAIN_MS
	StaleGrace      time.Duration // QUEEN_PROXY_STALE_GRACE_MS
	MaxBodyBytes    int64         // QUEEN_PROXY_MAX_BODY_BYTES
	MaxBatchItems   int64         // QUEEN_PROXY_MAX_BATCH_ITEMS
	CellMaxParked   int64         // QUEEN_PROXY_CELL_MAX_PARKED
	Enforce         bool          // QUEEN_PROXY_ENFORCE
	TenantHeader    bool          // QUEEN_PROXY_TENANT_HEADER
	Reconcile       time.Duration // QUEEN_PROXY_RECONCILE_MS: broker inventory poll
	StorageRefresh  time.Duration // QUEEN_PROXY_STORAGE_REFRESH_MS: retained-bytes poll, the push-block pump

	PXDB     PXDB
	JWT      JWT
	Sessions Sessions
	Usage    Usage
}

// Sessions holds the human-session settings besides the key material.
type Sessions struct {
	Issuer           string           // QUEEN_PROXY_JWT_ISS
	TTL              time.Duration    // QUEEN_PROXY_JWT_TTL_S: session and cookie lifetime
	Audience         string           // QUEEN_PROXY_JWT_AUD: "" accepts any
	CookieName       string           // QUEEN_PROXY_COOKIE_NAME
	CookieDomain     string           // QUEEN_PROXY_COOKIE_DOMAIN: "" is a host-only cookie
	RevocationStrict bool             // QUEEN_PROXY_REVOCATION_STRICT
	RevocationSweep  time.Duration    // QUEEN_PROXY_REVOCATION_SWEEP_MS: 0 never
	OperatorEnabled  bool             // QUEEN_PROXY_OPERATOR_ENABLED
	TrustedProxies   clientip.Trusted // QUEEN_PROXY_TRUSTED_PROXIES
}

// Usage holds the metering settings.
type Usage struct {
	FlushInterval  time.Duration // QUEEN_PROXY_METER_FLUSH_MS
	SpoolDir       string        // QUEEN_PROXY_SPOOL_DIR
	RollupInterval time.Duration // QUEEN_PROXY_ROLLUP_MS
	WarnPercent    int           // QUEEN_PROXY_QUOTA_WARN_PERCENT
	KeepDays       int           // QUEEN_PROXY_USAGE_KEEP_DAYS
}

// PXDB holds the control-plane database settings.
type PXDB struct {
	Host                  string        // PXDB_HOST: set means the control plane is on
	Port                  int           // PXDB_PORT
	User                  string        // PXDB_USER
	Password              string        // PXDB_PASSWORD (secret)
	Database              string        // PXDB_DB
	UseSSL                bool          // PXDB_USE_SSL
	SSLRejectUnauthorized bool          // PXDB_SSL_REJECT_UNAUTHORIZED
	SSLRootCert           string        // PXDB_SSL_ROOT_CERT: validated PEM content
	PoolSize              int           // PXDB_POOL_SIZE (plus one connection for LISTEN)
	Timeout               time.Duration // PXDB_TIMEOUT_MS
}

// Enabled reports whether the control plane is configured.
func (p PXDB) Enabled() bool { return p.Host != "" }

// JWT holds the session-signing material; material that is set and
// unusable fails the boot (PROXY.md §1.8 item 9).
type JWT struct {
	Secret        string // QUEEN_PROXY_JWT_SECRET (secret)
	Ed25519PEM    string // QUEEN_PROXY_JWT_ED25519_PEM (secret): PKCS#8 private key
	Ed25519PubPEM string // QUEEN_PROXY_JWT_ED25519_PUB_PEM: SPKI public key
}

// Load builds the Config from getenv (the shape of os.LookupEnv).
func Load(getenv func(string) (string, bool)) (Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	l := &loader{getenv: getenv}
	c := Config{
		Port:      l.port("QUEEN_PROXY_PORT", PortDefault),
		BindAddr:  l.bindAddr("QUEEN_PROXY_BIND_ADDR", "QUEEN_PROXY_PORT"),
		TLSCert:   l.str("QUEEN_PROXY_TLS_CERT"),
		TLSKey:    l.str("QUEEN_PROXY_TLS_KEY"),
		LogLevel:  l.logLevel("LOG_LEVEL"),
		LogFormat: l.oneOf("LOG_FORMAT", "text", "text", "json"),

		DevCellURL:     l.httpURL("QUEEN_PROXY_DEV_CELL_URL"),
		DevCellToken:   l.optional("QUEEN_PROXY_DEV_CELL_TOKEN"),
		DevTenant:      l.tenantUUID("QUEEN_PROXY_DEV_TENANT", DevTenantDefault),
		DefaultCluster: l.slug("QUEEN_PROXY_DEFAULT_CLUSTER"),
		SharedHosts:    l.hosts("QUEEN_PROXY_SHARED_HOSTS"),
		DevInsecure:    l.boolean("QUEEN_PROXY_DEV_INSECURE", false),

		UpstreamTimeout: l.millis("QUEEN_PROXY_UPSTREAM_TIMEOUT_MS", UpstreamTimeoutDefault, 1),
		LongPollMax:     l.millis("QUEEN_PROXY_LONGPOLL_MAX_MS", LongPollMaxDefault, 1),
		LongPollMargin:  l.millis("QUEEN_PROXY_LONGPOLL_MARGIN_MS", LongPollMarginDefault, 0),
		ConnectTimeout:  l.millis("QUEEN_PROXY_UPSTREAM_CONNECT_TIMEOUT_MS", ConnectTimeoutDefault, 1),
		ShutdownDrain:   l.millis("QUEEN_PROXY_SHUTDOWN_DRAIN_MS", ShutdownDrainDefault, 0),
		StaleGrace:      l.millis("QUEEN_PROXY_STALE_GRACE_MS", StaleGraceDefault, 0),
		MaxBodyBytes:    l.integer("QUEEN_PROXY_MAX_BODY_BYTES", MaxBodyBytesDefault, 1024, 1<<40),
		MaxBatchItems:   l.integer("QUEEN_PROXY_MAX_BATCH_ITEMS", MaxBatchItemsDefault, 1, 1<<31-1),
		CellMaxParked:   l.integer("QUEEN_PROXY_CELL_MAX_PARKED", CellMaxParkedDefault, 1, 1<<31-1),
		Enforce:         l.boolean("QUEEN_PROXY_ENFORCE", false),
		TenantHeader:    l.boolean("QUEEN_PROXY_TENANT_HEADER", true),
		Reconcile:       l.millis("QUEEN_PROXY_RECONCILE_MS", ReconcileDefault, 100),
		StorageRefresh:  l.millis("QUEEN_PROXY_STORAGE_REFRESH_MS", StorageRefreshDefault, 500),

		PXDB: PXDB{
			Host:                  l.pgString("PXDB_HOST", "", false),
			Port:                  l.port("PXDB_PORT", PXDBPortDefault),
			User:                  l.pgString("PXDB_USER", PXDBUserDefault, false),
			Password:              l.pgString("PXDB_PASSWORD", "", true),
			Database:              l.pgString("PXDB_DB", PXDBDatabaseDefault, false),
			UseSSL:                l.boolean("PXDB_USE_SSL", false),
			SSLRejectUnauthorized: l.boolean("PXDB_SSL_REJECT_UNAUTHORIZED", true),
			SSLRootCert:           l.rootCert("PXDB_SSL_ROOT_CERT"),
			PoolSize:              int(l.integer("PXDB_POOL_SIZE", PXDBPoolSizeDefault, 1, 1000)),
			Timeout:               l.millis("PXDB_TIMEOUT_MS", PXDBTimeoutDefault, 100),
		},
		JWT: JWT{
			Secret:        l.str("QUEEN_PROXY_JWT_SECRET"),
			Ed25519PEM:    l.ed25519Private("QUEEN_PROXY_JWT_ED25519_PEM"),
			Ed25519PubPEM: l.ed25519Public("QUEEN_PROXY_JWT_ED25519_PUB_PEM"),
		},
		Sessions: Sessions{
			Issuer:           l.strDefault("QUEEN_PROXY_JWT_ISS", JWTIssuerDefault),
			TTL:              time.Duration(l.integer("QUEEN_PROXY_JWT_TTL_S", int64(JWTTTLDefault/time.Second), 60, 90*24*3600)) * time.Second,
			Audience:         l.str("QUEEN_PROXY_JWT_AUD"),
			CookieName:       l.cookieName("QUEEN_PROXY_COOKIE_NAME"),
			CookieDomain:     l.cookieDomain("QUEEN_PROXY_COOKIE_DOMAIN"),
			RevocationStrict: l.boolean("QUEEN_PROXY_REVOCATION_STRICT", false),
			RevocationSweep:  l.millis("QUEEN_PROXY_REVOCATION_SWEEP_MS", RevocationSweepDefault, 0),
			OperatorEnabled:  l.boolean("QUEEN_PROXY_OPERATOR_ENABLED", false),
			TrustedProxies:   l.trusted("QUEEN_PROXY_TRUSTED_PROXIES"),
		},
		Usage: Usage{
			FlushInterval:  l.millis("QUEEN_PROXY_METER_FLUSH_MS", MeterFlushDefault, 100),
			SpoolDir:       l.strDefault("QUEEN_PROXY_SPOOL_DIR", SpoolDirDefault),
			RollupInterval: l.millis("QUEEN_PROXY_ROLLUP_MS", RollupDefault, 1000),
			WarnPercent:    int(l.integer("QUEEN_PROXY_QUOTA_WARN_PERCENT", QuotaWarnPercentDefault, 1, 100)),
			KeepDays:       int(l.integer("QUEEN_PROXY_USAGE_KEEP_DAYS", UsageKeepDaysDefault, 1, 3650)),
		},
	}
	c.crossCheck(l)
	if err := errors.Join(l.errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// crossCheck reports the rules that involve several variables (PROXY.md
// §1.8 items 1, 5 and 6).
func (c Config) crossCheck(l *loader) {
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		l.fail("QUEEN_PROXY_TLS_CERT", "set without QUEEN_PROXY_TLS_KEY (set both for TLS, or neither)")
	case c.TLSKey != "" && c.TLSCert == "":
		l.fail("QUEEN_PROXY_TLS_KEY", "set without QUEEN_PROXY_TLS_CERT (set both for TLS, or neither)")
	}
	if len(c.SharedHosts) > 0 && !c.PXDB.Enabled() {
		l.fail("QUEEN_PROXY_SHARED_HOSTS", "needs PXDB_HOST: on a shared host the API key names the cluster")
	}
	if !c.PXDB.Enabled() && c.DevCellURL == "" && !l.failed("QUEEN_PROXY_DEV_CELL_URL") {
		l.fail("PXDB_HOST", "nothing to serve: set PXDB_HOST (the control plane) or QUEEN_PROXY_DEV_CELL_URL (one broker, dev-static)")
	}
}

// ListenAddr is the listener's address, host and port joined.
func (c Config) ListenAddr() string {
	return net.JoinHostPort(c.BindAddr.String(), strconv.Itoa(c.Port))
}

// TLS reports whether the listener speaks TLS.
func (c Config) TLS() bool { return c.TLSCert != "" && c.TLSKey != "" }

// Mode names what the proxy serves, for the boot log.
func (c Config) Mode() string {
	switch {
	case c.DevCellURL != "" && c.PXDB.Enabled():
		return "dev-static with pxdb keys"
	case c.DevCellURL != "":
		return "dev-static"
	}
	return "pxdb"
}
