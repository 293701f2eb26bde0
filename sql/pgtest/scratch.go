package pgtest

import "syscall"

// ServerCredential is the OS user a harness runs PostgreSQL as: the
// postgres user when the tests run as root (initdb, postgres and
// pg_autoctl refuse root), nil otherwise. For sibling harnesses such as
// sql/pgtest/pgaf.
func ServerCredential() (*syscall.Credential, error) { return credential() }

// ScratchDir is the directory a harness creates its cluster directories in:
// os.TempDir, unless the server runs as another user (otherUser) who cannot
// reach it; then /tmp.
func ScratchDir(otherUser bool) string { return baseDir(otherUser) }

// Alive reports whether a process with this id exists.
func Alive(pid int) bool { return alive(pid) }
