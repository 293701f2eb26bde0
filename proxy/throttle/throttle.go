// Package throttle slows password guessing at /auth/login, per client
// address and per account, in this process (PROXY.md §7.4: counters are per
// process).
//
// Per address: at most PerAddress attempts in any Window, successes
// included. Per account: after FreeFailures wrong passwords in a row, each
// further attempt must wait a backoff that doubles with every failure (from
// BackoffBase up to BackoffMax); a success clears it, and so do ResetAfter
// without a failure. An account is any submitted email, known or not, so
// the answers tell nothing about which exist.
package throttle

import (
	"sync"
	"time"
)

// Defaults.
const (
	PerAddressDefault   = 10
	WindowDefault       = 60 * time.Second
	FreeFailuresDefault = 5
	BackoffBaseDefault  = time.Second
	BackoffMaxDefault   = 15 * time.Minute
	ResetAfterDefault   = time.Hour
	MaxTrackedDefault   = 100_000
)

// Config tunes a Throttle; zero fields take the defaults.
type Config struct {
	PerAddress   int
	Window       time.Duration
	FreeFailures int
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	ResetAfter   time.Duration
	MaxTracked   int // addresses and accounts each: reaching it drops the stale entries
	NowFunc      func() time.Time
}

// Throttle is safe for concurrent use.
type Throttle struct {
	cfg      Config
	mu       sync.Mutex
	addrs    map[string][]time.Time // attempts within the window, oldest first
	accounts map[string]*account
}

type account struct {
	failures int
	last     time.Time
}

// New returns a Throttle.
func New(cfg Config) *Throttle {
	if cfg.PerAddress <= 0 {
		cfg.PerAddress = PerAddressDefault
	}
	if cfg.Window <= 0 {
		cfg.Window = WindowDefault
	}
	if cfg.FreeFailures <= 0 {
		cfg.FreeFailures = FreeFailuresDefault
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = BackoffBaseDefault
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = BackoffMaxDefault
	}
	if cfg.ResetAfter <= 0 {
		cfg.ResetAfter = ResetAfterDefault
	}
	// Failures are not forgotten while they still hold a backoff.
	cfg.ResetAfter = max(cfg.ResetAfter, cfg.BackoffMax)
	if cfg.MaxTracked <= 0 {
		cfg.MaxTracked = MaxTrackedDefault
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Throttle{cfg: cfg, addrs: map[string][]time.Time{}, accounts: map[string]*account{}}
}

// Attempt records a login attempt from addr for account, unless one of the
// two is throttled; then retry says how long until it is not, and nothing
// is recorded.
func (t *Throttle) Attempt(addr, acct string) (retry time.Duration, ok bool) {
	now := t.cfg.NowFunc()
	t.mu.Lock()
	defer t.mu.Unlock()
	recent := t.window(addr, now)
	if len(recent) >= t.cfg.PerAddress {
		return recent[0].Add(t.cfg.Window).Sub(now), false
	}
	if a := t.account(acct, now); a != nil && a.failures >= t.cfg.FreeFailures {
		if until := a.last.Add(t.backoff(a.failures)); now.Before(until) {
			return until.Sub(now), false
		}
	}
	if len(t.addrs) >= t.cfg.MaxTracked {
		t.sweep(now)
	}
	t.addrs[addr] = append(recent, now)
	return 0, true
}

// Failed records a wrong password for account.
func (t *Throttle) Failed(acct string) {
	now := t.cfg.NowFunc()
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.account(acct, now)
	if a == nil {
		if len(t.accounts) >= t.cfg.MaxTracked {
			t.sweep(now)
		}
		a = &account{}
		t.accounts[acct] = a
	}
	a.failures++
	a.last = now
}

// Succeeded clears account's failures.
func (t *Throttle) Succeeded(acct string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.accounts, acct)
}

// backoff is the wait after failures wrong passwords in a row.
func (t *Throttle) backoff(failures int) time.Duration {
	d := t.cfg.BackoffBase
	for i := t.cfg.FreeFailures; i < failures && d < t.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, t.cfg.BackoffMax)
}

// window returns addr's attempts within the window, dropping older ones.
func (t *Throttle) window(addr string, now time.Time) []time.Time {
	recent := t.addrs[addr]
	i := 0
	for i < len(recent) && now.Sub(recent[i]) >= t.cfg.Window {
		i++
	}
	recent = recent[i:]
	if len(recent) == 0 {
		delete(t.addrs, addr)
		return nil
	}
	t.addrs[addr] = recent
	return recent
}

// account returns acct's failures, forgetting them after ResetAfter.
func (t *Throttle) account(acct string, now time.Time) *account {
	a := t.accounts[acct]
	if a != nil && now.Sub(a.last) >= t.cfg.ResetAfter {
		delete(t.accounts, acct)
		return nil
	}
	return a
}

// sweep drops what no longer limits anything. Callers hold mu.
func (t *Throttle) sweep(now time.Time) {
	for addr := range t.addrs {
		t.window(addr, now)
	}
	for acct := range t.accounts {
		t.account(acct, now)
	}
}
