// Package hatest holds the high-availability tests of the broker: the real
// binary, several of them, under push and pop+ack load while PostgreSQL
// fails over (sql/pgtest/pgaf, a pg_auto_failover formation) or a broker
// is SIGKILLed behind a load balancer. It has only tests.
//
//	go test -run 'Failover|Brokers' -v ./cmd/queen/hatest
//	QUEEN_HA_SOAK=10m go test -run TestFailoverSoak -v -timeout 60m ./cmd/queen/hatest
package hatest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dbEnv is how a broker reaches its database.
type dbEnv struct {
	hosts, user, db string
	ssl             bool // PG_USE_SSL with PG_SSL_REJECT_UNAUTHORIZED=false: self-signed servers
}

// brokerEnv is the environment of one broker: the caller's, without any
// variable the broker reads, plus db, its own spool and the test's
// settings (short re-polls and connect timeouts so that the phases of a
// test take seconds).
func brokerEnv(t testing.TB, db dbEnv, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "QUEEN_") || strings.HasPrefix(name, "JWT_") ||
			strings.HasPrefix(name, "FILE_BUFFER_") || strings.HasPrefix(name, "DB_") ||
			name == "PORT" || name == "DATABASE_URL" || name == "LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PG_HOST="+db.hosts, "PG_USER="+db.user, "PG_DB="+db.db,
		"PG_USE_SSL="+strconv.FormatBool(db.ssl), "PG_SSL_REJECT_UNAUTHORIZED=false",
		"QUEEN_PG_CONNECT_TIMEOUT_MS=2000", "QUEEN_BIND_ADDR=127.0.0.1",
		"FILE_BUFFER_DIR="+t.TempDir(), "FILE_BUFFER_FLUSH_MS=20", "QUEEN_POP_REPOLL_MS=50",
		"QUEEN_SHUTDOWN_TIMEOUT_MS=10000", "LOG_LEVEL=info")
	return append(env, extra...)
}

// broker is one running bin/queen.
type broker struct {
	name   string
	cmd    *exec.Cmd
	url    string
	exited chan struct{}

	mu  sync.Mutex
	log []string
}

// startBroker runs the binary and waits for its "queen listening" line.
func startBroker(t testing.TB, name, bin string, env []string) *broker {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	cmd := exec.Command(bin)
	cmd.Env = append(env, "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := &broker{name: name, cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			b.mu.Lock()
			b.log = append(b.log, line)
			b.mu.Unlock()
			if !signalled && strings.Contains(line, "queen listening") {
				signalled = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker %s log (last lines):\n%s", b.name, b.logTail(60))
		}
	})
	select {
	case <-ready:
	case <-b.exited:
		t.Fatalf("broker %s exited at boot:\n%s", name, b.logTail(60))
	case <-time.After(90 * time.Second):
		t.Fatalf("broker %s not listening after 90s:\n%s", name, b.logTail(60))
	}
	return b
}

func (b *broker) logTail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := b.log
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logCount counts the log lines holding s.
func (b *broker) logCount(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.log {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// kill sends SIGKILL and waits until the process is gone. Idempotent.
func (b *broker) kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}
