// Command queen is the broker: the HTTP API, /health and the data plane on
// one port, backed by PostgreSQL.
//
// Configuration comes from the environment (see cmd/queen/config); a bad
// value stops the boot with one line naming the variable.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/cmd/queen/roots"
	"github.com/queenforgo/queen/handlers"
	"github.com/queenforgo/queen/handlers/aggcache"
	"github.com/queenforgo/queen/handlers/auth"
	dataplane "github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/handlers/longpoll"
	"github.com/queenforgo/queen/handlers/metrics/exposition"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/web"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "queen: config: "+line)
		}
		return 2
	}
	// The broker's GOGC (config.GCPercentDefault) unless GOGC says
	// otherwise; GOMEMLIMIT, when set, is applied by the runtime, else the
	// broker's soft limit (memlimit.go) once the context exists.
	debug.SetGCPercent(cfg.Server.GCPercent)
	logger := newLogger(cfg.Server)
	summary := cfg.Summary()
	for _, area := range config.SummaryAreas() {
		logger.LogAttrs(context.Background(), slog.LevelInfo, "config: "+area, summary[area]...)
	}
	authn, err := newAuthenticator(cfg.Auth, cfg.Tenancy, logger)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "queen: invalid JWT auth configuration: "+line)
		}
		return 2
	}

	// The first signal starts a graceful drain; stop() below restores the
	// default handling so that a second signal ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.Server.SoftMemoryLimit {
		go governMemory(ctx)
	}

	// The auth mode in one line (JWT-2): off means open, and says so.
	if authn != nil {
		logger.Info("JWT auth ENABLED", "algorithm", cfg.Auth.Algorithm,
			"skip_paths", strings.Join(cfg.Auth.SkipPaths, ","), "key_source", authn.KeySource())
		// Fetches the JWKS, if one is used, and logs the outcome; a failure
		// is not fatal, keys are fetched again on demand (JWT-6).
		_ = authn.Start(ctx)
		defer authn.Stop()
	} else {
		logger.Info("JWT auth disabled — API and dashboard are open (standalone); set JWT_ENABLED=true to require tokens")
	}
	logTenancy(cfg.Tenancy, logger)

	cipher, err := newCipher(cfg.Encryption, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "queen: config: QUEEN_ENCRYPTION_KEY: "+err.Error())
		return 2
	}
	// What the PostgreSQL link trusts is in the config block (PGT-4); a
	// setting that is probably a mistake is also a warning (PGT-3, PGT-5).
	if advice := cfg.Postgres.TLS().Advisory(); advice != "" {
		logger.Warn(advice)
	}

	pool, err := openPool(ctx, cfg, logger)
	if err != nil {
		logger.Error("postgres unavailable at boot", "err", err)
		return 1
	}
	defer pool.Close()
	// The dashboard's expensive aggregates (handlers/answer_cache.go); its
	// background recomputations end before the pool closes (defers run in
	// reverse).
	answers := aggcache.New(aggcache.Config{Logger: logger})
	defer answers.Wait()

	// Wired in this order and shut down in reverse: the disk spool (owned
	// by the broker from here on: docs/spool.md), the data plane, the HTTP
	// adapter, the HTTP server. Metrics, background jobs and migrations
	// run beside them (background.go).
	sp := openSpool(cfg.Spool, logger)
	bg := newBackground(cfg, pool, logger)
	id := serverID(cfg.Mesh.ServerID)
	tr, err := newTransports(cfg, pool, id, logger)
	if err != nil {
		logger.Error("build the broker-to-broker transports", "err", err)
		return 1
	}
	validatePush, err := handlers.PushValidator()
	if err != nil {
		logger.Error("build the push validator", "err", err)
		return 1
	}
	timings := exposition.NewTimings()
	brk := dataplane.New(dataplane.Config{
		Pool:                    pool,
		Logger:                  logger,
		Metrics:                 bg.metrics,
		Timings:                 timings,
		Cipher:                  cipher,
		Spool:                   sp,
		ValidatePushFunc:        validatePush,
		DefaultBatch:            cfg.Pop.DefaultBatchSize,
		DefaultTimeout:          cfg.Pop.DefaultTimeout,
		DefaultSubscriptionMode: cfg.Pop.DefaultSubscriptionMode,
		RepollInterval:          cfg.Pop.RepollInterval,
		PushMaxBatch:            cfg.Push.MaxBatch,
		PushMaxFlushes:          cfg.Push.MaxFlushes,
		PushParallelMin:         cfg.Push.ParallelMin,
		Notifier:                tr.Notifier(),
		MaintenanceRefresh:      cfg.Mesh.CacheRefresh,
		QueueCacheTTL:           cfg.Mesh.CacheRefresh,
	})
	// A boot that fails from here on still closes the spool (Stop is
	// idempotent: the shutdown below makes this one a no-op).
	defer func() { _ = brk.Stop(context.Background()) }()
	tcpLn, err := net.Listen("tcp", cfg.ListenAddr())
	if err != nil {
		fmt.Fprintf(os.Stderr, "queen: PORT/QUEEN_BIND_ADDR: cannot listen on %s: %v\n", cfg.ListenAddr(), err)
		return 1
	}
	// With QUEEN_POP_HOLD on, parked long-polls are held outside net/http
	// and handed back to it through the longpoll listener.
	var (
		ln   = tcpLn
		held *longpoll.Listener
	)
	if cfg.Pop.HoldParked {
		held = longpoll.NewListener(tcpLn, nil)
		ln = held
	}
	srv := handlers.New(handlers.Config{
		Broker:         brk,
		Pool:           pool,
		Logger:         logger,
		MaxBodyBytes:   cfg.Server.MaxBodyBytes,
		Version:        version,
		Auth:           authn,
		ServerID:       id,
		StatsFlushFunc: bg.flush,
		Migration:      bg.migration,
		Dashboard:      web.New(),
		Collectors:     []prometheus.Collector{timings},
		Tenancy:        cfg.Tenancy.Header,
		SharedState:    tr,
		AnswerCache:    answers,
		LongPolls:      held,
	})
	handler, err := srv.Handler()
	if err != nil {
		logger.Error("build http handler", "err", err)
		return 1
	}
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// The transports deliver other brokers' announcements to brk, and
	// carry its own from its first one on. They outlive the first signal
	// (the drain still announces) and stop before the pool closes: here
	// on a failed boot, below on a shutdown.
	if err := tr.start(context.WithoutCancel(ctx), brk); err != nil {
		logger.Error("start the broker-to-broker transports", "err", err)
		return 1
	}
	defer func() { _ = tr.stop(context.Background()) }()
	if err := brk.Start(ctx); err != nil {
		logger.Error("start the broker", "err", err)
		return 1
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	bg.start()
	// The dashboard's first page on a fresh broker would otherwise open its
	// connections and plan its statements while the user waits.
	go srv.KeepAdminWarm(ctx, min(handlers.AdminWarmConnsDefault, cfg.Postgres.PoolSize))
	logger.Info("queen listening", "addr", ln.Addr().String(), "version", version)

	select {
	case err := <-serveErr:
		logger.Error("http server stopped", "err", err)
		return 1
	case <-ctx.Done():
	}
	stop()
	logger.Info("shutting down: draining requests (send the signal again to exit at once)")
	srv.Drain() // /health answers 503, parked long-polls end
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("requests still running at the shutdown deadline", "err", err)
	}
	// The held long-polls, answered empty by the drain, are written out.
	if held != nil {
		if err := held.Shutdown(shutdownCtx); err != nil {
			logger.Warn("long-polls still held at the shutdown deadline", "err", err)
		}
	}
	// Pushes and acks already queued for a group commit are committed, and
	// the spool's queued appends fsynced and its active file finalised
	// (what is not replayed yet is replayed by the next start), before the
	// pool closes (deferred above).
	if err := brk.Stop(shutdownCtx); err != nil {
		logger.Warn("stop the broker", "err", err)
	}
	// The broker's last announcements (its final group commits) are
	// handed over; the mesh's connections and the LISTEN connection close
	// before the pool that NOTIFY publishes through.
	if err := tr.stop(shutdownCtx); err != nil {
		logger.Warn("stop the broker-to-broker transports", "err", err)
	}
	bg.stop()
	logger.Info("shut down")
	return 0
}

// newAuthenticator builds the JWT authenticator, or nil when JWT_ENABLED is
// off. Its error has one line per problem, each naming the variable (JWT-1).
// t gives the tenant claim (QUEEN_TENANT_CLAIM).
func newAuthenticator(a config.Auth, t config.Tenancy, logger *slog.Logger) (*auth.Authenticator, error) {
	if !a.Enabled {
		return nil, nil
	}
	return auth.New(auth.Config{
		Algorithm:           a.Algorithm,
		Secret:              a.Secret,
		PublicKey:           a.PublicKey,
		JWKSURL:             a.JWKSURL,
		JWKSRefreshInterval: a.JWKSRefreshInterval,
		JWKSTimeout:         a.JWKSTimeout,
		Issuer:              a.Issuer,
		Audience:            a.Audience,
		ClockSkew:           a.ClockSkew,
		SkipPaths:           a.SkipPaths,
		RolesClaim:          a.RolesClaim,
		RolesArrayClaim:     a.RolesArrayClaim,
		RoleAdmin:           a.RoleAdmin,
		RoleReadWrite:       a.RoleReadWrite,
		RoleReadOnly:        a.RoleReadOnly,
		RoleWriteOnly:       a.RoleWriteOnly,
		TenantClaim:         t.Claim,
		Logger:              logger,
		HTTPClient:          jwksClient(),
	})
}

// logTenancy says in one line when native tenancy is on (TEN-2), and what
// decides a request's tenant then.
func logTenancy(t config.Tenancy, logger *slog.Logger) {
	if !t.Header {
		return
	}
	if t.Claim != "" {
		logger.Info("QUEEN_TENANCY_HEADER on — native tenant scoping ENABLED",
			"tenant_from", "x-queen-tenant, fixed by the token claim when present", "tenant_claim", t.Claim)
		return
	}
	logger.Info("QUEEN_TENANCY_HEADER on — native tenant scoping ENABLED",
		"tenant_from", "x-queen-tenant, trusted from the proxy in front")
}

// newCipher loads the payload encryption key (ENC-1), or returns nil when
// QUEEN_ENCRYPTION_KEY is unset: then flagged queues store plaintext. The
// key's form was checked by config.Load, which refuses a malformed one.
func newCipher(e config.Encryption, logger *slog.Logger) (*crypto.Cipher, error) {
	if !e.Enabled() {
		return nil, nil
	}
	c, err := crypto.New(e.Key)
	if err != nil {
		return nil, err
	}
	logger.Info("encryption service initialized (AES-256-GCM)")
	return c, nil
}

// jwksClient fetches JWT_JWKS_URL, verifying HTTPS against the compiled-in
// Mozilla roots rather than the system store (JWT-6), like PostgreSQL TLS.
func jwksClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots.Mozilla(), MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}
}

func newLogger(s config.Server) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	if s.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// openSpool opens FILE_BUFFER_DIR, or returns nil when it is unset. A
// directory that cannot be used does not stop the boot: the spool logs why
// once, and the pushes that need it answer 503 until it works.
func openSpool(c config.Spool, logger *slog.Logger) *spool.Spool {
	if !c.Enabled() {
		logger.Info("disk spool off (FILE_BUFFER_DIR unset): pushes answer 503 while PostgreSQL is unreachable")
		return nil
	}
	return spool.Open(spool.Config{
		Dir:           c.Dir,
		FlushInterval: c.FlushInterval,
		MaxBatch:      c.MaxBatch,
		EventsPerFile: c.EventsPerFile,
		Logger:        logger,
	})
}
