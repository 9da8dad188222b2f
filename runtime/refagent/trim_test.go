package refagent

import (
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// Trim runs once the runtime has been idle for TrimAfter: after startup,
// and again after a turn has ended in idle — never while the turn runs
// (the turn below waits on a permission answer far longer than TrimAfter).
func TestTrimRunsWhenIdle(t *testing.T) {
	trims := make(chan struct{}, 8)
	h := start(t, func(o *Options) {
		o.TrimAfter = 10 * time.Millisecond
		o.Trim = func() { trims <- struct{}{} }
	})
	h.handshake()
	select {
	case <-trims:
	case <-time.After(waitTimeout):
		t.Fatal("no trim after startup")
	}

	// A turn that parks on a permission request: the runtime is busy, and
	// stays busy for many times TrimAfter without a trim.
	req, _ := startWrite(t, h, "denied.txt", "x")
	select {
	case <-trims:
		t.Fatal("trimmed while a turn was running")
	case <-time.After(20 * 10 * time.Millisecond):
	}
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, ChoiceID: "deny"})
	h.untilIdle()
	select {
	case <-trims:
	case <-time.After(waitTimeout):
		t.Fatal("no trim after the turn ended")
	}
}
