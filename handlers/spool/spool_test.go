package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func rec(queue, partition, txID string) Record {
	return Record{Queue: queue, Partition: partition, TransactionID: txID, Payload: json.RawMessage(fmt.Sprintf(`{"tx":%q}`, txID))}
}

// readDir returns every record of the dir's .buf files, in replay order.
func readDir(t *testing.T, dir string) []Record {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.buf"))
	require.NoError(t, err)
	var out []Record
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		got, _, err := readAll(t, raw)
		require.NoError(t, err, f)
		out = append(out, got...)
	}
	return out
}

// Concurrent appends all land, each caller's records contiguous and in its
// order; the file rotates every EventsPerFile records; the counts follow.
func TestAppendConcurrentRotatesAndCounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Open(Config{Dir: dir, EventsPerFile: 50})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				p := fmt.Sprintf("p%d", w)
				require.NoError(t, s.Append(t.Context(), []Record{rec("q", p, fmt.Sprintf("%d-%d-a", w, i)), rec("q", p, fmt.Sprintf("%d-%d-b", w, i))}))
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 320, s.Pending())
	require.True(t, s.HasPending(Key("", "q", "p3")))
	require.False(t, s.HasPending(Key("", "q", "p9"), Key("", "other", "p3")))
	require.NoError(t, s.Close())

	got := readDir(t, dir)
	require.Len(t, got, 320)
	files, _ := filepath.Glob(filepath.Join(dir, "*.buf"))
	require.GreaterOrEqual(t, len(files), 320/50)
	next := map[string]int{}
	for _, r := range got {
		var w, i int
		var half string
		_, err := fmt.Sscanf(r.TransactionID, "%d-%d-%s", &w, &i, &half)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("p%d", w), r.Partition)
		want := next[r.Partition]
		require.Equal(t, fmt.Sprintf("%d-%d-%s", w, want/2, map[bool]string{true: "a", false: "b"}[want%2 == 0]), r.TransactionID)
		next[r.Partition]++
	}

	// A new start counts what is still there.
	s2 := Open(Config{Dir: dir})
	defer s2.Close()
	require.EqualValues(t, 320, s2.Pending())
	require.True(t, s2.HasPending(Key("", "q", "p0")))
}

// A crash leaves the active file as .tmp with a cut record at its end: the
// next start keeps the whole records, cuts the rest and finalises the file.
func TestOpenRecoversTornTmp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recs := []Record{rec("q", "p", "1"), rec("q", "p", "2"), rec("q", "p", "3")}
	full := Encode(recs)
	torn := full[:len(full)-5]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queen-0000000000001-00000000.tmp"), torn, 0o640))
	// An empty leftover (crash right after create) disappears.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queen-0000000000002-00000000.tmp"), full[:headerLen], 0o640))

	s := Open(Config{Dir: dir})
	require.EqualValues(t, 2, s.Pending())
	require.NoError(t, s.Close())
	require.NoFileExists(t, filepath.Join(dir, "queen-0000000000002-00000000.tmp"))
	raw, err := os.ReadFile(filepath.Join(dir, "queen-0000000000001-00000000.buf"))
	require.NoError(t, err)
	require.Equal(t, Encode(recs[:2]), raw)
	failed, _ := os.ReadDir(filepath.Join(dir, FailedDir))
	require.Empty(t, failed, "a torn tail is a crash artefact, not damage")

	// Names of new files sort after the recovered ones whatever the clock says.
	s = Open(Config{Dir: dir})
	require.NoError(t, s.Append(t.Context(), []Record{rec("q", "p", "4")}))
	require.NoError(t, s.Close())
	require.Equal(t, []string{"1", "2", "4"}, txIDs(readDir(t, dir)))
}

func txIDs(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.TransactionID
	}
	return out
}

// failingFile fails writes once armed, as a full disk does.
type failingFile struct {
	*os.File
	fail  *atomic.Bool
	short bool // write half the bytes before failing
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fail.Load() {
		if f.short {
			n, _ := f.File.Write(p[:len(p)/2])
			return n, syscall.ENOSPC
		}
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs[r.Message]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[msg]
}

// A full disk: the append answers an error, the failed bytes never replay,
// the log says so once per run of failures, and the spool works again when
// space comes back.
func TestAppendFullDisk(t *testing.T) {
	t.Parallel()
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprintf("short=%v", short), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var fail atomic.Bool
			logs := &countingHandler{msgs: map[string]int{}}
			s := Open(Config{Dir: dir, Logger: slog.New(logs), openFile: func(name string, flag int, perm fs.FileMode) (file, error) {
				f, err := os.OpenFile(name, flag, perm)
				if err != nil {
					return nil, err
				}
				return &failingFile{File: f, fail: &fail, short: short}, nil
			}})
			require.NoError(t, s.Append(t.Context(), []Record{rec("q", "p", "ok-1")}))
			fail.Store(true)
			for i := range 5 {
				err := s.Append(t.Context(), []Record{rec("q", "p", fmt.Sprintf("lost-%d", i))})
				require.ErrorIs(t, err, syscall.ENOSPC)
			}
			require.Equal(t, 1, logs.count("spool cannot write: pushes that need it answer 503 until it can"))
			require.False(t, s.Stats().Writable)
			require.EqualValues(t, 1, s.Pending())
			fail.Store(false)
			require.NoError(t, s.Append(t.Context(), []Record{rec("q", "p", "ok-2")}))
			require.True(t, s.Stats().Writable)
			require.Equal(t, 1, logs.count("spool writes again"))
			require.NoError(t, s.Close())
			require.Equal(t, []string{"ok-1", "ok-2"}, txIDs(readDir(t, dir)))
		})
	}
}

// A directory that cannot be created: appends fail, the log says why once,
// nothing panics, Close works.
func TestAppendUnwritableDir(t *testing.T) {
	t.Parallel()
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o640))
	logs := &countingHandler{msgs: map[string]int{}}
	s := Open(Config{Dir: filepath.Join(blocker, "spool"), Logger: slog.New(logs)})
	for range 3 {
		require.Error(t, s.Append(t.Context(), []Record{rec("q", "p", "x")}))
	}
	require.Equal(t, 1, logs.count("spool cannot write: pushes that need it answer 503 until it can"))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Append(t.Context(), []Record{rec("q", "p", "x")}), ErrClosed)
}

// Two brokers never share a spool directory.
func TestOpenLocksDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := Open(Config{Dir: dir})
	b := Open(Config{Dir: dir})
	require.Error(t, b.Append(t.Context(), []Record{rec("q", "p", "x")}))
	require.NoError(t, b.Close())
	require.NoError(t, a.Append(t.Context(), []Record{rec("q", "p", "x")}))
	require.NoError(t, a.Close())
	c := Open(Config{Dir: dir})
	defer c.Close()
	require.EqualValues(t, 1, c.Pending())
}

// fakeDB is a ReplayFunc with transaction-id dedup, like the real store.
type fakeDB struct {
	mu       sync.Mutex
	stored   map[string][]string // partition key -> transaction ids in order
	seen     map[string]bool
	calls    int
	down     atomic.Bool
	refuse   map[string]bool // transaction ids refused as bad data
	allDone  chan struct{}
	want     int
	onReplay func()
}

func newFakeDB(want int) *fakeDB {
	return &fakeDB{stored: map[string][]string{}, seen: map[string]bool{}, refuse: map[string]bool{}, allDone: make(chan struct{}), want: want}
}

func (d *fakeDB) replay(_ context.Context, recs []Record) error {
	if d.onReplay != nil {
		d.onReplay()
	}
	if d.down.Load() {
		return fmt.Errorf("%w: connection refused", ErrRetry)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	for _, r := range recs {
		if d.refuse[r.TransactionID] {
			return errors.New("invalid input value")
		}
	}
	for _, r := range recs {
		k := r.key() + "/" + r.TransactionID
		if d.seen[k] {
			continue
		}
		d.seen[k] = true
		d.stored[r.key()] = append(d.stored[r.key()], r.TransactionID)
		if len(d.seen) == d.want {
			close(d.allDone)
		}
	}
	return nil
}

func waitDrained(t *testing.T, s *Spool, d *fakeDB) {
	t.Helper()
	select {
	case <-d.allDone:
	case <-t.Context().Done():
		t.Fatal("drain did not finish")
	}
	// The counts drop right after the replay returns.
	for s.Pending() != 0 {
		runtime.Gosched()
	}
}

// The drain replays every record once, in order per partition, across
// files, through database outages (ErrRetry) and a restart in the middle.
func TestDrainReplaysInOrderThroughOutages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Open(Config{Dir: dir, EventsPerFile: 7, MaxBatch: 5, FlushInterval: 5 * time.Millisecond})
	const n = 60
	for i := range n {
		require.NoError(t, s.Append(t.Context(), []Record{rec("q", fmt.Sprintf("p%d", i%3), fmt.Sprintf("%03d", i))}))
	}
	db := newFakeDB(n)
	db.down.Store(true)
	var attempts atomic.Int32
	db.onReplay = func() {
		if attempts.Add(1) == 4 {
			db.down.Store(false)
		}
	}
	s.StartDrain(db.replay)
	waitDrained(t, s, db)
	require.NoError(t, s.Close())

	for p, ids := range db.stored {
		require.IsIncreasing(t, ids, p)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "queen-*"))
	require.Empty(t, left)
}

// A record the database refuses is set aside in failed/ and the others of
// its batch go through, in order; a damaged file is quarantined after its
// good records.
func TestDrainSetsAsideRefusedRecordsAndDamagedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := Encode([]Record{rec("q", "p", "d1"), rec("q", "p", "d2")})
	damaged := append(bytes.Clone(good), Encode([]Record{rec("q", "p", "d3")})[headerLen:]...)
	damaged[len(damaged)-3] ^= 0xff
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queen-0000000000001-00000000.buf"), damaged, 0o640))

	s := Open(Config{Dir: dir, MaxBatch: 10, FlushInterval: 5 * time.Millisecond})
	require.NoError(t, s.Append(t.Context(), []Record{rec("q", "p", "a"), rec("q", "p", "bad"), rec("q", "p", "c")}))
	db := newFakeDB(4)
	db.refuse["bad"] = true
	s.StartDrain(db.replay)
	waitDrained(t, s, db)
	require.NoError(t, s.Close())

	require.Equal(t, []string{"d1", "d2", "a", "c"}, db.stored[Key("", "q", "p")])
	require.FileExists(t, filepath.Join(dir, FailedDir, "queen-0000000000001-00000000.buf"))
	rejected, err := filepath.Glob(filepath.Join(dir, FailedDir, "*.rejected"))
	require.NoError(t, err)
	require.Len(t, rejected, 1)
	raw, err := os.ReadFile(rejected[0])
	require.NoError(t, err)
	got, _, err := readAll(t, raw)
	require.NoError(t, err)
	require.Equal(t, []string{"bad"}, txIDs(got))
	st := Open(Config{Dir: dir}).Stats()
	require.Equal(t, 2, st.FailedFiles)
}

// While paused a drain cycle replays nothing; after Resume it does.
func TestDrainPause(t *testing.T) {
	t.Parallel()
	s := Open(Config{Dir: t.TempDir()})
	defer s.Close()
	s.Pause()
	require.True(t, s.Stats().Paused)
	require.NoError(t, s.Append(t.Context(), []Record{rec("q", "p", "1")}))
	db := newFakeDB(1)
	require.NoError(t, s.drainCycle(t.Context(), db.replay))
	require.Zero(t, db.calls)
	require.EqualValues(t, 1, s.Pending())
	s.Resume()
	require.NoError(t, s.drainCycle(t.Context(), db.replay))
	require.Equal(t, 1, db.calls)
	require.Zero(t, s.Pending())
}

func TestCloseIdempotent(t *testing.T) {
	t.Parallel()
	s := Open(Config{Dir: t.TempDir()})
	s.StartDrain(func(context.Context, []Record) error { return nil })
	s.StartDrain(func(context.Context, []Record) error { return nil })
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	s.StopDrain()
}
