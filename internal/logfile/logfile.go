// Package logfile is the daemon's size-bounded log file: logs/shardd.log
// and each agent runtime's stderr log (logs/agents/<agent_id>.log) are
// Files, rotated past log.max_bytes with log.backups older files kept, so
// that a daemon running for months holds a bounded amount of logs. A
// runtime writes its stderr into a pipe; the daemon's one Mux copies every
// such pipe into its File, so a live runtime's log costs no goroutine.
package logfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Defaults of log.max_bytes and log.backups: each log is rotated past 10
// MiB and 3 older files are kept (path.1 newest … path.3 oldest), so one
// log never takes more than about 40 MiB.
const (
	DefaultMaxBytes = 10 << 20
	DefaultBackups  = 3
)

// File is an append-only log file rotated by size. Before a write
// that would take the file past max bytes, path.(keep-1) becomes path.keep
// (the oldest is dropped), …, path becomes path.1, and a new path is
// opened. Each Write lands whole in one file (slog writes one record per
// call). It is safe for concurrent use. A failed rotation keeps writing to
// the current file: losing log lines is worse than a large file.
type File struct {
	path string
	max  int64
	keep int

	// mu protects the following.
	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (or creates, mode 0600) path for appending, to be rotated
// past max bytes with keep older files; keep 0 truncates the file in place
// instead. A file already past max is rotated at once, so that a log that
// grew under larger bounds (or before a restart) is bounded before anything
// is written to it.
func Open(path string, max int64, keep int) (*File, error) {
	r := &File{path: path, max: max, keep: keep}
	if err := r.openLocked(); err != nil {
		return nil, err
	}
	if r.size > r.max {
		_ = r.rotateLocked() // on failure the current file goes on growing
	}
	return r, nil
}

func (r *File) openLocked() error {
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
func (r *File) Write(p []byte) (int, error) {
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
func (r *File) rotateLocked() error {
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
	// Every name is replaced by rename(2), which is atomic, over a hard
	// link made first under a temporary name: path and every backup that
	// exists stay there throughout a rotation, for whoever lists or reads
	// the directory meanwhile (tail -F, a test). The oldest is removed only
	// when nothing moves over it.
	tmp := rotatingPath(r.path)
	for i := r.keep - 1; i >= 1; i-- {
		err := shift(tmp, backup(i), backup(i+1))
		if errors.Is(err, fs.ErrNotExist) && i == r.keep-1 {
			err = os.Remove(backup(r.keep))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := shift(tmp, r.path, backup(1)); err != nil {
		return errors.Join(append(errs, err)...)
	}
	old := r.f
	if err := r.replaceLocked(tmp); err != nil {
		// Keep appending to the file now path.1 rather than drop
		// records, and try again only after another max bytes.
		r.size = 0
		return errors.Join(append(errs, err)...)
	}
	old.Close()
	return errors.Join(errs...)
}

// rotatingPath is the name a rotation of path links and creates files
// under before renaming them into place: hidden, beside path.
func rotatingPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".rotating")
}

// shift makes from's file to's, replacing to at once: a hard link at tmp
// renamed over to, then from's name is left (the caller renames over it
// next). Where hard links fail (a file system without them) it renames
// from to to, leaving from missing until it is replaced.
func shift(tmp, from, to string) error {
	_ = os.Remove(tmp)
	if err := os.Link(from, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return os.Rename(from, to)
	}
	if err := os.Rename(tmp, to); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// replaceLocked puts a new empty file at path, created at tmp and renamed
// over path at once, and writes there from now on. mu must be held.
func (r *File) replaceLocked(tmp string) error {
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("open log: %w", err)
	}
	r.f, r.size = f, 0
	return nil
}

// Close closes the file; later writes fail.
func (r *File) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// copyBuf is the buffer of one read of Copy, pooled: a copy holds none
// while it waits for input, so an idle runtime's log costs no buffer.
var copyBuf = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Copy copies r into the File at path (opened as by Open) until r ends,
// then closes both. Each read goes whole into one file, and reads are at
// most maxBytes (and 32 KiB), so a file stays within maxBytes. It is the
// goroutine behind a child's stderr pipe where there is no Mux (a nil
// *Mux, or off Linux): the child never writes to the file itself, so its
// log is rotated while it runs. When r is a pipe or
// socket (a syscall.Conn), Copy waits for input without a buffer and takes
// one from a pool only to read what is there: a copy for each live
// runtime costs its goroutine only. A failed write drops what was read
// and goes on reading, so that the child never blocks on a full pipe
// because the disk is full.
func Copy(path string, maxBytes int64, keep int, r io.ReadCloser) error {
	defer r.Close()
	f, err := Open(path, maxBytes, keep)
	if err != nil {
		_, _ = io.Copy(io.Discard, r)
		return err
	}
	wait := readable(r)
	var werr error
	for {
		if err := wait(); err != nil {
			return errors.Join(werr, f.Close())
		}
		bp := copyBuf.Get().(*[]byte)
		n, err := r.Read((*bp)[:min(max(maxBytes, 1), int64(len(*bp)))])
		if n > 0 {
			if _, err := f.Write((*bp)[:n]); err != nil && werr == nil {
				werr = err
			}
		}
		copyBuf.Put(bp)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return errors.Join(werr, f.Close())
		}
	}
}

// readable returns a function that waits until r has input (or has ended)
// without reading it, through the runtime's poller: r's descriptor is
// non-blocking (os.Pipe's are). For other readers it returns at once.
func readable(r io.Reader) func() error {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return func() error { return nil }
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() error { return nil }
	}
	return func() error {
		woke := false
		return rc.Read(func(fd uintptr) bool {
			// The poller is edge-triggered and was armed before this
			// call: input or a hang-up already there is seen by the
			// level-triggered poll below, and one arriving after it
			// wakes the wait. After a wake the read tells which it was.
			if woke {
				return true
			}
			woke = true
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			return err != nil || n > 0
		})
	}
}

// Remove removes the log at path and its rotated files path.1 … path.keep
// (and any beyond, left by a larger keep earlier, up to a gap), and the
// temporary file a rotation cut short (a crash) may have left. A missing
// file is not an error.
func Remove(path string, keep int) error {
	var errs []error
	for _, p := range []string{path, rotatingPath(path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for i := 1; ; i++ {
		err := os.Remove(fmt.Sprintf("%s.%d", path, i))
		if errors.Is(err, fs.ErrNotExist) {
			if i > keep {
				break
			}
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
