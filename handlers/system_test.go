package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/spool"
)

// setupSpool is a broker with a disk spool in dir (a fresh one when "").
func setupSpool(t *testing.T, dir string, more ...func(*testConfig)) (*testBundle, *spool.Spool) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	sp := spool.Open(spool.Config{Dir: dir, FlushInterval: 10 * time.Millisecond})
	t.Cleanup(func() { require.NoError(t, sp.Close()) }) // after the server's cleanups
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) {
		c.Spool = sp
		for _, f := range more {
			f(c)
		}
	}})
	return b, sp
}

// sibling is a second broker on b's database, configured by cfg (its
// Pool is b's), served over HTTP like b.
func (b *testBundle) sibling(cfg testConfig) *testBundle {
	b.t.Helper()
	cfg.Pool = b.pool
	if cfg.RepollInterval == 0 {
		cfg.RepollInterval = 50 * time.Millisecond
	}
	srv := newServer(b.t, cfg)
	h, err := srv.Handler()
	require.NoError(b.t, err)
	hs := httptest.NewServer(h)
	b.t.Cleanup(hs.Close)
	b.t.Cleanup(srv.Drain)
	out := *b
	out.srv, out.url = srv, hs.URL
	return &out
}

// pushMaintenance and popMaintenance are the switches as s's broker
// applies them.
func pushMaintenance(s *Server) bool { push, _ := s.b.Maintenance(); return push }
func popMaintenance(s *Server) bool  { _, pop := s.b.Maintenance(); return pop }

func (b *testBundle) setSwitch(path string, on bool) map[string]any {
	b.t.Helper()
	var out map[string]any
	b.doJSON("POST", path, map[string]any{"enabled": on}, http.StatusOK, &out)
	return out
}

func (b *testBundle) storedCount(queue string) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
		 JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, queue).Scan(&n))
	return n
}

// waitDrained waits until the spool has replayed everything.
func waitDrained(t *testing.T, sp *spool.Spool) {
	t.Helper()
	require.Eventually(t, func() bool { sp.Kick(); return sp.Pending() == 0 }, 20*time.Second, 5*time.Millisecond,
		"spool still holds %d records", sp.Pending())
}

// MNT-1 / SP-1: with push maintenance on, pushes are spooled and answered
// `buffered`, nothing reaches the message tables; turned off, the spool is
// replayed in order, exactly once.
func TestPushMaintenanceSpoolsThenDrains(t *testing.T) {
	t.Parallel()
	b, sp := setupSpool(t, "")
	out := b.setSwitch("/api/v1/system/maintenance", true)
	require.Equal(t, "Maintenance mode ENABLED. All PUSHes routing to file buffer.", out["message"])
	require.Equal(t, true, out["maintenanceMode"])

	res := b.push(item("mnt", "p1", "a", 1), item("mnt", "p2", "b", 2), item("mnt", "p1", "c", 3), item("mnt", "p1", "a", 4))
	for _, r := range res {
		require.Equal(t, "buffered", r.Status)
		require.Empty(t, r.MessageID)
	}
	require.Equal(t, "c", res[2].TransactionID)
	require.Zero(t, b.storedCount("mnt"), "nothing reaches the log during push maintenance")
	tmp, _ := filepath.Glob(filepath.Join(sp.Dir(), "queen-*.tmp"))
	require.Len(t, tmp, 1)

	var st map[string]any
	b.doJSON("GET", "/api/v1/system/maintenance", nil, http.StatusOK, &st)
	require.Equal(t, true, st["maintenanceMode"])
	require.EqualValues(t, 4, st["bufferedMessages"])
	var bufs map[string]any
	b.doJSON("GET", "/api/v1/status/buffers", nil, http.StatusOK, &bufs)
	require.EqualValues(t, 4, bufs["pending"])
	require.Equal(t, true, bufs["drainPaused"])

	out = b.setSwitch("/api/v1/system/maintenance", false)
	require.Equal(t, "Maintenance mode DISABLED. Background processor will drain buffer to DB.", out["message"])
	waitDrained(t, sp)
	require.Equal(t, 3, b.storedCount("mnt"), "the repeated transactionId is a duplicate")
	p := b.pop("/api/v1/pop/queue/mnt/partition/p1?batch=10")
	require.NotNil(t, p)
	require.Equal(t, []string{"a", "c"}, []string{p.Messages[0].TransactionID, p.Messages[1].TransactionID})
	require.JSONEq(t, "1", string(p.Messages[0].Data))
	p = b.pop("/api/v1/pop/queue/mnt/partition/p2?batch=10")
	require.Len(t, p.Messages, 1)
}

// MNT-2: pop maintenance answers 204 at once without reading; off, the
// message is there.
func TestPopMaintenance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("popm", "", "m1", 1))
	out := b.setSwitch("/api/v1/system/maintenance/pop", true)
	require.Equal(t, "Pop maintenance mode ENABLED. All POP operations will return empty arrays.", out["message"])
	require.Nil(t, b.pop("/api/v1/pop/queue/popm?wait=true&timeout=20000"))
	require.Nil(t, b.pop("/api/v1/pop/queue/popm/partition/Default"))
	var st map[string]any
	b.doJSON("GET", "/api/v1/system/maintenance/pop", nil, http.StatusOK, &st)
	require.Equal(t, true, st["popMaintenanceMode"])
	require.Equal(t, "Pop maintenance mode is ON. All POP operations return empty arrays.", st["message"])

	b.setSwitch("/api/v1/system/maintenance/pop", false)
	p := b.pop("/api/v1/pop/queue/popm")
	require.NotNil(t, p)
	require.Equal(t, "m1", p.Messages[0].TransactionID)
}

func TestMaintenanceSwitchNeedsABoolean(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop"} {
		for _, body := range []string{`{}`, `{"enabled":"true"}`, `{"enabled":1}`, `{"enabled":null}`} {
			status, raw := b.do("POST", path, body)
			require.Equal(t, http.StatusBadRequest, status, "%s %s", path, body)
			require.JSONEq(t, `{"error":"enabled (boolean) is required"}`, string(raw))
		}
		status, _ := b.do("POST", path, `{"enabled":`)
		require.Equal(t, http.StatusBadRequest, status)
	}
}

// MNT-1/3: the switch is persisted; a broker started later is seeded with
// it, a running one adopts it at its reconcile, GET adopts it at once.
func TestMaintenancePersistedAndReconciled(t *testing.T) {
	t.Parallel()
	a := setup(t)
	running := newServer(t, testConfig{Pool: a.pool, MaintenanceRefresh: 20 * time.Millisecond})
	a.setSwitch("/api/v1/system/maintenance", true)
	a.setSwitch("/api/v1/system/maintenance/pop", true)

	var raw json.RawMessage
	require.NoError(t, a.pool.QueryRow(context.Background(),
		`SELECT value FROM queen.system_state WHERE key = 'maintenance_mode'`).Scan(&raw))
	require.JSONEq(t, `{"enabled":true}`, string(raw))

	later := newServer(t, testConfig{Pool: a.pool})
	require.True(t, pushMaintenance(later), "seeded at boot")
	require.True(t, popMaintenance(later))
	require.Eventually(t, func() bool { return pushMaintenance(running) && popMaintenance(running) },
		10*time.Second, 5*time.Millisecond, "adopted by the reconcile")

	// A flip that never reached the database is undone by the next read.
	a.srv.b.ApplyMaintenance(false, popMaintenance(a.srv)) // in memory only, as from an announcement
	var st map[string]any
	a.doJSON("GET", "/api/v1/system/maintenance", nil, http.StatusOK, &st)
	require.Equal(t, true, st["maintenanceMode"])
	require.True(t, pushMaintenance(a.srv))

	a.setSwitch("/api/v1/system/maintenance", false)
	a.setSwitch("/api/v1/system/maintenance/pop", false)
	require.Eventually(t, func() bool { return !pushMaintenance(running) && !popMaintenance(running) },
		10*time.Second, 5*time.Millisecond)
}

// Push maintenance without a spool cannot buffer: 503 (retry), not a
// silent drop, and the broker keeps serving.
func TestPushMaintenanceWithoutSpoolAnswers503(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setSwitch("/api/v1/system/maintenance", true)
	status, raw := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("nospool", "", "x", 1)}})
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
	require.Contains(t, string(raw), "no spool is configured")
	var bufs map[string]any
	b.doJSON("GET", "/api/v1/status/buffers", nil, http.StatusOK, &bufs)
	require.Contains(t, bufs["note"], "FILE_BUFFER_DIR")
	b.setSwitch("/api/v1/system/maintenance", false)
	require.Equal(t, "queued", b.push(item("nospool", "", "x", 1))[0].Status)
}

// A spool directory that cannot be written: the push that needs it answers
// 503 (not `buffered`), the broker keeps serving everything else, and the
// status routes say the spool cannot write.
func TestUnwritableSpoolAnswers503(t *testing.T) {
	t.Parallel()
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o640))
	logs := &logBuffer{}
	sp := spool.Open(spool.Config{Dir: filepath.Join(blocker, "spool"), Logger: logs.logger()})
	t.Cleanup(func() { require.NoError(t, sp.Close()) })
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.Spool = sp; c.Logger = logs.logger() }})
	b.push(item("unw", "", "before", 1))
	b.setSwitch("/api/v1/system/maintenance", true)
	for range 3 {
		status, raw := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("unw", "", "x", 1)}})
		require.Equal(t, http.StatusServiceUnavailable, status, "%s", raw)
		require.Contains(t, string(raw), "the spool cannot write")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "spool cannot write"), "the log says why once:\n%s", logs.String())
	var st map[string]any
	b.doJSON("GET", "/api/v1/system/maintenance", nil, http.StatusOK, &st)
	require.Equal(t, false, st["bufferStats"].(map[string]any)["writable"])
	require.Equal(t, "before", b.pop("/api/v1/pop/queue/unw").Messages[0].TransactionID)
	b.setSwitch("/api/v1/system/maintenance", false)
	require.Equal(t, "queued", b.push(item("unw", "", "x", 1))[0].Status)
}

// A push to a partition whose older pushes still wait in the spool, and
// are not replayed within spoolWaitMax (here the drain is held), queues
// behind them even with the database up; other partitions go straight in.
// (TestFaultPostgresStoppedDuringPushLoad covers the other outcome: the
// wait ends with the replay and the push commits directly.)
func TestSpoolKeepsPartitionOrder(t *testing.T) {
	t.Parallel()
	b, sp := setupSpool(t, "")
	b.setSwitch("/api/v1/system/maintenance", true)
	require.Equal(t, "buffered", b.push(item("ord", "p", "1", 1))[0].Status)
	sp.StopDrain() // hold the replay to look at the moment in between
	b.setSwitch("/api/v1/system/maintenance", false)
	require.Equal(t, "buffered", b.push(item("ord", "p", "2", 2))[0].Status)
	require.Equal(t, "queued", b.push(item("ord", "other", "x", 0))[0].Status)
	sp.StartDrain(b.srv.b.ReplaySpooled)
	waitDrained(t, sp)
	require.Equal(t, "queued", b.push(item("ord", "p", "3", 3))[0].Status, "the spool is empty again")
	p := b.pop("/api/v1/pop/queue/ord/partition/p?batch=10")
	require.Len(t, p.Messages, 3)
	for i, m := range p.Messages {
		require.Equal(t, []string{"1", "2", "3"}[i], m.TransactionID)
	}
}
