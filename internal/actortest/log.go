package actortest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// Discard is an actor.WithLoggerFactory factory that drops protoactor's own
// logging.
func Discard(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }

// Log is a debug-level text logger for the actors under test whose output
// is kept in memory: a test can look for a line in it, and a failed test
// prints it. Actors may log after the test has ended, which writing to t
// directly would not allow.
type Log struct {
	// Logger writes to the buffer.
	Logger *slog.Logger

	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewLog returns a Log whose content t prints if it fails.
func NewLog(t testing.TB) *Log {
	l := &Log{}
	l.Logger = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("actor log:\n%s", l.String())
		}
	})
	return l
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Contains reports whether s has been logged.
func (l *Log) Contains(s string) bool { return strings.Contains(l.String(), s) }
