package spool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ensureReady creates the directory, takes its lock, recovers the files a
// crash left open and counts the pending records, once. Until it succeeds
// every append and every drain cycle tries again.
func (s *Spool) ensureReady() error {
	if s.ready.Load() {
		return nil
	}
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	if s.ready.Load() {
		return nil
	}
	if s.cfg.Dir == "" {
		return errors.New("no spool directory (FILE_BUFFER_DIR)")
	}
	if err := os.MkdirAll(filepath.Join(s.cfg.Dir, FailedDir), 0o750); err != nil {
		return fmt.Errorf("create spool directory: %w", err)
	}
	if s.unlock == nil {
		unlock, err := lockDir(s.cfg.Dir)
		if err != nil {
			return err
		}
		s.unlock = unlock
	}
	if err := s.scan(); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// scan finalises leftover .tmp files and counts the records of every .buf.
func (s *Spool) scan() error {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("read spool directory: %w", err)
	}
	var tmps, bufs []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		switch filepath.Ext(name) {
		case ".tmp":
			tmps = append(tmps, strings.TrimSuffix(name, ".tmp"))
		case ".buf":
			bufs = append(bufs, strings.TrimSuffix(name, ".buf"))
		}
	}
	slices.Sort(tmps)
	for _, id := range tmps {
		ok, err := s.recoverTmp(id)
		if err != nil {
			s.log.Error("recover spool file; it stays as it is", "file", id+".tmp", "err", err)
			continue
		}
		if ok {
			bufs = append(bufs, id)
		}
	}
	slices.Sort(bufs)
	var records int64
	for _, id := range bufs {
		fc, err := countFile(filepath.Join(s.cfg.Dir, id+".buf"))
		if err != nil {
			// The drain meets the same error and quarantines the file.
			s.log.Warn("count spool file", "file", id+".buf", "err", err)
		}
		s.mu.Lock()
		s.files[id] = fc
		for k, n := range fc.keys {
			s.byKey[k] += n
		}
		s.addPending(fc.total)
		s.noteName(id)
		s.mu.Unlock()
		records += fc.total
	}
	if len(bufs) > 0 {
		s.log.Info("spool holds records from before this start; replaying them", "files", len(bufs), "records", records)
	}
	return nil
}

// noteName remembers the greatest queen-... name. Caller holds mu.
func (s *Spool) noteName(id string) {
	var ms, seq int64
	if n, _ := fmt.Sscanf(id, "queen-%13d-%8d", &ms, &seq); n == 2 && id > s.lastName {
		s.lastName = id
	}
}

// countFile reads a file's good records and counts them per partition.
func countFile(path string) (*fileCounts, error) {
	fc := &fileCounts{keys: make(map[string]int64)}
	f, err := os.Open(path)
	if err != nil {
		return fc, err
	}
	defer f.Close()
	r := NewReader(f)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return fc, nil
		}
		if err != nil {
			return fc, err
		}
		fc.keys[rec.key()]++
		fc.total++
	}
}

// recoverTmp finishes a file that was active when the broker stopped
// without closing it: a tail that is not a whole, intact record (a write cut
// short by the crash, never acknowledged) is cut off, and the file becomes
// .buf. A tail that is neither zeros nor a cut record is damage, not a
// crash artefact: it is copied to failed/ before the cut. It reports
// whether a .buf now holds records.
func (s *Spool) recoverTmp(id string) (bool, error) {
	tmp := filepath.Join(s.cfg.Dir, id+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, err
	}
	r := NewReader(f)
	records := 0
	var rerr error
	for {
		if _, rerr = r.Next(); rerr != nil {
			break
		}
		records++
	}
	if good := r.Offset(); rerr != io.EOF && good < info.Size() {
		tail := info.Size() - good
		if errors.Is(rerr, ErrCorrupt) {
			if zero, err := allZero(f, good); err == nil && !zero {
				if err := s.saveTail(f, good, id); err != nil {
					return false, fmt.Errorf("save damaged tail: %w", err)
				}
				s.log.Error("spool file damaged; its good records are replayed, the rest is kept in failed/",
					"file", id+".tmp", "tail_bytes", tail, "err", rerr)
			}
		}
		if err := f.Truncate(good); err != nil {
			return false, fmt.Errorf("cut torn tail: %w", err)
		}
		s.log.Warn("spool file ended inside a record (the broker stopped mid-write); unacknowledged tail cut off",
			"file", id+".tmp", "records", records, "tail_bytes", tail)
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	if records == 0 {
		return false, os.Remove(tmp)
	}
	if err := os.Rename(tmp, filepath.Join(s.cfg.Dir, id+".buf")); err != nil {
		return false, err
	}
	return true, syncDir(s.cfg.Dir)
}

func allZero(f *os.File, from int64) (bool, error) {
	br := bufio.NewReader(io.NewSectionReader(f, from, 1<<62))
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if b != 0 {
			return false, nil
		}
	}
}

func (s *Spool) saveTail(f *os.File, from int64, id string) error {
	out, err := os.OpenFile(filepath.Join(s.cfg.Dir, FailedDir, id+".tail"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.NewSectionReader(f, from, 1<<62)); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
