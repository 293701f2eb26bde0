package spool

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config, the reference broker's values.
const (
	EventsPerFileDefault = 10000                  // FILE_BUFFER_EVENTS_PER_FILE
	FlushIntervalDefault = 100 * time.Millisecond // FILE_BUFFER_FLUSH_MS
	MaxBatchDefault      = 100                    // FILE_BUFFER_MAX_BATCH
)

// FailedDir is the subdirectory holding quarantined files; the drain never
// reads it.
const FailedDir = "failed"

var (
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("spool: closed")
	// ErrRetry, wrapped in a ReplayFunc's error, means the database cannot
	// take records now: the drain keeps the file and tries again later.
	ErrRetry = errors.New("spool: retry later")
)

// Config is the input of Open.
type Config struct {
	// Dir is FILE_BUFFER_DIR. It is created if missing; failed/ inside it
	// holds quarantined files.
	Dir string
	// EventsPerFile rotates the active file after this many records.
	EventsPerFile int
	// FlushInterval is the drain's cycle: how soon a spooled record is
	// replayed once the database is back.
	FlushInterval time.Duration
	// MaxBatch is how many records one replay transaction carries.
	MaxBatch int
	Logger   *slog.Logger

	// noSync skips fsync; only the benchmark sets it, to measure its cost.
	noSync bool
	// openFile replaces os.OpenFile for the active file (tests inject
	// write failures: a full disk cannot be arranged on demand).
	openFile func(name string, flag int, perm fs.FileMode) (file, error)
}

// file is what the writer needs of an *os.File.
type file interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Close() error
	Name() string
	Fd() uintptr
	Sync() error
}

// ConfigDefault fills the zero fields of a Config.
func ConfigDefault(c Config) Config {
	if c.EventsPerFile <= 0 {
		c.EventsPerFile = EventsPerFileDefault
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = FlushIntervalDefault
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = MaxBatchDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.openFile == nil {
		c.openFile = func(name string, flag int, perm fs.FileMode) (file, error) {
			return os.OpenFile(name, flag, perm)
		}
	}
	return c
}

// Spool is the disk spool of one broker. Append is safe for concurrent use;
// one goroutine writes, so that concurrent appends share one fsync.
//
// Lock order: scanMu, then mu. The writer goroutine owns the active file.
type Spool struct {
	cfg Config
	log *slog.Logger

	reqs    chan *appendReq
	closeMu sync.RWMutex // held for reading while sending on reqs
	closed  bool
	wdone   chan struct{}

	scanMu sync.Mutex // serialises the directory scan (ready)
	ready  atomic.Bool
	unlock func() // releases the directory lock

	mu       sync.Mutex
	files    map[string]*fileCounts // by file id (name without extension)
	byKey    map[string]int64       // pending records per partition
	pending  int64                  // records waiting; mirrored in npending for Empty
	lastName string                 // the greatest file id seen, to keep names ordered
	progress map[string]int         // records of a .buf file already replayed
	changed  chan struct{}          // closed (and replaced) whenever pending records drop

	// writer state (writer goroutine only, after ready)
	active      file
	activeID    string
	activeSize  int64
	activeCount atomic.Int64
	buf         []byte

	npending     atomic.Int64
	flushes      atomic.Int64 // successful write+fsync rounds, for the benchmark
	writeFailing atomic.Bool
	dbHealthy    atomic.Bool
	paused       atomic.Bool

	drain drainState
}

type fileCounts struct {
	total int64
	keys  map[string]int64
}

type appendReq struct {
	frames []byte
	keys   []string
	rotate bool
	done   chan error
}

// Open prepares the spool in cfg.Dir: takes the directory's lock, finishes
// files a crash left open (a torn tail is cut off) and counts what waits to
// be replayed. It does not fail: a directory that cannot be used is logged
// once, appends answer an error, and every later append or drain cycle tries
// again.
func Open(cfg Config) *Spool {
	cfg = ConfigDefault(cfg)
	s := &Spool{
		cfg:      cfg,
		log:      cfg.Logger.With("spool_dir", cfg.Dir),
		reqs:     make(chan *appendReq, 256),
		wdone:    make(chan struct{}),
		files:    make(map[string]*fileCounts),
		byKey:    make(map[string]int64),
		progress: make(map[string]int),
		changed:  make(chan struct{}),
	}
	s.drain.kick = make(chan struct{}, 1)
	s.drain.stuck = make(map[string]bool)
	s.dbHealthy.Store(true)
	if err := s.ensureReady(); err != nil {
		s.noteWriteErr(err)
	}
	go s.writer()
	return s
}

// Dir is the spool directory.
func (s *Spool) Dir() string { return s.cfg.Dir }

// Append stores records durably: it returns nil only after the records are
// written and fsynced, together with whatever other appends arrived at the
// same time (group fsync). On error nothing of this call will be replayed.
func (s *Spool) Append(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	req := &appendReq{keys: make([]string, len(recs)), done: make(chan error, 1)}
	for i := range recs {
		req.frames = appendFrame(req.frames, &recs[i])
		req.keys[i] = recs[i].key()
	}
	if err := s.send(ctx, req); err != nil {
		return err
	}
	// Once queued the write happens whatever the caller does: wait for the
	// truth.
	return <-req.done
}

func (s *Spool) send(ctx context.Context, req *appendReq) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.reqs <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// HasPending reports whether any of the partitions (see Key) has records
// waiting in the spool, the active file's included. A push to such a
// partition must not overtake them: it waits for their replay (WaitClear)
// or is spooled behind them.
func (s *Spool) HasPending(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasPendingLocked(keys)
}

func (s *Spool) hasPendingLocked(keys []string) bool {
	if s.pending == 0 {
		return false
	}
	for _, k := range keys {
		if s.byKey[k] > 0 {
			return true
		}
	}
	return false
}

// WaitClear waits until none of the partitions (see Key) has records in
// the spool, kicking the drain, and reports whether that happened before
// ctx ended. The push path uses it while the database is up: a push that
// waits for older spooled records of its partition to be replayed, instead
// of being spooled behind them, lets the spool empty under a steady load.
func (s *Spool) WaitClear(ctx context.Context, keys ...string) bool {
	for {
		s.mu.Lock()
		pending := s.hasPendingLocked(keys)
		ch := s.changed
		s.mu.Unlock()
		if !pending {
			return true
		}
		s.Kick()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// DBHealthy is the spool's view of the database: false since a push or a
// replay found it unreachable, true again after one succeeded.
func (s *Spool) DBHealthy() bool { return s.dbHealthy.Load() }

// Empty reports, without locking, that nothing waits in the spool: the
// push path's fast check.
func (s *Spool) Empty() bool { return s.npending.Load() == 0 }

// addPending changes the pending count and wakes WaitClear when it drops.
// Caller holds mu.
func (s *Spool) addPending(n int64) {
	s.pending += n
	s.npending.Store(s.pending)
	if n < 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Pending is the number of records waiting to be replayed.
func (s *Spool) Pending() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// Stats is the spool's state for the status routes.
type Stats struct {
	Pending     int64
	Files       int   // files holding pending records, the active one included
	FailedFiles int   // quarantined files in failed/
	FailedBytes int64 // their size
	DBHealthy   bool  // the drain's view: false after the database refused a replay
	Writable    bool  // false while appends fail (full disk, unwritable directory)
	Paused      bool  // push maintenance holds the drain
}

// Stats reads the counts and lists failed/.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	st := Stats{Pending: s.pending, Files: len(s.files)}
	s.mu.Unlock()
	st.DBHealthy = s.dbHealthy.Load()
	st.Writable = !s.writeFailing.Load()
	st.Paused = s.paused.Load()
	entries, _ := os.ReadDir(filepath.Join(s.cfg.Dir, FailedDir))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			st.FailedFiles++
			st.FailedBytes += info.Size()
		}
	}
	return st
}

// SetDBHealthy records what the push path learnt about the database, so
// the drain and the status routes agree with it.
func (s *Spool) SetDBHealthy(ok bool) {
	if s.dbHealthy.Load() != ok {
		s.dbHealthy.Store(ok)
	}
}

// Close stops the drain, writes and fsyncs what is queued, finalises the
// active file and releases the directory. Appends after Close answer
// ErrClosed. Idempotent.
func (s *Spool) Close() error {
	s.StopDrain()
	s.closeMu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.closeMu.Unlock()
	<-s.wdone
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
	if n := s.Pending(); n > 0 {
		s.log.Info("spool closed with records not yet replayed; the next start replays them", "pending", n)
	}
	return nil
}
