package proxy_test

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
)

// startProxyProcess runs bin/queen-proxy on pxdb p and returns its base URL.
func startProxyProcess(t testing.TB, p *pxdb, extraEnv ...string) string {
	t.Helper()
	bin := cmdtest.Binary(t, "cmd/queen-proxy")
	cc := p.pool.Config().ConnConfig
	port := freePort(t)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "QUEEN_") || name == "LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PXDB_HOST="+cc.Host, "PXDB_PORT="+strconv.Itoa(int(cc.Port)), "PXDB_USER="+cc.User,
		"PXDB_DB="+cc.Database, "QUEEN_PROXY_BIND_ADDR=127.0.0.1", "QUEEN_PROXY_PORT="+strconv.Itoa(port), "LOG_LEVEL=info",
		"QUEEN_PROXY_SPOOL_DIR="+t.TempDir())
	cmd := exec.Command(bin)
	cmd.Env = append(env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var mu sync.Mutex
	var log []string
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log = append(log, sc.Text())
			mu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("proxy log:\n%s", strings.Join(log, "\n"))
			mu.Unlock()
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(log, "\n"), "pxdb invalidation listener up")
	}, 30*time.Second, 10*time.Millisecond, "the proxy is not listening on pxdb")
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 10*time.Millisecond)
	return base
}

// A key revoked through SQL is refused within a second by every proxy
// process, not only the one that revoked nothing: the NOTIFY reaches each
// process's listener and drops its cached key.
func TestRevocationReachesEveryProcess(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	key := p.key(cluster, "read")
	keyID := p.id(`SELECT id FROM queen_proxy.api_keys WHERE cluster_id = $1`, cluster)
	first := startProxyProcess(t, p)
	second := startProxyProcess(t, p)
	host := "acme.proxy.test"

	for _, base := range []string{first, second} {
		for range 3 { // the later calls are served from the cache
			require.Equal(t, http.StatusOK, call(t, base, host, "GET", "/api/v1/resources/queues", key, nil).status)
		}
	}
	p.exec(`SELECT queen_proxy.revoke_api_key($1)`, keyID)
	for _, base := range []string{second, first} {
		require.Eventually(t, func() bool {
			return call(t, base, host, "GET", "/api/v1/resources/queues", key, nil).status == http.StatusUnauthorized
		}, time.Second, 5*time.Millisecond, "a revoked key must be refused within a second")
	}
	refused(t, call(t, second, host, "GET", "/api/v1/resources/queues", key, nil), http.StatusUnauthorized, "unauthorized")
}

// A session signed out on one proxy process is refused by another within a
// second: revoke_session announces session:<jti>, and every process's
// listener marks it revoked, whatever it had cached.
func TestSessionRevocationReachesEveryProcess(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	key := "QUEEN_PROXY_JWT_ED25519_PEM=" + edKey(t)
	first := startProxyProcess(t, p, key)
	second := startProxyProcess(t, p, key)
	cookie := login(t, first, tn.Host, "admin@acme.test", "pw-acme")

	for _, base := range []string{first, second} {
		for range 3 { // the later calls are served from the caches
			require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)).status)
			require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/auth/me", nil, withCookie(cookie)).status)
		}
	}
	require.Equal(t, http.StatusOK, send(t, first, tn.Host, "POST", "/auth/logout", nil, withCookie(cookie)).status)
	require.Eventually(t, func() bool {
		return send(t, second, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)).status == http.StatusUnauthorized
	}, time.Second, 5*time.Millisecond, "a revoked session must be refused by another process within a second")
	refused(t, send(t, second, tn.Host, "GET", "/auth/me", nil, withCookie(cookie)), http.StatusUnauthorized, "unauthorized")
	refused(t, send(t, first, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)), http.StatusUnauthorized, "unauthorized")
}
