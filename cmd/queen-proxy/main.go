// Command queen-proxy is the front door of one or more Queen cells: TLS,
// API keys and human sessions, a fail-closed route table generated from the
// spec, limits and usage metering per cluster, the cell's own credential
// and tenant on every forwarded request, the console, and the broker's
// dashboard behind a session (docs/proxy.md).
//
//	queen-proxy           serve, configured from the environment (cmd/queen-proxy/config)
//	queen-proxy keygen    print a new API key and the hash to store with queen_proxy.issue_api_key
//
// Every boot failure exits 1 with one line naming the variable.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/cmd/queen-proxy/config"
	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/console"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/inventory"
	"github.com/queenforgo/queen/proxy/limit"
	"github.com/queenforgo/queen/proxy/listener"
	"github.com/queenforgo/queen/proxy/metrics"
	"github.com/queenforgo/queen/proxy/session"
	"github.com/queenforgo/queen/proxy/throttle"
	"github.com/queenforgo/queen/proxy/usage"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// connectionDrain is how long open requests (long-polls included) get to
// finish after the first signal before their connections are closed.
const connectionDrain = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return subcommand(args, stdout, stderr)
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "queen-proxy: config: "+line)
		}
		return 1
	}
	logger := newLogger(cfg, stderr)

	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "queen-proxy: QUEEN_PROXY_TLS_CERT/QUEEN_PROXY_TLS_KEY: TLS material unusable: "+oneLine(err))
		return 1
	}

	// The first signal drains; stop() below restores the default handling,
	// so a second signal ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	tokens, err := session.New(session.Config{Secret: cfg.JWT.Secret, Ed25519PEM: cfg.JWT.Ed25519PEM,
		Ed25519PubPEM: cfg.JWT.Ed25519PubPEM, Issuer: cfg.Sessions.Issuer, Audience: cfg.Sessions.Audience})
	if err != nil {
		fmt.Fprintln(stderr, "queen-proxy: config: "+oneLine(err))
		return 1
	}

	var (
		pool  *pgxpool.Pool
		cat   *catalog.Catalog
		cons  *console.Console
		meter *usage.Meter
		inv   *inventory.Inventory
	)
	if cfg.PXDB.Enabled() {
		if advice := pxdbAdvisory(cfg.PXDB); advice != "" {
			logger.Warn(advice)
		}
		pool, err = openPXDB(ctx, cfg.PXDB)
		if err != nil {
			fmt.Fprintln(stderr, "queen-proxy: "+oneLine(err))
			return 1
		}
		defer pool.Close()
		cat = catalog.New(catalog.Config{Pool: pool, Timeout: cfg.PXDB.Timeout, StaleGrace: cfg.StaleGrace, Logger: logger,
			SweepInterval: cfg.Sessions.RevocationSweep})
		cat.Start()
		defer cat.Stop()
		cons = console.New(console.Config{Pool: pool, Timeout: cfg.PXDB.Timeout, Logger: logger})
		meter, err = usage.New(usage.Config{Pool: pool, SpoolDir: cfg.Usage.SpoolDir, FlushInterval: cfg.Usage.FlushInterval,
			RollupInterval: cfg.Usage.RollupInterval, KeepDays: cfg.Usage.KeepDays, WarnPercent: cfg.Usage.WarnPercent,
			Timeout: cfg.PXDB.Timeout, DrainTimeout: cfg.ShutdownDrain, Logger: logger})
		if err != nil {
			fmt.Fprintln(stderr, "queen-proxy: config: "+oneLine(err))
			return 1
		}
		// Stopped before the catalog and the pool (defers run last first):
		// the final flush needs the pool, or spools.
		meter.Start()
		defer meter.Stop()
		inv = inventory.New(inventory.Config{Pool: pool, Interval: cfg.Reconcile, StorageInterval: cfg.StorageRefresh, DBTimeout: cfg.PXDB.Timeout,
			UpstreamTimeout: cfg.UpstreamTimeout, ConnectTimeout: cfg.ConnectTimeout, TenantHeader: cfg.TenantHeader,
			Logger: logger})
		inv.Start()
		defer inv.Stop()
	}
	ident := identity.New(identity.Config{
		Tokens: tokens, Catalog: cat, Pool: pool, Throttle: throttle.New(throttle.Config{}),
		Cookie:           session.Cookie{Name: cfg.Sessions.CookieName, Domain: cfg.Sessions.CookieDomain, TTL: cfg.Sessions.TTL},
		Trusted:          cfg.Sessions.TrustedProxies,
		RevocationStrict: cfg.Sessions.RevocationStrict, OperatorEnabled: cfg.Sessions.OperatorEnabled,
		Timeout: cfg.PXDB.Timeout, Logger: logger,
	})
	bootWarnings(cfg, tokens, logger)

	m := metrics.New()
	handler, err := proxy.New(proxy.Config{
		Catalog:         cat,
		DevCell:         devCell(cfg),
		SharedHosts:     cfg.SharedHosts,
		DefaultCluster:  cfg.DefaultCluster,
		DevInsecure:     cfg.DevInsecure,
		UpstreamTimeout: cfg.UpstreamTimeout,
		LongPollMax:     cfg.LongPollMax,
		LongPollMargin:  cfg.LongPollMargin,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		MaxBatchItems:   cfg.MaxBatchItems,
		CellMaxParked:   cfg.CellMaxParked,
		Enforce:         cfg.Enforce,
		TenantHeader:    cfg.TenantHeader,
		Forwarder: forward.New(forward.Config{
			ConnectTimeout: cfg.ConnectTimeout, Logger: logger, ObserveFunc: proxy.ObserveUpstream(m),
		}),
		Limiter:   limit.New(nil),
		Metrics:   m,
		Logger:    logger,
		Identity:  ident,
		Console:   cons,
		Meter:     meter,
		Inventory: inv,
	})
	if err != nil {
		fmt.Fprintln(stderr, "queen-proxy: config: QUEEN_PROXY_DEV_CELL_URL: "+oneLine(err))
		return 1
	}

	srv, err := listener.Listen(cfg.ListenAddr(), handler, tlsConfig, func(line string) { logger.Debug("http server", "msg", line) })
	if err != nil {
		fmt.Fprintln(stderr, "queen-proxy: QUEEN_PROXY_PORT/QUEEN_PROXY_BIND_ADDR: "+oneLine(err))
		return 1
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	logger.Info("queen-proxy listening", "addr", srv.Addr().String(), "tls", srv.TLS(), "mode", cfg.Mode(),
		"enforce", cfg.Enforce, "tenant_header", cfg.TenantHeader, "sessions", string(tokens.Mode()),
		"session_alg", tokens.Algorithm(), "operator_enabled", cfg.Sessions.OperatorEnabled, "version", version)

	select {
	case err := <-serveErr:
		logger.Error("http server stopped", "err", err)
		return 1
	case <-ctx.Done():
	}
	stop()
	logger.Info("shutting down: draining requests (send the signal again to exit at once)")
	dctx, cancel := context.WithTimeout(context.Background(), connectionDrain)
	defer cancel()
	if err := srv.HTTP.Shutdown(dctx); err != nil {
		logger.Warn("requests still open at the drain deadline; closing them", "err", err)
		_ = srv.HTTP.Close()
	}
	logger.Info("shut down")
	return 0
}

func loadTLS(cfg config.Config) (*tls.Config, error) {
	if !cfg.TLS() {
		return nil, nil
	}
	return listener.LoadTLS(cfg.TLSCert, cfg.TLSKey)
}

func devCell(cfg config.Config) *proxy.DevCell {
	if cfg.DevCellURL == "" {
		return nil
	}
	return &proxy.DevCell{BaseURL: cfg.DevCellURL, Token: cfg.DevCellToken, Tenant: cfg.DevTenant}
}

// bootWarnings says, once, what a configuration leaves open.
func bootWarnings(cfg config.Config, tokens *session.Tokens, logger *slog.Logger) {
	switch {
	case cfg.PXDB.Enabled() && tokens.Mode() == session.ModeNone:
		logger.Warn("no session key: nobody can sign in (POST /auth/login answers 503 not_configured); set QUEEN_PROXY_JWT_ED25519_PEM (or QUEEN_PROXY_JWT_SECRET) for logins, the console and the dashboard")
	case tokens.Ignored != "":
		logger.Warn(tokens.Ignored + " is ignored: QUEEN_PROXY_JWT_SECRET signs the sessions (HS256)")
	case tokens.Mode() == session.ModeVerify:
		logger.Info("verify-only host: sessions minted elsewhere are accepted, nobody signs in here")
	}
	if cfg.Sessions.TrustedProxies.Empty() {
		logger.Info("QUEEN_PROXY_TRUSTED_PROXIES unset: X-Forwarded-For and X-Forwarded-Proto are not believed from anyone")
	}
	if cfg.DevInsecure {
		logger.Warn("QUEEN_PROXY_DEV_INSECURE=true: no credential is checked; every request may do everything a key with all scopes may. Never expose this proxy")
	} else if !cfg.PXDB.Enabled() {
		logger.Warn("dev-static without PXDB_HOST: there is no key store, so every request needing a credential is refused; set PXDB_HOST, or QUEEN_PROXY_DEV_INSECURE=true on a private machine")
	}
	if !cfg.TLS() {
		logger.Warn("QUEEN_PROXY_TLS_CERT and QUEEN_PROXY_TLS_KEY unset: the listener is plaintext; terminate TLS in front of it or set both")
	}
	if !cfg.Enforce {
		logger.Info("QUEEN_PROXY_ENFORCE=false: shadow mode; rate, parked-slot, queue, partition and retention denials are logged (would_block), not applied")
	}
	if cfg.DefaultCluster != "" {
		logger.Warn("QUEEN_PROXY_DEFAULT_CLUSTER is set: hosts that name no cluster go to it; a misroute once several clusters exist")
	}
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// oneLine keeps a boot error on the one line the boot promises.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
