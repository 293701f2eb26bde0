package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ReplayFunc stores records in one database transaction, through the same
// path as a push, with their original transaction ids: a record that was
// already stored comes back as a duplicate and writes nothing, which is what
// makes replay idempotent. It returns nil when every record is stored or a
// duplicate; an error wrapping ErrRetry when the database cannot take them
// now; any other error when the records themselves are refused.
type ReplayFunc func(ctx context.Context, recs []Record) error

// maxBackoff caps the wait between drain cycles while the database refuses.
const maxBackoff = 2 * time.Second

// maxBatchBytes caps the payload bytes of one replay transaction.
const maxBatchBytes = 4 << 20

type drainState struct {
	lifeMu sync.Mutex // StartDrain / StopDrain
	cancel context.CancelFunc
	done   chan struct{}

	kick chan struct{}

	stuckMu sync.Mutex
	stuck   map[string]bool // files that could not be removed or quarantined
}

// StartDrain starts the background replay: files oldest first, records in
// file order, every FlushInterval (backing off while the database is down).
// Idempotent; StopDrain stops it.
func (s *Spool) StartDrain(replay ReplayFunc) {
	s.drain.lifeMu.Lock()
	defer s.drain.lifeMu.Unlock()
	if s.drain.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.drain.cancel, s.drain.done = cancel, done
	go func() {
		defer close(done)
		s.drainLoop(ctx, replay)
	}()
}

// StopDrain stops the replay between two transactions and waits for it.
// Idempotent.
func (s *Spool) StopDrain() {
	s.drain.lifeMu.Lock()
	defer s.drain.lifeMu.Unlock()
	if s.drain.done == nil {
		return
	}
	s.drain.cancel()
	<-s.drain.done
	s.drain.cancel, s.drain.done = nil, nil
}

// Pause holds the drain (push maintenance): nothing reaches the database
// until Resume. A replay transaction already running finishes.
func (s *Spool) Pause() { s.paused.Store(true) }

// Resume lets the drain run again at once; the active file is finalised as
// soon as the older files are replayed.
func (s *Spool) Resume() {
	s.paused.Store(false)
	s.Kick()
}

// Paused reports whether the drain is held.
func (s *Spool) Paused() bool { return s.paused.Load() }

// Kick starts a drain cycle now instead of at the next tick.
func (s *Spool) Kick() {
	select {
	case s.drain.kick <- struct{}{}:
	default:
	}
}

func (s *Spool) drainLoop(ctx context.Context, replay ReplayFunc) {
	delay := s.cfg.FlushInterval
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.drain.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		err := s.drainCycle(ctx, replay)
		switch {
		case err == nil:
			delay = s.cfg.FlushInterval
		case errors.Is(err, ErrRetry):
			delay = min(2*delay, maxBackoff)
		default:
			s.log.Warn("spool drain cycle failed", "err", err)
			delay = maxBackoff
		}
		timer.Reset(delay)
	}
}

// drainCycle replays up to 10 files (1 while the database is unhealthy,
// to probe it), oldest first. When no finalised file is left it finalises
// the active one, so a quiet spool empties too.
func (s *Spool) drainCycle(ctx context.Context, replay ReplayFunc) error {
	if s.paused.Load() {
		return nil
	}
	if err := s.ensureReady(); err != nil {
		s.noteWriteErr(err)
		return nil
	}
	files := s.listBuf()
	if len(files) == 0 {
		if s.activeCount.Load() == 0 {
			return nil
		}
		if err := s.rotate(ctx); err != nil {
			return nil // closing
		}
		files = s.listBuf()
	}
	limit := 10
	if !s.dbHealthy.Load() {
		limit = 1
	}
	for i, id := range files {
		if i >= limit || s.paused.Load() || ctx.Err() != nil {
			return nil
		}
		if err := s.drainFile(ctx, id, replay); err != nil {
			return err
		}
	}
	return nil
}

// listBuf lists the finalised files, oldest first.
func (s *Spool) listBuf() []string {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil
	}
	var ids []string
	s.drain.stuckMu.Lock()
	defer s.drain.stuckMu.Unlock()
	for _, e := range entries {
		if name := e.Name(); e.Type().IsRegular() && strings.HasSuffix(name, ".buf") {
			if id := strings.TrimSuffix(name, ".buf"); !s.drain.stuck[id] {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// drainFile replays one file in batches of MaxBatch records, resuming after
// the records this process already replayed from it. A file fully replayed
// is deleted; a damaged one is quarantined after its good records.
func (s *Spool) drainFile(ctx context.Context, id string, replay ReplayFunc) error {
	path := filepath.Join(s.cfg.Dir, id+".buf")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		s.forget(id)
		return nil
	}
	if err != nil {
		s.quarantine(id, err)
		return nil
	}
	defer f.Close()
	s.mu.Lock()
	if s.files[id] == nil {
		// Finalised by this process after a scan that did not count it:
		// cannot happen, but never replay uncounted records blind.
		s.files[id] = &fileCounts{keys: make(map[string]int64)}
	}
	skip := s.progress[id]
	s.mu.Unlock()

	r := NewReader(f)
	var batch []Record
	batchBytes, index := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.replayBatch(ctx, id, batch, replay)
		batch, batchBytes = batch[:0], 0
		return err
	}
	for {
		rec, rerr := r.Next()
		if rerr != nil {
			if err := flush(); err != nil {
				return err
			}
			f.Close()
			if rerr == io.EOF {
				s.remove(id)
			} else {
				s.quarantine(id, rerr)
			}
			return nil
		}
		index++
		if index <= skip {
			continue
		}
		batch = append(batch, rec)
		batchBytes += len(rec.Payload)
		if len(batch) >= s.cfg.MaxBatch || batchBytes >= maxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
			if s.paused.Load() || ctx.Err() != nil {
				return nil
			}
		}
	}
}

// replayBatch replays records in one transaction. When the database refuses
// the records themselves, they are replayed one by one so that only the bad
// ones are set aside (in failed/), in order.
func (s *Spool) replayBatch(ctx context.Context, id string, batch []Record, replay ReplayFunc) error {
	err := replay(ctx, batch)
	if err == nil {
		s.replayed(id, batch)
		return nil
	}
	if retryable(ctx, err) {
		s.dbHealthy.Store(false)
		return fmt.Errorf("%w: %w", ErrRetry, err)
	}
	for i := range batch {
		one := batch[i : i+1]
		err := replay(ctx, one)
		if err != nil && retryable(ctx, err) {
			s.dbHealthy.Store(false)
			return fmt.Errorf("%w: %w", ErrRetry, err)
		}
		if err != nil {
			if rerr := s.reject(id, &batch[i], err); rerr != nil {
				return fmt.Errorf("%w: set a refused record aside: %w", ErrRetry, rerr)
			}
		}
		s.replayed(id, one)
	}
	return nil
}

func retryable(ctx context.Context, err error) bool {
	return errors.Is(err, ErrRetry) || ctx.Err() != nil ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// replayed counts records of file id as done.
func (s *Spool) replayed(id string, recs []Record) {
	s.dbHealthy.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress[id] += len(recs)
	fc := s.files[id]
	var done int64
	for i := range recs {
		k := recs[i].key()
		if fc != nil && fc.keys[k] > 0 {
			fc.keys[k]--
			fc.total--
			s.dropKey(k, 1)
			done++
		}
	}
	s.addPending(-done)
}

// dropKey subtracts n pending records of partition k; the caller adjusts
// the total (addPending). Caller holds mu.
func (s *Spool) dropKey(k string, n int64) {
	if s.byKey[k] -= n; s.byKey[k] <= 0 {
		delete(s.byKey, k)
	}
}

// forget drops whatever file id still counts.
func (s *Spool) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fc := s.files[id]; fc != nil {
		var dropped int64
		for k, n := range fc.keys {
			if n > 0 {
				s.dropKey(k, n)
				dropped += n
			}
		}
		s.addPending(-dropped)
	}
	delete(s.files, id)
	delete(s.progress, id)
}

func (s *Spool) remove(id string) {
	if err := os.Remove(filepath.Join(s.cfg.Dir, id+".buf")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("remove replayed spool file", "file", id+".buf", "err", err)
		s.markStuck(id)
	}
	s.forget(id)
}

// quarantine moves a damaged file to failed/ after its good records were
// replayed. What follows the damage is kept there for an operator.
func (s *Spool) quarantine(id string, cause error) {
	s.log.Error("spool file damaged: good records replayed, file moved to failed/",
		"file", id+".buf", "err", cause)
	err := os.Rename(filepath.Join(s.cfg.Dir, id+".buf"), filepath.Join(s.cfg.Dir, FailedDir, id+".buf"))
	if err != nil {
		s.log.Error("quarantine spool file", "file", id+".buf", "err", err)
		s.markStuck(id)
	} else {
		_ = syncDir(s.cfg.Dir)
	}
	s.forget(id)
}

func (s *Spool) markStuck(id string) {
	s.drain.stuckMu.Lock()
	s.drain.stuck[id] = true
	s.drain.stuckMu.Unlock()
}

// reject sets a record the database refused aside, in
// failed/<file>.rejected (same format), durably, before it counts as done.
func (s *Spool) reject(id string, rec *Record, cause error) error {
	s.log.Warn("spooled record refused by the database; kept in failed/",
		"file", id+".buf", "queue", rec.Queue, "partition", rec.Partition,
		"transaction_id", rec.TransactionID, "err", cause)
	path := filepath.Join(s.cfg.Dir, FailedDir, id+".rejected")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var out []byte
	if info.Size() == 0 {
		out = append(out, fileHeader[:]...)
	}
	out = appendFrame(out, rec)
	if _, err := f.Write(out); err != nil {
		return err
	}
	return f.Sync()
}
