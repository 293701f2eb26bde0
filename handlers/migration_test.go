package handlers

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/migration"
	"github.com/queenforgo/queen/sql/pgtest"
)

func endpointOf(t *testing.T, cfg *pgconn.Config) migration.Endpoint {
	t.Helper()
	return migration.Endpoint{Host: cfg.Host, Port: int(cfg.Port), Database: cfg.Database, User: cfg.User, Password: cfg.Password}
}

func targetBody(e migration.Endpoint) map[string]any {
	return map[string]any{"host": e.Host, "port": e.Port, "database": e.Database, "user": e.User, "password": e.Password}
}

func TestMigrationCopiesTheSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	runner := migration.New(migration.Config{Source: endpointOf(t, &pool.Config().ConnConfig.Config)})
	if runner.Available() != nil {
		t.Fatalf("pg_dump/pg_restore are part of this machine's PostgreSQL install: %v", runner.Available())
	}
	t.Cleanup(runner.Stop)
	b := setupAdmin(t, adminOpts{pool: pool, migration: runner})
	b.pushN("mig", "", "m", 5)
	p := b.pop("/api/v1/pop/queue/mig?batch=2")
	require.True(t, b.ack(p.Messages[0].TransactionID, p.PartitionID, "dlq", "", p.LeaseID).Success)

	tcfg, err := pgconn.ParseConfig(pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	target := endpointOf(t, tcfg)

	var st struct {
		Status, CurrentStep string
		ElapsedSeconds      float64
		Error               string
	}
	b.doJSON("GET", "/api/v1/migration/status", nil, http.StatusOK, &st)
	require.Equal(t, "idle", st.Status)

	var conn struct {
		Success bool
		Message string
		Version string
	}
	b.doJSON("POST", "/api/v1/migration/test-connection", targetBody(target), http.StatusOK, &conn)
	require.True(t, conn.Success, conn.Message)
	require.Contains(t, conn.Version, "PostgreSQL")
	bad := targetBody(target)
	bad["port"] = "1"
	b.doJSON("POST", "/api/v1/migration/test-connection", bad, http.StatusOK, &conn)
	require.False(t, conn.Success)

	start := targetBody(target)
	start["port"] = itoa(target.Port) // the dashboard sends a string
	start["excludeTableData"] = []string{"message_traces", "not_a_table"}
	b.doJSON("POST", "/api/v1/migration/start", start, http.StatusAccepted, nil)
	ctx, cancel := contextWithTimeout(t, time.Minute)
	defer cancel()
	require.NoError(t, runner.Wait(ctx))
	b.doJSON("GET", "/api/v1/migration/status", nil, http.StatusOK, &st)
	require.Equal(t, "complete", st.Status, "%+v", st)
	require.Equal(t, "Migration complete", st.CurrentStep)

	var v struct {
		Success, AllMatch bool
		Tables            []struct {
			Table                    string
			SourceCount, TargetCount int
			Match                    bool
		}
	}
	b.doJSON("POST", "/api/v1/migration/validate", targetBody(target), http.StatusOK, &v)
	require.True(t, v.Success)
	require.True(t, v.AllMatch, "%+v", v.Tables)
	counts := map[string]int{}
	for _, tc := range v.Tables {
		counts[tc.Table] = tc.TargetCount
	}
	require.Equal(t, 5, counts["messages"])
	require.Equal(t, 1, counts["dead_letter_queue"])

	// The broker's own database is never a target.
	self := targetBody(endpointOf(t, &pool.Config().ConnConfig.Config))
	status, raw := b.do("POST", "/api/v1/migration/start", self)
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	for _, body := range []any{map[string]any{}, map[string]any{"host": "h", "database": "d", "user": "u", "port": "x"}} {
		status, _ := b.do("POST", "/api/v1/migration/start", body)
		require.Equal(t, http.StatusBadRequest, status)
	}

	b.doJSON("POST", "/api/v1/migration/reset", nil, http.StatusOK, nil)
	b.doJSON("GET", "/api/v1/migration/status", nil, http.StatusOK, &st)
	require.Equal(t, "idle", st.Status)
}

func TestMigrationWithoutTools(t *testing.T) {
	t.Parallel()
	runner := migration.New(migration.Config{PGDump: "/nonexistent/pg_dump", PGRestore: "/nonexistent/pg_restore"})
	b := setupAdmin(t, adminOpts{migration: runner})
	status, raw := b.do("POST", "/api/v1/migration/start", map[string]any{"host": "db.example", "database": "q", "user": "u"})
	require.Equal(t, http.StatusNotImplemented, status)
	require.Contains(t, string(raw), "pg_dump and pg_restore")
	// Without a runner at all, the same.
	b2 := setupAdmin(t)
	status, _ = b2.do("POST", "/api/v1/migration/start", map[string]any{"host": "db.example", "database": "q", "user": "u"})
	require.Equal(t, http.StatusNotImplemented, status)
}

func itoa(n int) string { return strconv.Itoa(n) }

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}
