package cmdtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A command is built once per process: the second call returns the same
// executable file without building again.
func TestBinaryBuildsOnce(t *testing.T) {
	bin := Binary(t, "cmd/queen-proxy")
	info, err := os.Stat(bin)
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&0o111, "executable")
	require.Equal(t, bin, Binary(t, "cmd/queen-proxy"))
	again, err := os.Stat(bin)
	require.NoError(t, err)
	require.Equal(t, info.ModTime(), again.ModTime(), "not rebuilt")
}

// The folder of a process that is gone is removed; a live one's stays.
func TestSweepStale(t *testing.T) {
	dead, err := os.MkdirTemp("", dirPrefix)
	require.NoError(t, err)
	// PID 2^22+1 is above Linux's pid_max limit, so no process has it.
	require.NoError(t, os.WriteFile(filepath.Join(dead, ownerFile), []byte("4194305"), 0o644))
	live, err := os.MkdirTemp("", dirPrefix)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(live) })
	require.NoError(t, os.WriteFile(filepath.Join(live, ownerFile), []byte("1"), 0o644))

	sweepStale()
	require.NoDirExists(t, dead)
	require.DirExists(t, live)
}
