package spool

import (
	"fmt"
	"os"
	"syscall"
)

// datasync makes the file's data durable: fdatasync(2), which also covers
// the file size, without forcing the other metadata (mtime) to disk.
func datasync(f file) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// syncDir makes the directory's entries (a new or renamed file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lockDir takes an exclusive advisory lock on the directory, so that two
// brokers never write and drain the same spool. The lock goes with the
// process, so a crash never leaves it held.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(dir+"/LOCK", os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool directory is in use by another broker (lock %s): %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}
