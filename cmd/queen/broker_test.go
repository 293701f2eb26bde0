package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

// The tests of this file run the real binary: built with go build into a
// temporary directory, started against a pgtest database, stopped with
// signals, SIGKILL included.

func TestMain(m *testing.M) { pgtest.Main(m) }

// broker is one running bin/queen.
type broker struct {
	t      testing.TB
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	mu     sync.Mutex
	log    []string
}

// brokerEnv is the environment of a broker on database dbURL with its spool
// in spoolDir.
func brokerEnv(t testing.TB, dbURL, spoolDir string, extra ...string) []string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "JWT_") || strings.HasPrefix(name, "QUEEN_") ||
			strings.HasPrefix(name, "FILE_BUFFER_") || name == "PORT" || name == "DB_POOL_SIZE" || name == "LOG_LEVEL" || name == "DATABASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env,
		"PG_HOST="+u.Hostname(), "PG_PORT="+u.Port(), "PG_USER="+u.User.Username(),
		"PG_DB="+strings.TrimPrefix(u.Path, "/"), "QUEEN_BIND_ADDR=127.0.0.1",
		"FILE_BUFFER_DIR="+spoolDir, "FILE_BUFFER_FLUSH_MS=20", "QUEEN_POP_REPOLL_MS=50",
		"QUEEN_SHUTDOWN_TIMEOUT_MS=10000", "LOG_LEVEL=info",
	), extra...)
}

// startBroker runs the binary and waits for its "queen listening" line.
func startBroker(t testing.TB, bin string, env []string) *broker {
	t.Helper()
	return startBrokerAt(t, bin, "127.0.0.1", freePort(t), env)
}

// startBrokerAt runs the binary listening on host:port (host is the
// environment's QUEEN_BIND_ADDR, a loopback address).
func startBrokerAt(t testing.TB, bin, host string, port int, env []string) *broker {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(env, "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := &broker{t: t, cmd: cmd, url: "http://" + net.JoinHostPort(host, strconv.Itoa(port)), exited: make(chan struct{})}
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
			t.Logf("broker log:\n%s", b.logText())
		}
	})
	select {
	case <-ready:
	case <-b.exited:
		t.Fatalf("broker exited at boot:\n%s", b.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("broker not listening after 60s:\n%s", b.logText())
	}
	return b
}

func (b *broker) logText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.log, "\n")
}

// logCount counts log lines containing s.
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

// kill sends SIGKILL and waits for the process to be gone. Idempotent.
func (b *broker) kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// signal sends sig and returns without waiting.
func (b *broker) signal(sig syscall.Signal) {
	require.NoError(b.t, b.cmd.Process.Signal(sig))
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// client is a plain HTTP client of a broker, with a short timeout so a
// test never hangs on a dead process.
var client = &http.Client{Timeout: 15 * time.Second}

// call sends a JSON request and returns the status and body; a transport
// error (broker gone) is status 0.
func call(ctx context.Context, method, url string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		// The answer was cut short (the broker was killed while writing
		// it): the request failed as far as the caller can tell.
		return 0, []byte(err.Error())
	}
	return resp.StatusCode, out
}

func (b *broker) mustCall(method, path string, body any, want int) []byte {
	b.t.Helper()
	status, raw := call(context.Background(), method, b.url+path, body)
	require.Equal(b.t, want, status, "%s %s: %s", method, path, raw)
	return raw
}

func (b *broker) setMaintenance(on bool) {
	b.t.Helper()
	b.mustCall("POST", "/api/v1/system/maintenance", map[string]any{"enabled": on}, http.StatusOK)
}

func (b *broker) pending() int64 {
	b.t.Helper()
	var st struct {
		Pending int64 `json:"pending"`
	}
	require.NoError(b.t, json.Unmarshal(b.mustCall("GET", "/api/v1/status/buffers", nil, http.StatusOK), &st))
	return st.Pending
}

// ledger records what producers were told, per transactionId.
type ledger struct {
	mu      sync.Mutex
	acked   map[string]string   // txID -> queued | buffered | duplicate
	order   map[string][]string // partition -> acked txIDs in push order
	tried   map[string]bool     // every txID ever sent
	byState map[string]int
}

func newLedger() *ledger {
	return &ledger{acked: map[string]string{}, order: map[string][]string{}, tried: map[string]bool{}, byState: map[string]int{}}
}

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId"`
	Payload       any    `json:"payload"`
}

type pushResult struct {
	Status        string `json:"status"`
	TransactionID string `json:"transactionId"`
}

// push sends items and records the answer; it reports whether the broker
// answered 201.
func (l *ledger) push(ctx context.Context, url string, items []pushItem) (bool, error) {
	l.mu.Lock()
	for _, it := range items {
		l.tried[it.TransactionID] = true
	}
	l.mu.Unlock()
	status, raw := call(ctx, "POST", url+"/api/v1/push", map[string]any{"items": items})
	if status != http.StatusCreated {
		return false, nil
	}
	var res []pushResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return false, fmt.Errorf("push answer %s: %w", raw, err)
	}
	if len(res) != len(items) {
		return false, fmt.Errorf("push answered %d results for %d items", len(res), len(items))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res {
		switch r.Status {
		case "queued", "buffered", "duplicate":
		default:
			return false, fmt.Errorf("push item %d answered %q", i, r.Status)
		}
		it := items[i]
		l.acked[it.TransactionID] = r.Status
		l.byState[r.Status]++
		l.order[it.Partition] = append(l.order[it.Partition], it.TransactionID)
	}
	return true, nil
}

func (l *ledger) count(status string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byState[status]
}

// consumeAll pops the queue with autoAck until it is empty and returns the
// deliveries per partition, in delivery order.
func consumeAll(t testing.TB, url, queue string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for {
		status, raw := call(context.Background(), "GET", url+"/api/v1/pop/queue/"+queue+"?batch=1000&partitions=64&autoAck=true", nil)
		if status == http.StatusNoContent {
			return got
		}
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var p struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				Partition     string `json:"partition"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(raw, &p))
		require.NotEmpty(t, p.Messages)
		for _, m := range p.Messages {
			got[m.Partition] = append(got[m.Partition], m.TransactionID)
		}
	}
}

// verify asserts zero loss and zero duplicates of acknowledged pushes:
// every acknowledged transactionId is delivered exactly once, nothing is
// delivered twice, nothing unknown is delivered, and in each partition the
// acknowledged pushes come in the order they were acknowledged.
func (l *ledger) verify(t testing.TB, delivered map[string][]string) (acked, deliveredN int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]int{}
	for p, ids := range delivered {
		pos := 0
		for _, id := range ids {
			seen[id]++
			require.True(t, l.tried[id], "delivered %q was never pushed", id)
			deliveredN++
			if _, ok := l.acked[id]; ok {
				// Acknowledged ones appear in acknowledgement order.
				for pos < len(l.order[p]) && l.order[p][pos] != id {
					pos++
				}
				require.Less(t, pos, len(l.order[p]), "partition %s: %q delivered out of order", p, id)
			}
		}
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "%q delivered %d times", id, n)
	}
	for id, st := range l.acked {
		require.Equal(t, 1, seen[id], "%q was answered %s but delivered %d times", id, st, seen[id])
	}
	return len(l.acked), deliveredN
}
