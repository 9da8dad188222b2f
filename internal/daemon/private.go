package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/shard-dev/shard/config"
)

// ErrNotPrivate marks a home, database or config file that other users can
// write, or that belongs to another user: the daemon refuses to start on it.
var ErrNotPrivate = errors.New("daemon: not owner-only")

// PrepareHome checks the home, then creates what the daemon keeps in it
// (logs/, logs/agents/, sessions/). The home, the database and the config
// file are owner-only: one that others can write or that another user owns
// is refused (someone else could have planted a socket, a database or a
// runtime.command), one others can read is tightened. The check comes
// before anything is created inside the home, so a refused home is left as
// it was found (logs/ was once created in a foreign home before it was
// refused). shardd calls it before it opens its log file; New calls it
// again, which is idempotent.
func PrepareHome(cfg *config.Config) error {
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return fmt.Errorf("daemon: create %s: %w", cfg.Home, err)
	}
	if err := checkPrivate(cfg.Home, 0o700, true, true); err != nil {
		return err
	}
	if err := checkPrivate(cfg.DBPath(), 0o600, false, true); err != nil {
		return err
	}
	if err := checkPrivate(cfg.ConfigFile, 0o600, false, false); err != nil {
		return err
	}
	for _, dir := range []string{cfg.LogDir(), filepath.Join(cfg.LogDir(), "agents"), cfg.SessionsDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("daemon: create %s: %w", dir, err)
		}
	}
	return nil
}

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
