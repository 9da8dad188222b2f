//go:build unix

package buildlock

import (
	"os"
	"path/filepath"
	"syscall"
)

// file is the lock file, in os.TempDir().
const file = "shard-test-build.lock"

// Lock blocks until this process holds the exclusive build lock and
// returns its release. The kernel releases it too when the process exits,
// however it exits. When the lock file cannot be opened or locked (another
// user's file) it returns at once and the build runs unserialized, as it
// did before: the lock only saves work.
func Lock() (unlock func()) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), file), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
