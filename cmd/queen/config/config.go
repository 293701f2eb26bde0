// Package config turns the broker's environment into a Config.
//
// Load is a pure function: it reads only through the getenv it is given
// (os.LookupEnv in main, a map in tests), does no I/O and no logging, and
// reports every problem at once. Each problem is one line that starts with the
// variable's name; values of secret variables are never echoed.
package config

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/queenforgo/queen/handlers"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/spool"
)

// Defaults of the variables that belong to the process itself. Every other
// default is the one its package exports (broker.PopBatchDefault,
// spool.FlushIntervalDefault, auth.AlgorithmDefault, jobs.*Default, ...), so
// that each is written once. An unset or empty variable takes its default
// (QUEEN_BIND_ADDR excepted: set-but-empty is an error).
const (
	PortDefault            = 6632
	BindAddrDefault        = "0.0.0.0"
	LogLevelDefault        = slog.LevelInfo
	LogFormatDefault       = LogFormatText
	ShutdownTimeoutDefault = 30 * time.Second
	// GCPercentDefault is the broker's GOGC. Pushes allocate a lot of
	// short-lived memory (request bodies, decoded items, statement
	// arguments), and at Go's default of 100 garbage collection took about
	// 15 % of the broker's CPU; 200 gave 6-13 % more push throughput for
	// about 7 MB more RSS (docs/benchmarks.md).
	GCPercentDefault = 200

	PGHostDefault                  = "localhost"
	PGPortDefault                  = 5432
	PGUserDefault                  = "postgres"
	PGDatabaseDefault              = "postgres"
	PGPoolSizeDefault              = 20
	PGSSLRejectUnauthorizedDefault = true
	PGConnectTimeoutDefault        = 5 * time.Second

	// JWTClockSkewDefault: the auth package takes any skew as given (zero
	// is valid), so the variable's default lives here.
	JWTClockSkewDefault = 30 * time.Second
)

// JWTSkipPathsDefault is JWT_SKIP_PATHS when unset. Every entry is public
// anyway; the list exists for parity with the reference.
func JWTSkipPathsDefault() []string {
	return []string{"/health", "/metrics/prometheus", "/metrics", "/"}
}

// Values of LOG_FORMAT.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Config is the broker's whole configuration, built once at boot by Load.
type Config struct {
	Server     Server
	Postgres   Postgres
	Pop        Pop
	Push       Push
	Auth       Auth
	Encryption Encryption
	Spool      Spool
	Jobs       Jobs    // jobs.go
	Mesh       Mesh    // mesh.go
	Tenancy    Tenancy // tenancy.go
}

// Server holds the HTTP listener and process settings.
type Server struct {
	Port            int           // PORT
	BindAddr        netip.Addr    // QUEEN_BIND_ADDR; "localhost" is stored as 127.0.0.1
	LogLevel        slog.Level    // LOG_LEVEL
	LogFormat       string        // LOG_FORMAT: LogFormatText or LogFormatJSON
	MaxBodyBytes    int64         // QUEEN_MAX_BODY_BYTES
	ShutdownTimeout time.Duration // QUEEN_SHUTDOWN_TIMEOUT_MS
	// GCPercent is GOGC, read by the Go runtime itself and checked here:
	// the runtime takes a malformed value for 100 without a word. -1 is
	// "off". GOMEMLIMIT's value is the runtime's alone (it refuses a
	// malformed one before main runs).
	GCPercent int
	// SoftMemoryLimit: GOMEMLIMIT is unset, so main applies the broker's
	// own soft limit (cmd/queen/memlimit.go); set, the runtime applies it.
	SoftMemoryLimit bool
}

// Postgres holds the database connection settings (pghosts.go reads them).
type Postgres struct {
	// Hosts are tried in order for every new connection; the first that
	// accepts writes wins (TargetSessionAttrs). PG_HOST split at commas, or
	// the hosts of PG_URL / DATABASE_URL.
	Hosts                 []Host
	Port                  int           // PG_PORT: the port of a PG_HOST entry without one
	User                  string        // PG_USER, or the URL's
	Password              string        // PG_PASSWORD, or the URL's (secret)
	Database              string        // PG_DB, or the URL's
	Source                string        // SourcePGVars, SourcePGURL or SourceDatabaseURL
	TargetSessionAttrs    string        // TargetReadWrite, or TargetPrimary from a URL
	PoolSize              int           // DB_POOL_SIZE
	UseSSL                bool          // PG_USE_SSL
	SSLRejectUnauthorized bool          // PG_SSL_REJECT_UNAUTHORIZED
	SSLRootCert           string        // PG_SSL_ROOT_CERT: validated PEM, literal `\n` expanded (secret)
	ConnectTimeout        time.Duration // QUEEN_PG_CONNECT_TIMEOUT_MS
}

// Pop holds the defaults of pop requests and long-polls.
type Pop struct {
	DefaultBatchSize        int           // DEFAULT_BATCH_SIZE
	DefaultTimeout          time.Duration // DEFAULT_TIMEOUT (milliseconds in the environment)
	DefaultSubscriptionMode string        // DEFAULT_SUBSCRIPTION_MODE: "", "all", "new" or "new-only"
	RepollInterval          time.Duration // QUEEN_POP_REPOLL_MS: fallback re-poll of parked long-polls
	// HoldParked (QUEEN_POP_HOLD, default on) holds parked HTTP/1.1
	// long-polls outside net/http (handlers/longpoll), the memory 10,000
	// of them need (docs/benchmarks.md, "Held long-polls"); off, each waits
	// in its request's goroutine with net/http's buffers.
	HoldParked bool
}

// Push holds the push coalescer settings.
type Push struct {
	MaxBatch    int // QUEEN_PUSH_MAX_BATCH: messages per group-commit flush
	MaxFlushes  int // QUEEN_PUSH_MAX_FLUSHES: group-commit flushes in flight per kind
	ParallelMin int // QUEEN_PUSH_PARALLEL_MIN: waiting items that start a flush beside a running one
}

// Auth holds the JWT settings. Only their types are checked here; the auth
// package (handlers/auth) validates algorithm and key material together.
type Auth struct {
	Enabled             bool          // JWT_ENABLED
	Algorithm           string        // JWT_ALGORITHM
	Secret              string        // JWT_SECRET (secret)
	PublicKey           string        // JWT_PUBLIC_KEY (secret)
	JWKSURL             string        // JWT_JWKS_URL
	JWKSRefreshInterval time.Duration // JWT_JWKS_REFRESH_INTERVAL (seconds, at least 1)
	JWKSTimeout         time.Duration // JWT_JWKS_TIMEOUT_MS (at least 1)
	Issuer              string        // JWT_ISSUER
	Audience            string        // JWT_AUDIENCE
	ClockSkew           time.Duration // JWT_CLOCK_SKEW (seconds in the environment)
	// SkipPaths is JWT_SKIP_PATHS split at commas, trimmed, empties dropped.
	// Set-but-empty means skip nothing (CFG-2); only unset takes the default.
	SkipPaths       []string
	RolesClaim      string // JWT_ROLES_CLAIM: claim holding one role string
	RolesArrayClaim string // JWT_ROLES_ARRAY_CLAIM: claim holding an array of roles
	RoleAdmin       string // JWT_ROLE_ADMIN
	RoleReadWrite   string // JWT_ROLE_READ_WRITE
	RoleReadOnly    string // JWT_ROLE_READ_ONLY
	RoleWriteOnly   string // JWT_ROLE_WRITE_ONLY
}

// Encryption holds the payload encryption key.
type Encryption struct {
	Key []byte // QUEEN_ENCRYPTION_KEY decoded: nil (off) or 32 bytes (secret)
}

// Enabled reports whether a key is loaded.
func (e Encryption) Enabled() bool { return len(e.Key) > 0 }

// Spool holds the disk spool settings.
type Spool struct {
	Dir           string        // FILE_BUFFER_DIR: empty means the spool is off
	FlushInterval time.Duration // FILE_BUFFER_FLUSH_MS: the drain's cycle
	MaxBatch      int           // FILE_BUFFER_MAX_BATCH: records per replay transaction
	EventsPerFile int           // FILE_BUFFER_EVENTS_PER_FILE: records before a file rotates
}

// Enabled reports whether the spool has a directory.
func (s Spool) Enabled() bool { return s.Dir != "" }

// Load builds the Config from getenv, which has the shape of os.LookupEnv.
// A nil getenv means an empty environment. On failure it returns every
// problem joined with errors.Join, one line per problem, each starting with
// the variable's name.
func Load(getenv func(string) (string, bool)) (Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	l := &loader{getenv: getenv}

	var c Config

	c.Server = Server{
		Port:            l.port("PORT", PortDefault),
		BindAddr:        l.bindAddr("QUEEN_BIND_ADDR"),
		LogLevel:        l.logLevel("LOG_LEVEL"),
		LogFormat:       l.oneOf("LOG_FORMAT", LogFormatDefault, LogFormatText, LogFormatJSON),
		MaxBodyBytes:    l.integer("QUEEN_MAX_BODY_BYTES", handlers.MaxBodyBytesDefault, 1024, maxNone),
		ShutdownTimeout: l.millis("QUEEN_SHUTDOWN_TIMEOUT_MS", ShutdownTimeoutDefault, 1),
		GCPercent:       l.gcPercent("GOGC"),
		SoftMemoryLimit: !l.present("GOMEMLIMIT"),
	}

	c.Postgres = Postgres{
		PoolSize:              int(l.integer("DB_POOL_SIZE", PGPoolSizeDefault, 1, 1000)),
		UseSSL:                l.boolean("PG_USE_SSL", false),
		SSLRejectUnauthorized: l.boolean("PG_SSL_REJECT_UNAUTHORIZED", PGSSLRejectUnauthorizedDefault),
		SSLRootCert:           l.rootCert("PG_SSL_ROOT_CERT"),
		ConnectTimeout:        l.millis("QUEEN_PG_CONNECT_TIMEOUT_MS", PGConnectTimeoutDefault, 1),
	}
	l.postgres(&c.Postgres) // after the TLS variables: a URL's sslmode must agree with them

	c.Pop = Pop{
		DefaultBatchSize:        int(l.integer("DEFAULT_BATCH_SIZE", broker.PopBatchDefault, 1, 1000)),
		DefaultTimeout:          l.millis("DEFAULT_TIMEOUT", broker.PopTimeoutDefault, 0),
		DefaultSubscriptionMode: l.oneOf("DEFAULT_SUBSCRIPTION_MODE", "", "all", "new", "new-only"),
		RepollInterval:          l.millis("QUEEN_POP_REPOLL_MS", broker.PopRepollDefault, 10),
		HoldParked:              l.boolean("QUEEN_POP_HOLD", true),
	}

	c.Push = Push{
		MaxBatch:    int(l.integer("QUEEN_PUSH_MAX_BATCH", broker.PushMaxBatchDefault, 1, maxNone)),
		MaxFlushes:  int(l.integer("QUEEN_PUSH_MAX_FLUSHES", broker.PushMaxFlushesDefault, 1, 64)),
		ParallelMin: int(l.integer("QUEEN_PUSH_PARALLEL_MIN", broker.PushParallelMinDefault, 1, maxNone)),
	}

	c.Auth = Auth{
		Enabled:             l.boolean("JWT_ENABLED", false),
		Algorithm:           l.str("JWT_ALGORITHM", auth.AlgorithmDefault),
		Secret:              l.str("JWT_SECRET", ""),
		PublicKey:           l.str("JWT_PUBLIC_KEY", ""),
		JWKSURL:             l.str("JWT_JWKS_URL", ""),
		JWKSRefreshInterval: l.seconds("JWT_JWKS_REFRESH_INTERVAL", auth.JWKSRefreshIntervalDefault, 1),
		JWKSTimeout:         l.millis("JWT_JWKS_TIMEOUT_MS", auth.JWKSTimeoutDefault, 1),
		Issuer:              l.str("JWT_ISSUER", ""),
		Audience:            l.str("JWT_AUDIENCE", ""),
		ClockSkew:           l.seconds("JWT_CLOCK_SKEW", JWTClockSkewDefault, 0),
		SkipPaths:           l.list("JWT_SKIP_PATHS", JWTSkipPathsDefault()),
		RolesClaim:          l.str("JWT_ROLES_CLAIM", auth.RolesClaimDefault),
		RolesArrayClaim:     l.str("JWT_ROLES_ARRAY_CLAIM", auth.RolesArrayClaimDefault),
		RoleAdmin:           l.str("JWT_ROLE_ADMIN", auth.RoleAdminDefault),
		RoleReadWrite:       l.str("JWT_ROLE_READ_WRITE", auth.RoleReadWriteDefault),
		RoleReadOnly:        l.str("JWT_ROLE_READ_ONLY", auth.RoleReadOnlyDefault),
		RoleWriteOnly:       l.str("JWT_ROLE_WRITE_ONLY", auth.RoleWriteOnlyDefault),
	}

	c.Encryption = Encryption{Key: l.hexKey("QUEEN_ENCRYPTION_KEY")}

	c.Spool = Spool{
		Dir:           l.str("FILE_BUFFER_DIR", ""),
		FlushInterval: l.millis("FILE_BUFFER_FLUSH_MS", spool.FlushIntervalDefault, 1),
		MaxBatch:      int(l.integer("FILE_BUFFER_MAX_BATCH", spool.MaxBatchDefault, 1, 10000)),
		EventsPerFile: int(l.integer("FILE_BUFFER_EVENTS_PER_FILE", spool.EventsPerFileDefault, 1, maxNone)),
	}

	c.Jobs = l.jobs()
	c.Mesh = l.mesh(c.Server.BindAddr)
	c.Tenancy = l.tenancy(c.Auth.Enabled)

	if err := errors.Join(l.errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ListenAddr is the HTTP listener address, host and port joined (an IPv6
// host is bracketed).
func (c Config) ListenAddr() string {
	host := BindAddrDefault
	if c.Server.BindAddr.IsValid() {
		host = c.Server.BindAddr.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(c.Server.Port))
}
