package main

import (
	"bufio"
	"errors"
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

// process is one running queen-proxy binary.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	port   string
	exited chan struct{}
	mu     sync.Mutex
	log    []string
}

// startProcess builds and runs the binary with env on a free port, and
// waits for its listening line.
func startProcess(t *testing.T, env ...string) *process {
	t.Helper()
	bin := cmdtest.Binary(t, "cmd/queen-proxy")

	p := &process{t: t, port: strconv.Itoa(freePort(t)), exited: make(chan struct{})}
	var base []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(name, "QUEEN_") && !strings.HasPrefix(name, "PXDB_") {
			base = append(base, kv)
		}
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(append(base, "QUEEN_PROXY_BIND_ADDR=127.0.0.1", "QUEEN_PROXY_PORT="+p.port), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "queen-proxy listening") {
				signalled = true
				close(ready)
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.logText())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("queen-proxy exited at boot:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("queen-proxy not listening after 30 s:\n%s", p.logText())
	}
	return p
}

func (p *process) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

// stop sends SIGTERM and returns the exit code.
func (p *process) stop() int {
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("queen-proxy did not exit after SIGTERM:\n%s", p.logText())
	}
	var exit *exec.ExitError
	if errors.As(p.cmd.Wait(), &exit) {
		return exit.ExitCode()
	}
	return p.cmd.ProcessState.ExitCode()
}
