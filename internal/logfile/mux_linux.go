package logfile

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// muxDrainMax bounds what a forced end (Stream.Close, Mux.Close) still
// copies from one pipe: what a pipe holds (64 KiB by default) and some, so
// that a writer that keeps writing cannot hold the loop.
const muxDrainMax = 1 << 20

// Mux copies the pipes of many streams into their logs with one goroutine
// for all of them: an epoll loop over the pipes' read ends, reading into
// one shared buffer, writing each read whole into the stream's File. A
// runtime's stderr log then costs the daemon a registration instead of a
// goroutine of its own. A nil *Mux copies each stream in a goroutine of its
// own (Copy). Its methods are safe for concurrent use.
//
// Writes to the files are synchronous in the loop: a slow disk delays
// every stream's copy, and a writer blocks only once its pipe's buffer is
// full, as with a goroutine per stream.
type Mux struct {
	epfd, wake int // the epoll instance and the eventfd that wakes it
	ended      chan struct{}
	buf        []byte // the loop's

	// mu protects the following.
	mu sync.Mutex
	// regs are the streams being copied, by their read end.
	regs map[int]*muxReg
	// stops are streams to end before EOF (Stream.Close).
	stops []*muxReg
	// closing refuses Add: Close was called or the loop failed.
	closing bool
	// shut is set once Close closed epfd and wake.
	shut bool
}

// muxReg is one stream: all but stopped are the loop's.
type muxReg struct {
	fd   int   // the pipe's read end, non-blocking
	f    *File // nil when the log could not be opened: input is dropped
	max  int64
	werr error
	s    *Stream

	stopped bool // mu protects it
}

// NewMux starts a multiplexer; Close ends it.
func NewMux() (*Mux, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("log mux: epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("log mux: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, fmt.Errorf("log mux: epoll add: %w", err)
	}
	m := &Mux{epfd: epfd, wake: wake, ended: make(chan struct{}), buf: make([]byte, 32<<10), regs: map[int]*muxReg{}}
	go m.loop()
	return m, nil
}

// Add opens the log at path (as Open does, rotated past maxBytes with
// keep older files) and returns the write end of a pipe whose input the
// Mux copies into it, each read (at most maxBytes) whole into one file.
// The write end is blocking, for a child to hold as its stderr; the caller
// closes its own copy once the child has it. A log that cannot be opened
// does not fail Add: the input is read and dropped, and the Stream's Err
// tells. After Close, Add fails with os.ErrClosed.
func (m *Mux) Add(path string, maxBytes int64, keep int) (*os.File, *Stream, error) {
	if m == nil {
		return addCopy(path, maxBytes, keep)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("log pipe: %w", err)
	}
	// Only the read end is non-blocking: the file descriptions of the two
	// ends are distinct, so the writer never sees EAGAIN.
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, fmt.Errorf("log pipe: %w", err)
	}
	f, oerr := Open(path, maxBytes, keep)
	r := &muxReg{fd: p[0], f: f, max: max(maxBytes, 1), s: &Stream{done: make(chan struct{}), err: oerr}}
	r.s.stop = func() { m.stop(r) }
	m.mu.Lock()
	err := os.ErrClosed
	if !m.closing {
		m.regs[r.fd] = r
		// Level-triggered: the loop reads once per readiness, so that no
		// stream starves the others, and epoll reports the rest again.
		err = unix.EpollCtl(m.epfd, unix.EPOLL_CTL_ADD, r.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.fd)})
		if err != nil {
			delete(m.regs, r.fd)
		}
	}
	m.mu.Unlock()
	if err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		if f != nil {
			f.Close()
		}
		return nil, nil, fmt.Errorf("log mux: %w", err)
	}
	return os.NewFile(uintptr(p[1]), "|1"), r.s, nil
}

// Close ends every stream still copied (as Stream.Close does) and the
// loop, and waits for it. Later Adds fail; Close again does nothing.
func (m *Mux) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.closing = true
	m.wakeLocked()
	m.mu.Unlock()
	<-m.ended
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shut {
		return nil
	}
	m.shut = true
	return errors.Join(unix.Close(m.wake), unix.Close(m.epfd))
}

// stop asks the loop to end r before EOF.
func (m *Mux) stop(r *muxReg) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked(r)
}

// stopLocked is stop. mu must be held.
func (m *Mux) stopLocked(r *muxReg) {
	if r.stopped {
		return
	}
	r.stopped = true
	m.stops = append(m.stops, r)
	m.wakeLocked()
}

// wakeLocked wakes the loop. mu must be held (Close closes the eventfd
// under it, so its number is never written once reused).
func (m *Mux) wakeLocked() {
	if m.shut {
		return
	}
	one := [8]byte{1}
	_, _ = unix.Write(m.wake, one[:]) // EAGAIN: the counter is full, the loop is woken anyway
}

// loop copies what the pipes have until Close.
func (m *Mux) loop() {
	defer close(m.ended)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(m.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Cannot happen with a valid epfd; end every stream rather
			// than leave their Done open forever.
			m.mu.Lock()
			m.closing = true
			m.mu.Unlock()
			m.endAll()
			return
		}
		woken := false
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == m.wake {
				woken = true
				continue
			}
			m.mu.Lock()
			r := m.regs[fd]
			m.mu.Unlock()
			if r != nil && !m.readOnce(r) {
				m.finish(r)
			}
		}
		if !woken {
			continue
		}
		var cnt [8]byte
		_, _ = unix.Read(m.wake, cnt[:])
		m.mu.Lock()
		stops, closing := m.stops, m.closing
		m.stops = nil
		for i, r := range stops {
			if m.regs[r.fd] != r {
				stops[i] = nil // already ended at EOF
			}
		}
		m.mu.Unlock()
		for _, r := range stops {
			if r != nil {
				m.drain(r)
				m.finish(r)
			}
		}
		if closing {
			m.endAll()
			return
		}
	}
}

// endAll ends every stream left, copying what its pipe holds first.
func (m *Mux) endAll() {
	m.mu.Lock()
	left := make([]*muxReg, 0, len(m.regs))
	for _, r := range m.regs {
		left = append(left, r)
	}
	m.mu.Unlock()
	for _, r := range left {
		m.drain(r)
		m.finish(r)
	}
}

// readOnce copies one read of r's pipe into its log. It reports false
// when the stream has ended: EOF, or a read error other than EAGAIN/EINTR.
func (m *Mux) readOnce(r *muxReg) bool {
	n, err := unix.Read(r.fd, m.buf[:min(r.max, int64(len(m.buf)))])
	if n > 0 {
		if r.f != nil {
			if _, err := r.f.Write(m.buf[:n]); err != nil && r.werr == nil {
				// The read is dropped and the copy goes on, so that the
				// writer never blocks on a full pipe because the disk is.
				r.werr = err
			}
		}
		return true
	}
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return true
	}
	if err != nil && r.werr == nil {
		r.werr = fmt.Errorf("log pipe: %w", err)
	}
	return false // n == 0: EOF
}

// drain copies what r's pipe holds now, up to muxDrainMax, without
// waiting for more.
func (m *Mux) drain(r *muxReg) {
	for got := 0; got < muxDrainMax; {
		n, err := unix.Read(r.fd, m.buf[:min(r.max, int64(len(m.buf)))])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n <= 0 {
			return
		}
		got += n
		if r.f != nil {
			if _, err := r.f.Write(m.buf[:n]); err != nil && r.werr == nil {
				r.werr = err
			}
		}
	}
}

// finish ends r: out of the epoll set and the table (before its read end
// is closed, so that a new stream reusing the number is never taken for
// it), the pipe and the log closed, then Done.
func (m *Mux) finish(r *muxReg) {
	_ = unix.EpollCtl(m.epfd, unix.EPOLL_CTL_DEL, r.fd, nil)
	m.mu.Lock()
	delete(m.regs, r.fd)
	r.stopped = true // a later Stream.Close has nothing to do
	m.mu.Unlock()
	unix.Close(r.fd)
	var cerr error
	if r.f != nil {
		cerr = r.f.Close()
	}
	r.s.err = errors.Join(r.s.err, r.werr, cerr)
	close(r.s.done)
}
