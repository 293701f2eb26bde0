package spool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// writer is the one goroutine that writes files: it takes every request
// queued, writes them with one write and one fsync, and answers them all.
func (s *Spool) writer() {
	defer close(s.wdone)
	for first := range s.reqs {
		batch := []*appendReq{first}
		size := len(first.frames)
	collect:
		for size < 8<<20 && len(batch) < 4096 {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break collect
				}
				batch = append(batch, r)
				size += len(r.frames)
			default:
				break collect
			}
		}
		s.process(batch)
	}
	s.finalize()
}

// process writes the appends of batch in order; a rotate request finalises
// the active file after the appends before it.
func (s *Spool) process(batch []*appendReq) {
	start := 0
	for i, r := range batch {
		if !r.rotate {
			continue
		}
		s.write(batch[start:i])
		s.finalize()
		r.done <- nil
		start = i + 1
	}
	s.write(batch[start:])
}

func (s *Spool) write(reqs []*appendReq) {
	if len(reqs) == 0 {
		return
	}
	err := s.writeAll(reqs)
	if err != nil {
		s.noteWriteErr(err)
	} else {
		s.noteWriteOK()
	}
	for _, r := range reqs {
		r.done <- err
	}
	if err == nil && s.activeCount.Load() >= int64(s.cfg.EventsPerFile) {
		s.finalize()
	}
}

func (s *Spool) writeAll(reqs []*appendReq) error {
	if err := s.ensureReady(); err != nil {
		return err
	}
	if s.active == nil {
		if err := s.create(); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	n := 0
	for _, r := range reqs {
		s.buf = append(s.buf, r.frames...)
		n += len(r.keys)
	}
	before := s.activeSize
	_, err := s.active.Write(s.buf)
	if err == nil && !s.cfg.noSync {
		err = datasync(s.active)
	}
	if err != nil {
		s.undo(before)
		return fmt.Errorf("append to %s: %w", filepath.Base(s.active.Name()), err)
	}
	s.flushes.Add(1)
	s.activeSize += int64(len(s.buf))
	if cap(s.buf) > 16<<20 {
		s.buf = nil // do not keep a huge buffer after a burst
	}
	s.activeCount.Add(int64(n))
	s.mu.Lock()
	fc := s.files[s.activeID]
	for _, r := range reqs {
		for _, k := range r.keys {
			fc.keys[k]++
			s.byKey[k]++
		}
	}
	fc.total += int64(n)
	s.addPending(int64(n))
	s.mu.Unlock()
	return nil
}

// undo cuts a failed write off the active file, so that records answered
// with an error are never replayed. If even that fails the file is closed
// where it is: its good prefix is replayed and the rest quarantined.
func (s *Spool) undo(size int64) {
	err := s.active.Truncate(size)
	if err == nil && !s.cfg.noSync {
		err = datasync(s.active)
	}
	if err != nil {
		s.log.Error("spool file could not be cut back after a failed write; closing it",
			"file", filepath.Base(s.active.Name()), "err", err)
		s.finalize()
	}
}

// create opens a new active file, writes its header and makes its name
// durable before anything is acknowledged in it.
func (s *Spool) create() error {
	id := s.nextID()
	name := filepath.Join(s.cfg.Dir, id+".tmp")
	f, err := s.cfg.openFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("create spool file: %w", err)
	}
	_, err = f.Write(fileHeader[:])
	if err == nil && !s.cfg.noSync {
		err = datasync(f)
	}
	if err == nil && !s.cfg.noSync {
		err = syncDir(s.cfg.Dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return fmt.Errorf("create spool file: %w", err)
	}
	s.active, s.activeID, s.activeSize = f, id, headerLen
	s.activeCount.Store(0)
	s.mu.Lock()
	s.files[id] = &fileCounts{keys: make(map[string]int64)}
	s.mu.Unlock()
	return nil
}

// finalize closes the active file and renames it to .buf, which makes it
// visible to the drain. An empty file is removed.
func (s *Spool) finalize() {
	if s.active == nil {
		return
	}
	f, id := s.active, s.activeID
	s.active, s.activeID, s.activeSize = nil, "", 0
	count := s.activeCount.Swap(0)
	if err := f.Close(); err != nil {
		s.log.Warn("close spool file", "file", id, "err", err)
	}
	tmp := filepath.Join(s.cfg.Dir, id+".tmp")
	if count == 0 {
		_ = os.Remove(tmp)
		s.mu.Lock()
		delete(s.files, id)
		s.mu.Unlock()
		return
	}
	if err := os.Rename(tmp, filepath.Join(s.cfg.Dir, id+".buf")); err != nil {
		// Left as .tmp: the next start recovers it.
		s.log.Error("finalize spool file; it is replayed after a restart", "file", id, "err", err)
		return
	}
	if !s.cfg.noSync {
		_ = syncDir(s.cfg.Dir)
	}
}

// rotate asks the writer to finalise the active file, and waits.
func (s *Spool) rotate(ctx context.Context) error {
	req := &appendReq{rotate: true, done: make(chan error, 1)}
	if err := s.send(ctx, req); err != nil {
		return err
	}
	return <-req.done
}

// nextID names a new file: queen-<13-digit epoch ms>-<8-digit sequence>,
// always greater than every name seen, so that lexical order is arrival
// order even if the clock steps back.
func (s *Spool) nextID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := time.Now().UnixMilli()
	var lastMs, lastSeq int64
	if s.lastName != "" {
		_, _ = fmt.Sscanf(s.lastName, "queen-%13d-%8d", &lastMs, &lastSeq)
	}
	seq := int64(0)
	if ms <= lastMs {
		ms, seq = lastMs, lastSeq+1
	}
	id := fmt.Sprintf("queen-%013d-%08d", ms, seq%100000000)
	s.lastName = id
	return id
}

// noteWriteErr logs the first failure of a run of failures, not each one.
func (s *Spool) noteWriteErr(err error) {
	if s.writeFailing.CompareAndSwap(false, true) {
		s.log.Error("spool cannot write: pushes that need it answer 503 until it can", "err", err)
	}
}

func (s *Spool) noteWriteOK() {
	if s.writeFailing.CompareAndSwap(true, false) {
		s.log.Info("spool writes again")
	}
}
