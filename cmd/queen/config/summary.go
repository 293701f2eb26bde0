package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"unicode/utf8"
)

// SummaryAreas lists the keys of Summary in the order the boot log prints them.
func SummaryAreas() []string {
	return []string{"server", "postgres", "auth", "encryption", "spool", "jobs", "sync", "tenancy"}
}

// Summary is the boot configuration block, one list of attributes per area
// (see SummaryAreas), for main to log as "config: <area>" (CFG-3). Secrets
// render as "<unset>" or "<set:N chars>"; nothing in it is secret.
func (c Config) Summary() map[string][]slog.Attr {
	s, p, a := c.Server, c.Postgres, c.Auth
	trust, verified := sslTrust(p)
	keyChars := 0
	if c.Encryption.Enabled() {
		keyChars = 2 * len(c.Encryption.Key) // the variable holds it as hex
	}
	return map[string][]slog.Attr{
		"server": {
			slog.String("listen_addr", c.ListenAddr()),
			slog.String("log_level", strings.ToLower(s.LogLevel.String())),
			slog.String("log_format", s.LogFormat),
			slog.Int64("max_body_bytes", s.MaxBodyBytes),
			slog.Int64("shutdown_timeout_ms", s.ShutdownTimeout.Milliseconds()),
			slog.Int("gogc", s.GCPercent),
			slog.Bool("soft_memory_limit", s.SoftMemoryLimit),
			slog.Int("pop_default_batch_size", c.Pop.DefaultBatchSize),
			slog.Int64("pop_default_timeout_ms", c.Pop.DefaultTimeout.Milliseconds()),
			slog.String("pop_default_subscription_mode", c.Pop.DefaultSubscriptionMode),
			slog.Int64("pop_repoll_ms", c.Pop.RepollInterval.Milliseconds()),
			slog.Bool("pop_hold", c.Pop.HoldParked),
			slog.Int("push_max_batch", c.Push.MaxBatch),
			slog.Int("push_max_flushes", c.Push.MaxFlushes),
			slog.Int("push_parallel_min", c.Push.ParallelMin),
		},
		"postgres": {
			slog.String("source", p.Source),
			slog.String("hosts", p.HostList()),
			slog.String("target_session_attrs", p.TargetSessionAttrs),
			slog.String("user", p.User),
			slog.String("password", redact(p.Password)),
			slog.String("database", p.Database),
			slog.Int("pool_size", p.PoolSize),
			slog.Bool("use_ssl", p.UseSSL),
			slog.Bool("ssl_reject_unauthorized", p.SSLRejectUnauthorized),
			slog.String("ssl_root_cert", redact(p.SSLRootCert)),
			slog.String("ssl_trust", trust),
			slog.Bool("ssl_verified", verified),
			slog.Int64("connect_timeout_ms", p.ConnectTimeout.Milliseconds()),
		},
		"auth": {
			slog.Bool("enabled", a.Enabled),
			slog.String("algorithm", a.Algorithm),
			slog.String("secret", redact(a.Secret)),
			slog.String("public_key", redact(a.PublicKey)),
			slog.String("jwks_url", redactURL(a.JWKSURL)),
			slog.String("issuer", a.Issuer),
			slog.String("audience", a.Audience),
			slog.Int64("clock_skew_s", int64(a.ClockSkew.Seconds())),
			slog.Int64("jwks_refresh_interval_s", int64(a.JWKSRefreshInterval.Seconds())),
			slog.Int64("jwks_timeout_ms", a.JWKSTimeout.Milliseconds()),
			slog.String("skip_paths", strings.Join(a.SkipPaths, ",")),
			slog.String("roles_claim", a.RolesClaim),
			slog.String("roles_array_claim", a.RolesArrayClaim),
			slog.String("role_admin", a.RoleAdmin),
			slog.String("role_read_write", a.RoleReadWrite),
			slog.String("role_read_only", a.RoleReadOnly),
			slog.String("role_write_only", a.RoleWriteOnly),
		},
		"encryption": {
			slog.Bool("enabled", c.Encryption.Enabled()),
			slog.String("key", redactLen(keyChars)),
		},
		"jobs":    c.Jobs.summary(),
		"sync":    c.Mesh.summary(),
		"tenancy": c.Tenancy.summary(),
		"spool": {
			slog.Bool("enabled", c.Spool.Enabled()),
			slog.String("dir", c.Spool.Dir),
			slog.Int64("flush_ms", c.Spool.FlushInterval.Milliseconds()),
			slog.Int("max_batch", c.Spool.MaxBatch),
			slog.Int("events_per_file", c.Spool.EventsPerFile),
		},
	}
}

func redact(secret string) string { return redactLen(utf8.RuneCountInString(secret)) }

func redactLen(n int) string {
	if n == 0 {
		return "<unset>"
	}
	return fmt.Sprintf("<set:%d chars>", n)
}

// redactURL hides a password in the URL's user info; a URL that does not
// parse is shown only by its length.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redact(raw)
	}
	return u.Redacted()
}
