package pgaf

import (
	"context"
	"fmt"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// NodeState is one data node as the monitor sees it.
type NodeState struct {
	Name     string
	Port     int
	Reported string // the state the node's keeper reported
	Assigned string // the state the monitor assigned
}

// State asks the monitor for the data nodes' states.
func (f *Formation) State(ctx context.Context) ([]NodeState, error) {
	conn, err := f.connect(ctx, f.monitor, "pg_auto_failover")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx,
		`SELECT nodename, nodeport, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeState, error) {
		var s NodeState
		err := r.Scan(&s.Name, &s.Port, &s.Reported, &s.Assigned)
		return s, err
	})
}

// Primary is the node that serves writes, as the monitor assigned and saw
// it, or nil: primary, or wait_primary (a primary whose standby is not
// there, so it commits without synchronous replication).
func (f *Formation) Primary(ctx context.Context) (*Node, error) {
	states, err := f.State(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range states {
		if (s.Reported == "primary" || s.Reported == "wait_primary") && s.Assigned == s.Reported {
			return f.node(s.Name), nil
		}
	}
	return nil, nil
}

// Secondary is the other data node.
func (f *Formation) Secondary(primary *Node) *Node {
	for _, n := range f.nodes {
		if n != primary {
			return n
		}
	}
	return nil
}

func (f *Formation) node(name string) *Node {
	for _, n := range f.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitHealthy waits until one node is primary, the other secondary, both
// as assigned, and the primary replicates synchronously to the secondary:
// a commit it acknowledges is on both.
func (f *Formation) WaitHealthy(t testing.TB) {
	t.Helper()
	var last string
	deadline := time.Now().Add(readyTimeout)
	for {
		ok, why := f.healthy()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("pgaf: formation not healthy after %s: %s", readyTimeout, last)
		}
		<-time.After(100 * time.Millisecond)
	}
}

func (f *Formation) healthy() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states, err := f.State(ctx)
	if err != nil {
		return false, err.Error()
	}
	var primary *Node
	roles := map[string]int{}
	for _, s := range states {
		if s.Reported != s.Assigned {
			return false, fmt.Sprintf("%s is %s, assigned %s", s.Name, s.Reported, s.Assigned)
		}
		roles[s.Reported]++
		if s.Reported == "primary" {
			primary = f.node(s.Name)
		}
	}
	if roles["primary"] != 1 || roles["secondary"] != 1 {
		return false, fmt.Sprintf("states %v", states)
	}
	conn, err := f.connect(ctx, primary, Database)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var sync int
	var names string
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')),
		current_setting('synchronous_standby_names') FROM pg_stat_replication`).Scan(&sync, &names)
	if err != nil {
		return false, err.Error()
	}
	if sync != 1 || names == "" {
		return false, fmt.Sprintf("primary %s: %d synchronous standbys, synchronous_standby_names %q", primary.Name, sync, names)
	}
	return true, ""
}

// Failover has the monitor hand the primary role to the secondary
// (pg_autoctl perform failover, which waits until it is done) and returns
// the new primary.
func (f *Formation) Failover(t testing.TB) *Node {
	t.Helper()
	before := f.mustPrimary(t)
	f.autoctl(t, "perform", "failover", "--pgdata", f.monitor.PGData, "--wait", "120")
	after := f.mustPrimary(t)
	if after == before {
		t.Fatalf("pgaf: perform failover left %s primary", before.Name)
	}
	return after
}

// KillPrimaryPostmaster SIGKILLs the primary's postmaster and returns that
// node. Its keeper notices and starts postgres again (crash recovery); no
// failover happens unless the node stays down past the monitor's timeout.
func (f *Formation) KillPrimaryPostmaster(t testing.TB) *Node {
	t.Helper()
	p := f.mustPrimary(t)
	pid := postmasterPID(p.PGData)
	if pid <= 0 {
		t.Fatalf("pgaf: no postmaster.pid in %s", p.PGData)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("pgaf: kill postmaster %d of %s: %v", pid, p.Name, err)
	}
	return p
}

// KillNode SIGKILLs a node's keeper and postgres together, as when its
// machine dies; the monitor then promotes the other node (quickly with
// Options.FastFailover). RestartNode brings it back as a secondary.
func (f *Formation) KillNode(t testing.TB, n *Node) {
	t.Helper()
	if err := n.stop(syscall.SIGKILL); err != nil {
		t.Fatalf("pgaf: %v", err)
	}
}

// RestartNode starts a killed node's keeper again.
func (f *Formation) RestartNode(t testing.TB, n *Node) {
	t.Helper()
	f.run(t, n)
}

func (f *Formation) mustPrimary(t testing.TB) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := f.Primary(ctx)
	if err != nil || p == nil {
		t.Fatalf("pgaf: no primary: %v", err)
	}
	return p
}

// connect opens a connection to one node as the superuser.
func (f *Formation) connect(ctx context.Context, n *Node, db string) (*pgx.Conn, error) {
	mode := "disable"
	if f.opts.SSL {
		mode = "require"
	}
	u := url.URL{Scheme: "postgres", User: url.User(f.user), Host: n.Addr(), Path: "/" + db,
		RawQuery: "sslmode=" + mode + "&connect_timeout=5"}
	return pgx.Connect(ctx, u.String())
}

// waitMonitor waits until the monitor accepts connections.
func (f *Formation) waitMonitor(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := f.connect(ctx, f.monitor, "pg_auto_failover")
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("pgaf: monitor not ready after %s: %v\n%s", readyTimeout, err, tailFile(f.monitor.log, 30))
		}
		<-time.After(100 * time.Millisecond)
	}
}

// tuneMonitor shortens the health checks (Options.FastFailover).
func (f *Formation) tuneMonitor(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := f.connect(ctx, f.monitor, "pg_auto_failover")
	if err != nil {
		t.Fatalf("pgaf: %v", err)
	}
	defer conn.Close(ctx)
	// Not shorter: on a loaded machine a one-second check times out now
	// and then, the monitor then marks a healthy standby unhealthy, and
	// the primary drops synchronous replication (wait_primary) until the
	// standby is back.
	settings := []string{
		"pgautofailover.health_check_period = 1000",
		"pgautofailover.health_check_timeout = 2000",
		"pgautofailover.health_check_max_retries = 2",
		"pgautofailover.health_check_retry_delay = 1000",
		"pgautofailover.node_considered_unhealthy_timeout = 5000",
		"pgautofailover.startup_grace_period = 5000",
		// How long the monitor waits for a lost primary to confirm its
		// demotion before promoting the standby: 30 s by default.
		"pgautofailover.primary_demote_timeout = 5000",
	}
	for _, s := range settings {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+s); err != nil {
			t.Fatalf("pgaf: %s: %v", s, err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("pgaf: reload monitor: %v", err)
	}
}

// AsyncWindows counts the times the monitor assigned wait_primary to a
// node: a primary committing without a synchronous standby (its standby
// lost, or marked unhealthy), whose commits a failover in that window may
// not keep.
func (f *Formation) AsyncWindows(ctx context.Context) (int, error) {
	conn, err := f.connect(ctx, f.monitor, "pg_auto_failover")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pgautofailover.event WHERE goalstate = 'wait_primary'`).Scan(&n)
	return n, err
}
