//go:build !linux

package logfile

import (
	"os"
	"sync"
)

// Mux copies the pipes of many streams into their logs. Off Linux (no
// epoll) it copies each in a goroutine of its own (Copy), as a nil *Mux
// does everywhere. Its methods are safe for concurrent use.
type Mux struct {
	// mu protects the following.
	mu      sync.Mutex
	live    map[*Stream]struct{}
	closing bool
}

// NewMux returns a multiplexer; Close ends it.
func NewMux() (*Mux, error) { return &Mux{live: map[*Stream]struct{}{}}, nil }

// Add returns the write end of a pipe whose input is copied into the log
// at path, rotated past maxBytes with keep older files (see the Linux
// Mux). After Close, Add fails with os.ErrClosed.
func (m *Mux) Add(path string, maxBytes int64, keep int) (*os.File, *Stream, error) {
	if m == nil {
		return addCopy(path, maxBytes, keep)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, nil, os.ErrClosed
	}
	w, s, err := addCopy(path, maxBytes, keep)
	if err != nil {
		return nil, nil, err
	}
	m.live[s] = struct{}{}
	go func() {
		<-s.done
		m.mu.Lock()
		delete(m.live, s)
		m.mu.Unlock()
	}()
	return w, s, nil
}

// Close ends every stream still copied and waits for their copies.
func (m *Mux) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.closing = true
	left := make([]*Stream, 0, len(m.live))
	for s := range m.live {
		left = append(left, s)
	}
	m.mu.Unlock()
	for _, s := range left {
		s.Close()
		<-s.Done()
	}
	return nil
}
