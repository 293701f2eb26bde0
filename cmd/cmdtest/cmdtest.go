// Package cmdtest builds this module's commands for the tests that run the
// real binaries (cmd/queen, cmd/queen-proxy) and talk to them as a user's
// program does.
//
// Each command is built once per test process, into a folder of that
// process. pgtest.Main ends a test process with os.Exit, which runs no
// cleanup, so a later process removes the folders of processes that are
// gone instead.
package cmdtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// module is the import path the commands are built from.
const module = "github.com/queenforgo/queen/"

const (
	dirPrefix = "queen-cmdtest-"
	ownerFile = "owner.pid"
)

type built struct {
	bin string
	err error
}

var (
	mu     sync.Mutex
	dir    string
	builds = map[string]built{}
)

// Binary returns the path of the command pkg ("cmd/queen") built for this
// test process; the first call builds it, later ones wait for and share
// that build (a failed build fails every caller).
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	b, ok := builds[pkg]
	if !ok {
		b.bin, b.err = build(pkg)
		builds[pkg] = b
	}
	if b.err != nil {
		t.Fatalf("cmdtest: %v", b.err)
	}
	return b.bin
}

func build(pkg string) (string, error) {
	if dir == "" {
		d, err := processDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	// go test puts its own GOROOT/bin first on the test's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command must be on PATH to build the binaries under test: %w", err)
	}
	bin := filepath.Join(dir, path.Base(pkg))
	out, err := exec.Command(gobin, "build", "-o", bin, module+pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// processDir creates this process's build folder after removing those of
// processes that have exited.
func processDir() (string, error) {
	sweepStale()
	d, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", err
	}
	return d, nil
}

func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
