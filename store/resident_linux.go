//go:build linux

package store

import (
	"os"
	"syscall"
)

// dropResident tells the kernel that the process no longer needs the pages
// of the database's memory map it has touched so far (madvise
// MADV_DONTNEED). Open calls it once the file is open: with the freelist
// not synced (see Open), bbolt rebuilds it by reading every page, which
// left the whole file resident in the daemon's RSS, growing with the
// history although the daemon then reads only what it serves. The map is
// read-only and shared, so nothing is lost: the pages stay in the page
// cache and a later read maps them back without I/O. A failure only leaves
// them resident.
func (s *Store) dropResident() {
	fi, err := os.Stat(s.path)
	if err != nil || fi.Size() == 0 {
		return
	}
	// The map is at least the file's size (bbolt maps the file, rounded
	// up), and nothing else uses the store before Open returns.
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, s.db.Info().Data, uintptr(fi.Size()), syscall.MADV_DONTNEED)
}
