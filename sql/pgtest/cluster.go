package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is the throwaway PostgreSQL the harness starts.
type cluster struct {
	root     string // temp dir holding everything below
	dataDir  string
	sockDir  string
	logPath  string
	postgres string
	cred     *syscall.Credential // run as the postgres OS user when we are root
	port     int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

func newCluster() (c *cluster, err error) {
	initdb, err := findBin("initdb")
	if err != nil {
		return nil, err
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(postgres); err != nil {
		if postgres, err = findBin("postgres"); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base := baseDir(cred != nil)
	sweepStale(base)
	root, err := os.MkdirTemp(base, tmpPrefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	c = &cluster{
		root:     root,
		dataDir:  filepath.Join(root, "data"),
		sockDir:  filepath.Join(root, "run"),
		logPath:  filepath.Join(root, "postgres.log"),
		postgres: postgres,
		cred:     cred,
	}
	defer func() {
		if err != nil {
			_ = c.destroy()
		}
	}()
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("write owner file: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if cred != nil {
		for _, dir := range []string{root, c.sockDir} {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("chown %s to the postgres user: %w", dir, err)
			}
		}
	}

	cmd := exec.Command(initdb, "-D", c.dataDir, "-A", "trust", "-U", superuser,
		"--no-sync", "-E", "UTF8", "--locale=C")
	cmd.Dir = root
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s failed: %w\n%s", initdb, err, out)
	}

	// A free port can be taken between probing and binding: retry a few times.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		err = c.start()
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "could not bind") {
			return c, err
		}
	}
}

func (c *cluster) url(db string) *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
}

// start runs postgres and waits until it accepts connections. It does
// nothing if the server is already running.
func (c *cluster) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(c.postgres,
		"-D", c.dataDir,
		"-p", strconv.Itoa(c.port),
		"-h", "127.0.0.1",
		"-k", c.sockDir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
	)
	cmd.Dir = c.root
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.cred,
		// Its own process group keeps a terminal's ^C away from it, and the
		// kernel kills it if the test process dies without calling Main's
		// cleanup (a panic or a timeout).
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.postgres, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited

	if err := c.waitReady(exited); err != nil {
		c.killLocked()
		return fmt.Errorf("%w\nserver log (%s):\n%s", err, c.logPath, tail(c.logPath, 20))
	}
	return nil
}

func (c *cluster) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	adminURL := c.url("postgres").String()
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, adminURL)
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		lastErr = err
		select {
		case <-exited:
			return fmt.Errorf("postgres exited during startup (last connect error: %v)", lastErr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections on port %d after %s: %w", c.port, readyTimeout, lastErr)
		}
	}
}

// stop signals postgres (SIGINT: fast shutdown, SIGQUIT: immediate) and
// waits for it to exit, killing its process group if it takes too long.
func (c *cluster) stop(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres: %w", err)
	}
	select {
	case <-c.exited:
		c.cmd = nil
		return nil
	case <-time.After(stopTimeout):
	}
	c.killLocked()
	return fmt.Errorf("postgres did not stop within %s; killed", stopTimeout)
}

func (c *cluster) killLocked() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
	c.cmd = nil
}

// destroy stops the server the quick way and removes every file.
func (c *cluster) destroy() error {
	stopErr := c.stop(syscall.SIGQUIT)
	if err := os.RemoveAll(c.root); err != nil {
		return errors.Join(stopErr, fmt.Errorf("remove cluster dir: %w", err))
	}
	return stopErr
}

// findBin looks name up on PATH, then in the newest /usr/lib/postgresql/*/bin.
func findBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name))
	best, bestVersion := "", -1.0
	for _, m := range matches {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(m))), 64)
		if err == nil && v > bestVersion {
			best, bestVersion = m, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin; install PostgreSQL or set %s", name, EnvDatabaseURL)
	}
	return best, nil
}

// credential returns the postgres OS user to run the server as when we are
// root (initdb and postgres refuse to run as root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres OS user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// baseDir is os.TempDir, unless the server runs as another user that cannot
// reach it (TMPDIR under /root, say); then /tmp.
func baseDir(otherUser bool) string {
	dir := os.TempDir()
	if !otherUser {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// sweepStale removes cluster dirs left behind by test processes that died
// without running Main's cleanup (the kernel already killed their servers).
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tmpPrefix+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || alive(owner) {
			continue
		}
		if pm, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pm), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && alive(pid) {
				continue
			}
		}
		_ = os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// childEnv is our environment without the libpq variables that could point
// initdb or postgres somewhere else.
func childEnv() []string {
	out := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, lines int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	all := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
