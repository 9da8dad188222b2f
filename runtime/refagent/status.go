package refagent

import (
	"time"

	"github.com/shard-dev/shard/protocol"
)

// agentStatus is the agent's status (idle, streaming, waiting for an
// answer, compacting, error) and the idle-trim timer that follows it
// (Options.Trim): an agent that stays idle for Options.TrimAfter gives the
// pages its work touched back to the kernel.
//
// runtime.mu protects every field; the methods ending in Locked must be
// called with it held, so that a status change and its status event are
// one step for get_sync.
type agentStatus struct {
	out   *output
	cur   protocol.AgentStatus
	trim  func()        // Options.Trim; nil: no trimming
	after time.Duration // Options.TrimAfter
	timer *time.Timer   // armed while idle
	// stopped: shutdown began, the timer is never armed again.
	stopped bool
}

func newAgentStatus(out *output, trim func(), after time.Duration) *agentStatus {
	return &agentStatus{out: out, cur: protocol.StatusIdle, trim: trim, after: after}
}

// setLocked changes the status and announces a real change.
func (s *agentStatus) setLocked(st protocol.AgentStatus) {
	if s.cur == st {
		return
	}
	s.cur = st
	s.out.emit(protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus}, Status: st})
	s.armLocked()
}

// retryingLocked announces a provider retry of the turn in flight.
func (s *agentStatus) retryingLocked() {
	s.out.emit(protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus}, Status: s.cur, Detail: protocol.StatusDetailRetrying})
}

// armLocked starts the idle-trim timer when the agent is idle and stops it
// otherwise. A timer that fires just as a turn starts trims anyway:
// harmless, the pages fault back in.
func (s *agentStatus) armLocked() {
	if s.trim == nil {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.cur == protocol.StatusIdle && !s.stopped {
		s.timer = time.AfterFunc(s.after, s.trim)
	}
}

// stopLocked stops the idle-trim timer for good (shutdown).
func (s *agentStatus) stopLocked() {
	s.stopped = true
	s.armLocked()
}
