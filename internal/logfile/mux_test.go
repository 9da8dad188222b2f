package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newMux starts a Mux closed at the end of the test.
func newMux(t *testing.T) *Mux {
	t.Helper()
	m, err := NewMux()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// muxes are the two ways streams are copied: one loop for all, and a
// goroutine each (a nil *Mux).
func muxes(t *testing.T, run func(t *testing.T, m *Mux)) {
	t.Run("mux", func(t *testing.T) { run(t, newMux(t)) })
	t.Run("goroutines", func(t *testing.T) { run(t, nil) })
}

func add(t *testing.T, m *Mux, path string, maxBytes int64, keep int) (*os.File, *Stream) {
	t.Helper()
	w, s, err := m.Add(path, maxBytes, keep)
	if err != nil {
		t.Fatal(err)
	}
	return w, s
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Many streams written at once, each by a writer of its own in many
// small writes: every file holds exactly its stream's input, in order,
// once its Done is closed.
func TestMuxCopiesManyStreamsEachIntoItsFile(t *testing.T) {
	muxes(t, func(t *testing.T, m *Mux) {
		dir := t.TempDir()
		const streams, lines = 64, 200
		type reg struct {
			w    *os.File
			s    *Stream
			path string
			want bytes.Buffer
		}
		regs := make([]*reg, streams)
		for i := range regs {
			r := &reg{path: filepath.Join(dir, fmt.Sprintf("a%02d.log", i))}
			r.w, r.s = add(t, m, r.path, DefaultMaxBytes, DefaultBackups)
			for j := 0; j < lines; j++ {
				fmt.Fprintf(&r.want, "stream %02d line %04d\n", i, j)
			}
			regs[i] = r
		}
		var wg sync.WaitGroup
		for _, r := range regs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer r.w.Close()
				for _, l := range bytes.SplitAfter(r.want.Bytes(), []byte("\n")) {
					if _, err := r.w.Write(l); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, r := range regs {
			<-r.s.Done()
			if err := r.s.Err(); err != nil {
				t.Errorf("stream %d: %v", i, err)
			}
			if got := read(t, r.path); got != r.want.String() {
				t.Fatalf("stream %d: log holds %d bytes, want its own %d in order", i, len(got), r.want.Len())
			}
		}
	})
}

// A stream's log rotates by size as Open's does: each read whole into one
// file within maxBytes, keep backups, the newest input last.
func TestMuxRotatesBySizeAndKeepsBackups(t *testing.T) {
	muxes(t, func(t *testing.T, m *Mux) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.log")
		const maxBytes, keep = 1024, 3
		w, s := add(t, m, path, maxBytes, keep)
		payload := bytes.Repeat([]byte("0123456789abcde\n"), 1000) // 16000 bytes
		for off := 0; off < len(payload); off += 500 {
			if _, err := w.Write(payload[off:min(off+500, len(payload))]); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		<-s.Done()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		var all []byte
		for i := keep; i >= 0; i-- {
			name := path
			if i > 0 {
				name = fmt.Sprintf("%s.%d", path, i)
			}
			b := read(t, name)
			if len(b) == 0 || len(b) > maxBytes {
				t.Fatalf("%s has %d bytes, want 1..%d", name, len(b), maxBytes)
			}
			all = append(all, b...)
		}
		if !bytes.HasSuffix(payload, all) {
			t.Fatal("the backups then the live log are not the end of what was written")
		}
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, keep+1)); !os.IsNotExist(err) {
			t.Fatalf("a backup beyond keep=%d: %v", keep, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != keep+1 {
			t.Fatalf("%d files, want %d", len(entries), keep+1)
		}
	})
}

// The writer closes its end while what it wrote is still in the pipe,
// unread (the loop is held): Done closes only once all of it is in the
// log, the EOF seen after the data.
func TestMuxWritesWhatThePipeHoldsAtEOFBeforeDone(t *testing.T) {
	m := newMux(t)
	path := filepath.Join(t.TempDir(), "a.log")
	w, s := add(t, m, path, DefaultMaxBytes, DefaultBackups)
	payload := bytes.Repeat([]byte("x"), 60<<10) // fits a pipe's buffer
	m.mu.Lock()                                  // the loop cannot look the stream up
	if _, err := w.Write(payload); err != nil {
		m.mu.Unlock()
		t.Fatal(err)
	}
	w.Close()
	select {
	case <-s.Done():
		m.mu.Unlock()
		t.Fatal("done before the loop read anything")
	default:
	}
	m.mu.Unlock()
	<-s.Done()
	if got := read(t, path); got != string(payload) {
		t.Fatalf("log holds %d bytes, want %d", len(got), len(payload))
	}
}

// regOf is the registration of s. m.mu must be held.
func regOf(t *testing.T, m *Mux, s *Stream) *muxReg {
	t.Helper()
	for _, r := range m.regs {
		if r.s == s {
			return r
		}
	}
	t.Fatal("no registration for the stream")
	return nil
}

// Stream.Close ends a stream whose write end is still held: what the pipe
// held is in the log, the read end is closed (the writer gets EPIPE), and
// a second Close does nothing. The loop reads a byte per wake-up (maxBytes
// 1) and is held while the data is written and the stop asked, so the
// stop, not the reads, copies nearly all of it.
func TestMuxStreamCloseEndsAHeldPipe(t *testing.T) {
	m := newMux(t)
	path := filepath.Join(t.TempDir(), "a.log")
	w, s := add(t, m, path, 1, 0)
	defer w.Close()
	other, os2 := add(t, m, path+".other", DefaultMaxBytes, DefaultBackups)
	payload := bytes.Repeat([]byte("before the bound\n"), 100)
	m.mu.Lock()
	if _, err := w.Write(payload); err != nil {
		m.mu.Unlock()
		t.Fatal(err)
	}
	m.stopLocked(regOf(t, m, s)) // as s.Close, with the loop held
	m.mu.Unlock()
	<-s.Done()
	s.Close()
	// keep 0 truncates in place past maxBytes: the reads before the stop
	// went that way; the stop's drain, bounded by maxBytes per write too,
	// leaves the last byte. What proves the drain is that the stream
	// ended without EOF and nothing is left in the pipe.
	if got := read(t, path); got != "\n" {
		t.Fatalf("log = %q, want the last byte", got)
	}
	if _, err := w.Write([]byte("late\n")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after Close: %v, want EPIPE", err)
	}
	// The other stream goes on.
	if _, err := other.Write([]byte("still copied\n")); err != nil {
		t.Fatal(err)
	}
	other.Close()
	<-os2.Done()
	if got := read(t, path+".other"); got != "still copied\n" {
		t.Fatalf("other log = %q", got)
	}
}

// Closing the Mux ends the streams left, with what their pipes hold, and
// refuses later Adds. The loop reads a byte per wake-up (maxBytes 1) and
// is held until the close is asked, so the close copies nearly all.
func TestMuxCloseEndsTheStreamsLeft(t *testing.T) {
	m, err := NewMux()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var ss []*Stream
	want := func(i int) string { return string(bytes.Repeat([]byte(fmt.Sprintf("stream %d\n", i)), 100)) }
	for i := 0; i < 5; i++ {
		w, s := add(t, m, filepath.Join(dir, fmt.Sprintf("%d.log", i)), 1, 1)
		defer w.Close()
		ss = append(ss, s)
		m.mu.Lock()
		if _, err := w.Write([]byte(want(i))); err != nil {
			m.mu.Unlock()
			t.Fatal(err)
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.closing = true // as Close, with the loop held
	m.wakeLocked()
	m.mu.Unlock()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		<-s.Done()
		// maxBytes 1, keep 1: the live log and its backup hold the last
		// two bytes; the pipe is empty (the drain read it all).
		name := filepath.Join(dir, fmt.Sprintf("%d.log", i))
		if got := read(t, name+".1") + read(t, name); got != want(i)[len(want(i))-2:] {
			t.Errorf("log %d ends %q", i, got)
		}
		s.Close() // after the end: nothing to do
	}
	if _, _, err := m.Add(filepath.Join(dir, "late.log"), DefaultMaxBytes, DefaultBackups); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Add after Close: %v, want os.ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A log that cannot be opened does not block the writer: its input is
// read and dropped, and Err tells once the stream has ended.
func TestMuxUnopenableLogDropsInput(t *testing.T) {
	muxes(t, func(t *testing.T, m *Mux) {
		path := filepath.Join(t.TempDir(), "missing", "a.log")
		w, s := add(t, m, path, DefaultMaxBytes, DefaultBackups)
		if _, err := w.Write(bytes.Repeat([]byte("y"), 256<<10)); err != nil { // past a pipe's buffer
			t.Fatal(err)
		}
		w.Close()
		<-s.Done()
		if s.Err() == nil {
			t.Fatal("Err = nil for a log that could not be opened")
		}
	})
}

// The write end handed to a child is blocking: a child writing faster
// than the copy waits instead of failing with EAGAIN.
func TestMuxWriteEndIsBlocking(t *testing.T) {
	m := newMux(t)
	w, s := add(t, m, filepath.Join(t.TempDir(), "a.log"), DefaultMaxBytes, DefaultBackups)
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	if err := rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Fatal("the write end is non-blocking")
	}
	w.Close()
	<-s.Done()
}
