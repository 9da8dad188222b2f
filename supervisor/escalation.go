package supervisor

import "time"

// Action is one step of stopping a runtime process.
type Action int

// Actions of an escalation, in order of force.
const (
	// ActNone means wait: nothing more to do until the process exits.
	ActNone Action = iota
	// ActAbort writes an `abort` command so the current turn ends cleanly.
	ActAbort
	// ActTerm closes the runtime's stdin and sends SIGTERM to its process group.
	ActTerm
	// ActKill sends SIGKILL to the process group.
	ActKill
)

func (a Action) String() string {
	switch a {
	case ActAbort:
		return "abort"
	case ActTerm:
		return "term"
	case ActKill:
		return "kill"
	}
	return "none"
}

// StopMode says how hard a stop starts.
type StopMode int

// Stop modes.
const (
	// StopGraceful is for an inactive runtime (terminate, idle reaping,
	// graceful shutdown): close stdin + SIGTERM, then SIGKILL after TermGrace.
	StopGraceful StopMode = iota
	// StopEscalate is for possibly active work (agent.kill, subagent.stop):
	// abort, wait AbortGrace for idle, then as StopGraceful.
	StopEscalate
	// StopForce kills at once (agent.kill force, daemon.shutdown force).
	StopForce
)

// Escalation is the state of one stop of one runtime process. It is a pure
// state machine: the caller performs the returned Action and, when the
// returned duration is positive, arms a timer that calls Timeout.
//
// The zero value is not useful; use NewEscalation.
type Escalation struct {
	abortGrace, termGrace time.Duration
	stage                 Action
}

// NewEscalation returns an escalation with the configured graces
// (kill.abort_grace, kill.term_grace).
func NewEscalation(abortGrace, termGrace time.Duration) *Escalation {
	return &Escalation{abortGrace: abortGrace, termGrace: termGrace}
}

// Stage returns the last action taken (ActNone before Start).
func (e *Escalation) Stage() Action { return e.stage }

// Start begins a stop in mode m. It returns the first action and how long to
// wait before calling Timeout (0: no timer).
func (e *Escalation) Start(m StopMode) (Action, time.Duration) {
	switch m {
	case StopForce:
		return e.to(ActKill)
	case StopEscalate:
		if e.stage >= ActAbort {
			return ActNone, 0 // already escalating; a second stop is idempotent
		}
		return e.to(ActAbort)
	default:
		if e.stage >= ActTerm {
			return ActNone, 0
		}
		return e.to(ActTerm)
	}
}

// Idle is called when the runtime reports an inactive status while an abort
// is pending: the turn ended, so move on to the graceful stage at once.
func (e *Escalation) Idle() (Action, time.Duration) {
	if e.stage != ActAbort {
		return ActNone, 0
	}
	return e.to(ActTerm)
}

// Timeout is called when the timer of the current stage fires.
func (e *Escalation) Timeout() (Action, time.Duration) {
	switch e.stage {
	case ActAbort:
		return e.to(ActTerm)
	case ActTerm:
		return e.to(ActKill)
	}
	return ActNone, 0
}

func (e *Escalation) to(a Action) (Action, time.Duration) {
	// A stronger stage is never undone by a weaker request.
	if a <= e.stage {
		return ActNone, 0
	}
	// A zero grace skips its stage: nothing would wait for it anyway.
	if a == ActAbort && e.abortGrace <= 0 {
		a = ActTerm
	}
	if a == ActTerm && e.termGrace <= 0 {
		a = ActKill
	}
	e.stage = a
	switch a {
	case ActAbort:
		return a, e.abortGrace
	case ActTerm:
		return a, e.termGrace
	}
	return a, 0
}
