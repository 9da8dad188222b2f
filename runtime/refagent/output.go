package refagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// output is the runtime's Stdout: every event and response leaves through
// it, one record per Write. It stops writing for good after the first
// failed write (the peer is gone, and the run is cancelled with the error)
// and after `sim: hang` (nothing is written or answered again).
//
// output's own lock only keeps its records whole and its fields
// consistent. The order of records is the runtime's: every write that
// announces state is made with runtime.mu held, in the same critical
// section as the state change (see runtime). Lock order: runtime.mu before
// output.mu; output calls nothing else while it holds its lock but Stdout's
// Write and the run's cancel.
type output struct {
	w      io.Writer
	log    *slog.Logger
	cancel context.CancelCauseFunc // ends the run when a write fails

	// mu protects the following and serialises the writes to w.
	mu   sync.Mutex
	hung bool  // `sim: hang` ran
	err  error // first write failure; nothing is written after it
}

func newOutput(w io.Writer, log *slog.Logger, cancel context.CancelCauseFunc) *output {
	return &output{w: w, log: log, cancel: cancel}
}

// emit writes one typed message.
func (o *output) emit(v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		o.log.Error("encode message", slog.Any("err", err))
		return
	}
	o.write(b)
}

// write writes one encoded record and its newline in a single Write.
// A write failure is remembered and ends the run: the peer is gone.
func (o *output) write(rec []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hung || o.err != nil {
		return
	}
	line := make([]byte, len(rec)+1)
	copy(line, rec)
	line[len(rec)] = '\n'
	if _, err := o.w.Write(line); err != nil {
		o.err = fmt.Errorf("agent: write stdout: %w", err)
		o.log.Error("stdout write failed; stopping", slog.Any("err", err))
		o.cancel(o.err)
	}
}

// respond answers the command of h with data.
func (o *output) respond(h protocol.Header, data any) {
	o.write(protocol.NewResponse(h.ID, h.Type, data))
}

// respondErr answers the command of h with err.
func (o *output) respondErr(h protocol.Header, err error) {
	o.write(protocol.NewErrorResponse(h.ID, h.Type, err))
}

// hang stops all output for good (`sim: hang`).
func (o *output) hang() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hung = true
}

// isHung reports whether hang ran: commands are then left unanswered.
func (o *output) isHung() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hung
}

// failure returns the Stdout write failure, if any.
func (o *output) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
