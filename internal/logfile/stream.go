package logfile

import (
	"errors"
	"os"
)

// Stream is one pipe a Mux copies into a log: the read end of the pipe
// whose write end Add returned. Its methods are safe for concurrent use.
type Stream struct {
	done chan struct{}
	// err is set before done is closed.
	err error
	// stop ends the copy before EOF (Close).
	stop func()
}

// Done is closed once the copy has ended — at EOF (every holder of the
// write end closed it) or after Close — and everything read was written
// and the log file closed.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Err reports, once Done is closed, why some of the input may be missing
// from the log: the log could not be opened (the input was read and
// dropped), a write failed, or the file did not close cleanly. nil before.
func (s *Stream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the copy without waiting for EOF: what the pipe holds now is
// still copied (by a Mux's loop; a nil Mux's goroutine may drop what it
// has not read yet), then the read end and the log are closed and Done is
// closed. For a write end some process keeps open past the point where
// its output still matters (a runtime's exit drain bound). It does not
// wait; Done tells when the copy has ended. Calling it again, or after
// EOF, does nothing.
func (s *Stream) Close() { s.stop() }

// addCopy is Add without a multiplexer: a goroutine of the stream's own
// copies the pipe (Copy), until EOF or until Close closes the read end.
func addCopy(path string, maxBytes int64, keep int) (*os.File, *Stream, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	s := &Stream{done: make(chan struct{}), stop: func() { r.Close() }}
	go func() {
		defer close(s.done)
		if err := Copy(path, maxBytes, keep, r); err != nil && !errors.Is(err, os.ErrClosed) {
			s.err = err
		}
	}()
	return w, s, nil
}

// Ended returns a Stream that has already ended, for an output that goes
// nowhere (no log path): Done is closed and Close does nothing.
func Ended() *Stream {
	s := &Stream{done: make(chan struct{}), stop: func() {}}
	close(s.done)
	return s
}
