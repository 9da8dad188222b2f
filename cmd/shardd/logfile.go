package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Bounds of logs/shardd.log: it is rotated past logMaxBytes, and
// logBackups older files are kept (shardd.log.1 newest … .3 oldest), so the
// daemon's logs never take more than about 40 MiB.
const (
	logMaxBytes = 10 << 20
	logBackups  = 3
)

// rotatingFile is an append-only log file rotated by size. Before a write
// that would take the file past max bytes, path.(keep-1) becomes path.keep
// (the oldest is dropped), …, path becomes path.1, and a new path is
// opened. Each Write lands whole in one file (slog writes one record per
// call). It is safe for concurrent use. A failed rotation keeps writing to
// the current file: losing log lines is worse than a large file.
type rotatingFile struct {
	path string
	max  int64
	keep int

	// mu protects the following.
	mu   sync.Mutex
	f    *os.File
	size int64
}

// openRotating opens (or creates, mode 0600) path for appending; a file
// already past max is rotated at the first write.
func openRotating(path string, max int64, keep int) (*rotatingFile, error) {
	r := &rotatingFile{path: path, max: max, keep: keep}
	if err := r.openLocked(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotatingFile) openLocked() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log: %w", err)
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when p would not fit.
func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, fs.ErrClosed
	}
	if r.size > 0 && r.size+int64(len(p)) > r.max {
		_ = r.rotateLocked() // on failure the current file goes on growing
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotateLocked shifts the backups and reopens path. mu must be held.
func (r *rotatingFile) rotateLocked() error {
	backup := func(i int) string { return fmt.Sprintf("%s.%d", r.path, i) }
	var errs []error
	if r.keep < 1 {
		// No backups: start over in place.
		if err := r.f.Truncate(0); err != nil {
			return err
		}
		r.size = 0
		return nil
	}
	if err := os.Remove(backup(r.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for i := r.keep - 1; i >= 1; i-- {
		if err := os.Rename(backup(i), backup(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Rename(r.path, backup(1)); err != nil {
		return errors.Join(append(errs, err)...)
	}
	old := r.f
	if err := r.openLocked(); err != nil {
		// Keep appending to the renamed file rather than drop records, and
		// try again only after another max bytes.
		r.size = 0
		return errors.Join(append(errs, err)...)
	}
	old.Close()
	return errors.Join(errs...)
}

// Close closes the file; later writes fail.
func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
