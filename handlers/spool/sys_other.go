//go:build !linux

package spool

import "os"

func datasync(f file) error { return f.Sync() }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.Sync() // not every system can sync a directory
	return nil
}

// lockDir is a no-op where flock is not available: run one broker per
// spool directory.
func lockDir(string) (func(), error) { return func() {}, nil }
