package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotPrivate marks a home, database or config file that other users can
// write, or that belongs to another user: the daemon refuses to start on it.
var ErrNotPrivate = errors.New("daemon: not owner-only")

// checkPrivate refuses path if it is group- or world-writable or owned by
// a user other than this one or root; when tighten is set and this user
// owns it, it is narrowed to mode if others can read it. A missing file is
// fine (it is created owner-only); a missing directory is not (the caller
// has just created it).
func checkPrivate(path string, mode fs.FileMode, dir, tighten bool) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && !dir {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: check %s: %w", path, err)
	}
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNotPrivate, path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrNotPrivate, path)
	}
	own := true
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		if st.Uid != 0 {
			return fmt.Errorf("%w: %s belongs to uid %d, not to this user (uid %d)", ErrNotPrivate, path, st.Uid, os.Getuid())
		}
		own = false
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by group or others (mode %04o); run: chmod %04o %s", ErrNotPrivate, path, perm, mode, path)
	}
	if tighten && own && perm&^mode != 0 {
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("daemon: chmod %s: %w", path, err)
		}
	}
	return nil
}
