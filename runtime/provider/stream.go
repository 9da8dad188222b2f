package provider

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// pump reads one service's wire stream and translates it into Events.
type pump interface {
	// step reads at least one wire event and appends the Events it yields to
	// out. At the normal end of the answer it appends the final events
	// (usage, stop) and returns io.EOF; a stream that ends early returns
	// ErrTruncated or the transport's error.
	step(out []Event) ([]Event, error)
	// close releases the wire stream.
	close() error
}

// stream is the Stream of both providers: a queue of translated events in
// front of a pump, plus the failure and cancellation rules of the package.
type stream struct {
	// classify turns a pump or transport error into a PROVIDER_ERROR.
	classify func(error) error
	// cancel cancels the request's context (derived from the caller's).
	cancel  context.CancelFunc
	closing atomic.Bool // Close was called

	// mu protects the following. Next holds it while it reads the wire, so
	// Close cancels the request first (which unblocks that read) and then
	// takes mu to release the stream.
	mu       sync.Mutex
	src      pump
	queue    []Event
	err      error // terminal result: io.EOF or a PROVIDER_ERROR
	released bool
}

func newStream(src pump, cancel context.CancelFunc, classify func(error) error) *stream {
	return &stream{src: src, cancel: cancel, classify: classify}
}

// Next implements Stream.
func (s *stream) Next() (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 {
		if s.err != nil {
			return Event{}, s.err
		}
		if s.closing.Load() {
			s.finishLocked(ErrStreamClosed)
			continue
		}
		var err error
		s.queue, err = s.src.step(s.queue)
		if err != nil {
			s.finishLocked(err)
		}
	}
	ev := s.queue[0]
	s.queue[0] = Event{}
	s.queue = s.queue[1:]
	return ev, nil
}

// finishLocked records the stream's terminal result and releases it. mu must
// be held.
func (s *stream) finishLocked(err error) {
	switch {
	case err == io.EOF:
		s.err = io.EOF
	case s.closing.Load():
		s.err = s.classify(ErrStreamClosed)
		s.queue = nil
	default:
		s.err = s.classify(err)
	}
	s.releaseLocked()
}

// releaseLocked closes the wire stream once. mu must be held.
func (s *stream) releaseLocked() {
	if s.released {
		return
	}
	s.released = true
	_ = s.src.close() // the answer is complete or abandoned; a close error changes nothing
	s.cancel()
}

// Close implements Stream.
func (s *stream) Close() error {
	s.closing.Store(true)
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.releaseLocked()
	return nil
}
