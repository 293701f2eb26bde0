// Package pgaf is the test harness for high availability: a pg_auto_failover
// formation on loopback, a monitor and two data nodes in synchronous
// replication, started for one test and torn down when it ends. Only
// _test.go files import it.
//
//	f := pgaf.Start(t, pgaf.Options{})
//	f.URL()                 // postgres://...@127.0.0.1:p1,127.0.0.1:p2/queen?target_session_attrs=read-write
//	f.Failover(t)           // pg_autoctl perform failover
//	f.KillPrimaryPostmaster(t)
//
// It needs pg_autoctl and the pgautofailover extension (Debian's
// postgresql-<major>-auto-failover). When they are missing it runs
// scripts/ensure-pg-auto-failover, which installs them with apt-get, and
// skips the test, saying why, only if that fails. As root, everything runs
// as the postgres OS user, like sql/pgtest's cluster. A formation left
// behind by a test process that died is removed by the next Start.
package pgaf

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
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenforgo/queen/sql/pgtest"
)

// Database is the database the data nodes serve (pg_autoctl --dbname).
const Database = "queen"

const (
	tmpPrefix    = "queen-pgaf-"
	ownerFile    = "owner.pid"
	cmdTimeout   = 3 * time.Minute
	stopTimeout  = 30 * time.Second
	readyTimeout = 2 * time.Minute
)

// Options shape a formation.
type Options struct {
	// SSL serves TLS with self-signed certificates (pg_autoctl
	// --ssl-self-signed: encrypted, not verifiable); off is --no-ssl.
	SSL bool
	// FastFailover shortens the monitor's health checks (1 s period, a
	// node unhealthy after 5 s, 5 s for a lost primary to confirm its
	// demotion) so that a node that dies is replaced within seconds rather
	// than the default minute.
	FastFailover bool
}

// Formation is a running monitor and two data nodes.
type Formation struct {
	opts    Options
	root    string
	env     []string
	cred    *syscall.Credential
	bins    bins
	user    string // the database superuser the tests connect as
	monitor *Node
	nodes   []*Node
}

// Node is one pg_auto_failover node and its `pg_autoctl run` process.
type Node struct {
	Name   string
	PGData string
	Port   int
	log    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

type bins struct {
	autoctl string
	pgctl   string
	bindir  string
}

var (
	installOnce sync.Once
	installed   bins
	installErr  error
)

// Start creates and starts a formation and waits until it has a primary
// and a secondary in synchronous replication. It is destroyed when the
// test ends.
func Start(t testing.TB, opts Options) *Formation {
	t.Helper()
	installOnce.Do(func() { installed, installErr = ensureInstalled() })
	if installErr != nil {
		t.Skipf("pgaf: pg_auto_failover is not installed and could not be installed, so the failover tests cannot run here: %v", installErr)
	}
	cred, err := pgtest.ServerCredential()
	if err != nil {
		t.Fatalf("pgaf: %v", err)
	}
	base := pgtest.ScratchDir(cred != nil)
	sweepStale(base)
	root, err := os.MkdirTemp(base, tmpPrefix)
	if err != nil {
		t.Fatalf("pgaf: %v", err)
	}
	f := &Formation{opts: opts, root: root, cred: cred, bins: installed, user: superuser(cred)}
	t.Cleanup(func() { f.destroy(t) })
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("pgaf: %v", err)
	}
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("pgaf: chown %s to the postgres user: %v", root, err)
		}
	}
	f.env = childEnv(root, installed.bindir)

	ports := freePorts(t, 3)
	f.monitor = &Node{Name: "monitor", PGData: filepath.Join(root, "monitor"), Port: ports[0], log: filepath.Join(root, "monitor.log")}
	f.autoctl(t, append([]string{"create", "monitor", "--pgdata", f.monitor.PGData, "--pgport", strconv.Itoa(f.monitor.Port),
		"--hostname", "127.0.0.1", "--auth", "trust", "--pgctl", f.bins.pgctl}, f.sslFlags()...)...)
	// pg_autoctl writes listen_addresses='*' for a monitor: loopback only.
	f.autoctl(t, "config", "set", "--pgdata", f.monitor.PGData, "postgresql.listen_addresses", "127.0.0.1")
	f.run(t, f.monitor)
	f.waitMonitor(t)
	if opts.FastFailover {
		f.tuneMonitor(t)
	}
	monitorURI := f.monitorURI()
	for i := 1; i <= 2; i++ {
		n := &Node{Name: fmt.Sprintf("node%d", i), PGData: filepath.Join(root, fmt.Sprintf("node%d", i)), Port: ports[i],
			log: filepath.Join(root, fmt.Sprintf("node%d.log", i))}
		f.autoctl(t, append([]string{"create", "postgres", "--pgdata", n.PGData, "--pgport", strconv.Itoa(n.Port),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", n.Name, "--auth", "trust",
			"--dbname", Database, "--username", f.user, "--monitor", monitorURI, "--pgctl", f.bins.pgctl}, f.sslFlags()...)...)
		f.run(t, n)
		f.nodes = append(f.nodes, n)
	}
	f.WaitHealthy(t)
	return f
}

// Hosts is the data nodes as a PG_HOST list.
func (f *Formation) Hosts() string {
	addrs := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// User is the database role the tests connect as (trust on loopback).
func (f *Formation) User() string { return f.user }

// SSL reports whether the nodes serve TLS.
func (f *Formation) SSL() bool { return f.opts.SSL }

// URL is the multi-host URL of the formation's database: every data node,
// target_session_attrs=read-write, so it always reaches the primary.
func (f *Formation) URL() string {
	mode := "disable"
	if f.opts.SSL {
		mode = "require"
	}
	u := url.URL{Scheme: "postgres", User: url.User(f.user), Host: f.Hosts(), Path: "/" + Database,
		RawQuery: "sslmode=" + mode + "&target_session_attrs=read-write"}
	return u.String()
}

// NodeURL is one data node's URL, whatever its role.
func (f *Formation) NodeURL(n *Node) string {
	mode := "disable"
	if f.opts.SSL {
		mode = "require"
	}
	u := url.URL{Scheme: "postgres", User: url.User(f.user), Host: n.Addr(), Path: "/" + Database, RawQuery: "sslmode=" + mode}
	return u.String()
}

// Nodes returns the data nodes.
func (f *Formation) Nodes() []*Node { return f.nodes }

func (f *Formation) sslFlags() []string {
	if f.opts.SSL {
		return []string{"--ssl-self-signed"}
	}
	return []string{"--no-ssl"}
}

func (f *Formation) monitorURI() string {
	u := url.URL{Scheme: "postgres", User: url.User("autoctl_node"), Host: f.monitor.Addr(), Path: "/pg_auto_failover",
		RawQuery: "sslmode=prefer"}
	if f.opts.SSL {
		u.RawQuery = "sslmode=require"
	}
	return u.String()
}

// autoctl runs one pg_autoctl command to completion.
func (f *Formation) autoctl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bins.autoctl, args...)
	cmd.Dir = f.root
	cmd.Env = f.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pgaf: pg_autoctl %s: %v\n%s", strings.Join(args, " "), err, tailBytes(out, 30))
	}
	return string(out)
}

// run starts `pg_autoctl run` for a node in the background.
func (f *Formation) run(t testing.TB, n *Node) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return
	}
	logFile, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("pgaf: %v", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(f.bins.autoctl, "run", "--pgdata", n.PGData)
	cmd.Dir = f.root
	cmd.Env = f.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group holds the keeper's services and the
	// postmaster, so one signal to the group ends the node; the kernel
	// kills the keeper if the test process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgaf: start pg_autoctl run for %s: %v", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
}

// stop ends a node's keeper and its postgres: SIGTERM (pg_autoctl stops
// postgres fast), or sig straight away; SIGKILL to the group if it lingers.
func (n *Node) stop(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	pid := n.cmd.Process.Pid
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(pid, sig)
	}
	var err error
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("%s did not stop within %s; killed", n.Name, stopTimeout)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-n.exited
	}
	// The postmaster shares the group; a SIGKILLed keeper leaves it behind.
	killPostmaster(n.PGData)
	n.cmd = nil
	return err
}

func (f *Formation) destroy(t testing.TB) {
	var errs []error
	for _, n := range append(append([]*Node{}, f.nodes...), f.monitor) {
		if n != nil {
			errs = append(errs, n.stop(syscall.SIGTERM))
		}
	}
	if t.Failed() {
		for _, n := range append(append([]*Node{}, f.nodes...), f.monitor) {
			if n != nil {
				t.Logf("pgaf: %s log (last lines):\n%s", n.Name, tailFile(n.log, 40))
			}
		}
	}
	errs = append(errs, os.RemoveAll(f.root))
	if err := errors.Join(errs...); err != nil {
		t.Errorf("pgaf: tear down: %v", err)
	}
}

// ensureInstalled finds pg_autoctl and the PostgreSQL installation that has
// the pgautofailover extension, running scripts/ensure-pg-auto-failover
// when either is missing.
func ensureInstalled() (bins, error) {
	b, err := findBins()
	if err == nil {
		return b, nil
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "ensure-pg-auto-failover")
	out, runErr := exec.Command(script).CombinedOutput()
	if b, err = findBins(); err == nil {
		return b, nil
	}
	return bins{}, fmt.Errorf("%w; %s: %v %s", err, script, runErr, bytes.TrimSpace(out))
}

func findBins() (bins, error) {
	autoctl, err := exec.LookPath("pg_autoctl")
	if err != nil {
		return bins{}, errors.New("pg_autoctl not found on PATH")
	}
	controls, _ := filepath.Glob("/usr/share/postgresql/*/extension/pgautofailover.control")
	sort.Slice(controls, func(i, j int) bool { return controls[i] > controls[j] })
	for _, c := range controls {
		major := filepath.Base(filepath.Dir(filepath.Dir(c)))
		bindir := filepath.Join("/usr/lib/postgresql", major, "bin")
		if _, err := os.Stat(filepath.Join(bindir, "pg_ctl")); err == nil {
			return bins{autoctl: autoctl, pgctl: filepath.Join(bindir, "pg_ctl"), bindir: bindir}, nil
		}
	}
	return bins{}, errors.New("no PostgreSQL installation has the pgautofailover extension")
}

// superuser is the role initdb creates: the OS user it runs as.
func superuser(cred *syscall.Credential) string {
	if cred != nil {
		return "postgres"
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// childEnv keeps pg_autoctl's configuration and state inside the
// formation's directory (it follows the XDG variables) and away from the
// caller's libpq variables.
func childEnv(root, bindir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "XDG_") || name == "HOME" || name == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+root, "XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_DATA_HOME="+filepath.Join(root, "share"), "XDG_RUNTIME_DIR="+filepath.Join(root, "run"),
		"PATH="+bindir+":/usr/local/bin:/usr/bin:/bin")
}

// sweepStale removes formations of test processes that died without their
// cleanup: their keepers died with them, their postmasters may not have.
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tmpPrefix+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pgtest.Alive(owner) {
			continue
		}
		for _, pgdata := range []string{"monitor", "node1", "node2"} {
			killPostmaster(filepath.Join(dir, pgdata))
		}
		_ = os.RemoveAll(dir)
	}
}

// killPostmaster SIGKILLs the process group of the postmaster serving
// pgdata, if one runs: the postmaster and whatever keeper services remain.
func killPostmaster(pgdata string) {
	pid := postmasterPID(pgdata)
	if pid <= 0 || !pgtest.Alive(pid) {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(stopTimeout); pgtest.Alive(pid) && time.Now().Before(deadline); {
		<-time.After(20 * time.Millisecond)
	}
}

// postmasterPID reads the first line of postmaster.pid, or 0.
func postmasterPID(pgdata string) int {
	raw, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pgaf: find a free port: %v", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func tailFile(path string, lines int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	return tailBytes(raw, lines)
}

func tailBytes(raw []byte, lines int) string {
	all := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
