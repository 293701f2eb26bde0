// Package brokertest runs the real broker binary (cmd/queen) for the tests of
// the SDKs and the examples: they talk to it over HTTP exactly as a user's
// program does, so they depend on the binary's interface (environment
// variables, the port, the "queen listening" log line) and on nothing inside
// handlers/.
//
// The binary is built once per test process (cmd/cmdtest). The database
// comes from the caller (a sql/pgtest URL), since only _test.go files import
// the harness:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		b := brokertest.Start(t, pgtest.NewDB(t))
//		// b.URL is http://127.0.0.1:<port>
//	}
package brokertest

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenforgo/queen/cmd/cmdtest"
)

// bootTimeout bounds the wait for the "queen listening" line.
const bootTimeout = 60 * time.Second

// stopTimeout bounds a graceful stop before SIGKILL.
const stopTimeout = 15 * time.Second

// Binary returns the path of cmd/queen built for this test process.
func Binary(t testing.TB) string { return cmdtest.Binary(t, "cmd/queen") }

// Broker is one running cmd/queen.
type Broker struct {
	URL string // http://127.0.0.1:<port>, no trailing slash

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    []string
}

// Start runs the broker on the database at dbURL and waits until it listens.
// extraEnv entries (NAME=value) are added last, so they win. The broker is
// stopped (SIGTERM, then SIGKILL) when the test ends, and its log is printed
// if the test failed.
func Start(t testing.TB, dbURL string, extraEnv ...string) *Broker {
	t.Helper()
	bin := Binary(t)
	env, err := Env(dbURL)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(append(env, "PORT="+strconv.Itoa(port)), extraEnv...)
	// The broker must not outlive a test process that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("brokertest: start %s: %v", bin, err)
	}
	b := &Broker{URL: fmt.Sprintf("http://127.0.0.1:%d", port), t: t, cmd: cmd, exited: make(chan struct{})}
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
		b.Stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", b.Log())
		}
	})
	select {
	case <-ready:
	case <-b.exited:
		t.Fatalf("brokertest: broker exited at boot:\n%s", b.Log())
	case <-time.After(bootTimeout):
		t.Fatalf("brokertest: broker not listening after %s:\n%s", bootTimeout, b.Log())
	}
	return b
}

// Env is the environment of a broker on dbURL: the test process's own
// environment without any broker setting it may carry, plus the database,
// a loopback bind address and a fast long-poll fallback.
func Env(dbURL string) ([]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "JWT_") || strings.HasPrefix(name, "QUEEN_") ||
			strings.HasPrefix(name, "FILE_BUFFER_") || name == "PORT" || name == "DB_POOL_SIZE" || name == "LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	pw, _ := u.User.Password()
	env = append(env,
		"PG_HOST="+u.Hostname(), "PG_PORT="+u.Port(), "PG_USER="+u.User.Username(), "PG_PASSWORD="+pw,
		"PG_DB="+strings.TrimPrefix(u.Path, "/"), "QUEEN_BIND_ADDR=127.0.0.1",
		"QUEEN_POP_REPOLL_MS=100", "QUEEN_SHUTDOWN_TIMEOUT_MS=5000", "LOG_LEVEL=info",
	)
	return env, nil
}

// Stop ends the broker gracefully (SIGTERM), or with SIGKILL after
// stopTimeout. Idempotent.
func (b *Broker) Stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(stopTimeout):
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		<-b.exited
	}
}

// Log is what the broker wrote to stderr so far.
func (b *Broker) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.log, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
