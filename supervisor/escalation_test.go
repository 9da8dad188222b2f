package supervisor_test

import (
	"testing"
	"time"

	"github.com/shard-dev/shard/supervisor"
)

const (
	abortGrace = 5 * time.Second
	termGrace  = 10 * time.Second
)

// event is one input to an Escalation.
type event int

const (
	startGraceful event = iota
	startEscalate
	startForce
	timeout
	idle
)

func (e event) String() string {
	return [...]string{"Start(graceful)", "Start(escalate)", "Start(force)", "Timeout", "Idle"}[e]
}

// step is an input and the action and timer it must produce.
type step struct {
	in    event
	act   supervisor.Action
	after time.Duration
}

func apply(e *supervisor.Escalation, in event) (supervisor.Action, time.Duration) {
	switch in {
	case startGraceful:
		return e.Start(supervisor.StopGraceful)
	case startEscalate:
		return e.Start(supervisor.StopEscalate)
	case startForce:
		return e.Start(supervisor.StopForce)
	case timeout:
		return e.Timeout()
	default:
		return e.Idle()
	}
}

func TestEscalation(t *testing.T) {
	t.Parallel()
	none := supervisor.ActNone
	tests := []struct {
		name  string
		steps []step
	}{
		{"graceful: term, then kill after TermGrace", []step{
			{startGraceful, supervisor.ActTerm, termGrace},
			{timeout, supervisor.ActKill, 0},
			{timeout, none, 0},
		}},
		{"escalate: abort, term, kill on timeouts", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{timeout, supervisor.ActTerm, termGrace},
			{timeout, supervisor.ActKill, 0},
			{timeout, none, 0},
		}},
		{"escalate: idle after abort moves to term at once", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{idle, supervisor.ActTerm, termGrace},
			{idle, none, 0}, // only meaningful while an abort is pending
			{timeout, supervisor.ActKill, 0},
		}},
		{"escalate: the abort timer is stale once idle moved on", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{idle, supervisor.ActTerm, termGrace},
			{timeout, supervisor.ActKill, 0}, // the term timer
			{timeout, none, 0},
		}},
		{"force: kill at once", []step{
			{startForce, supervisor.ActKill, 0},
			{timeout, none, 0},
			{idle, none, 0},
		}},
		{"graceful twice is idempotent", []step{
			{startGraceful, supervisor.ActTerm, termGrace},
			{startGraceful, none, 0},
			{timeout, supervisor.ActKill, 0},
		}},
		{"escalate twice is idempotent", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{startEscalate, none, 0},
			{timeout, supervisor.ActTerm, termGrace},
			{startEscalate, none, 0},
		}},
		{"force twice is idempotent", []step{
			{startForce, supervisor.ActKill, 0},
			{startForce, none, 0},
		}},
		{"force after graceful kills", []step{
			{startGraceful, supervisor.ActTerm, termGrace},
			{startForce, supervisor.ActKill, 0},
			{timeout, none, 0}, // the stale term timer
		}},
		{"force after escalate kills", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{startForce, supervisor.ActKill, 0},
			{idle, none, 0},
			{timeout, none, 0},
		}},
		{"graceful after escalate skips the rest of the abort wait", []step{
			{startEscalate, supervisor.ActAbort, abortGrace},
			{startGraceful, supervisor.ActTerm, termGrace},
			{timeout, supervisor.ActKill, 0},
		}},
		{"graceful after force does nothing", []step{
			{startForce, supervisor.ActKill, 0},
			{startGraceful, none, 0},
		}},
		{"escalate after force does nothing", []step{
			{startForce, supervisor.ActKill, 0},
			{startEscalate, none, 0},
		}},
		{"escalate after graceful never goes back to abort", []step{
			{startGraceful, supervisor.ActTerm, termGrace},
			{startEscalate, none, 0},
			{idle, none, 0},
			{timeout, supervisor.ActKill, 0},
		}},
		{"timeout and idle before start do nothing", []step{
			{timeout, none, 0},
			{idle, none, 0},
			{startGraceful, supervisor.ActTerm, termGrace},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := supervisor.NewEscalation(abortGrace, termGrace)
			if e.Stage() != supervisor.ActNone {
				t.Fatalf("new Escalation at stage %s", e.Stage())
			}
			highest := supervisor.ActNone
			for i, s := range tt.steps {
				act, after := apply(e, s.in)
				if act != s.act || after != s.after {
					t.Fatalf("step %d %s = (%s, %v), want (%s, %v)", i, s.in, act, after, s.act, s.after)
				}
				if act != supervisor.ActNone {
					highest = act
				}
				// Stage is the strongest action taken so far; it never goes back.
				if e.Stage() != highest {
					t.Fatalf("after step %d %s: Stage = %s, want %s", i, s.in, e.Stage(), highest)
				}
			}
		})
	}
}

// TestEscalationMonotonic drives every sequence of up to five inputs and
// checks the invariants that make the machine safe to feed stale timers and
// repeated requests: each action is stronger than the last, kill is final,
// and a timer is armed exactly for abort and term.
func TestEscalationMonotonic(t *testing.T) {
	t.Parallel()
	inputs := []event{startGraceful, startEscalate, startForce, timeout, idle}
	var walk func(prefix []event)
	walk = func(prefix []event) {
		if len(prefix) == 5 {
			return
		}
		for _, in := range inputs {
			seq := append(prefix[:len(prefix):len(prefix)], in)
			e := supervisor.NewEscalation(abortGrace, termGrace)
			last := supervisor.ActNone
			for _, s := range seq {
				act, after := apply(e, s)
				if act == supervisor.ActNone {
					if after != 0 {
						t.Fatalf("%v: no action but a %v timer", seq, after)
					}
					continue
				}
				if act <= last {
					t.Fatalf("%v: %s after %s", seq, act, last)
				}
				want := map[supervisor.Action]time.Duration{supervisor.ActAbort: abortGrace, supervisor.ActTerm: termGrace, supervisor.ActKill: 0}[act]
				if after != want {
					t.Fatalf("%v: %s with timer %v, want %v", seq, act, after, want)
				}
				last = act
			}
			walk(seq)
		}
	}
	walk(nil)
}

func TestActionString(t *testing.T) {
	t.Parallel()
	for a, want := range map[supervisor.Action]string{
		supervisor.ActNone: "none", supervisor.ActAbort: "abort", supervisor.ActTerm: "term",
		supervisor.ActKill: "kill", supervisor.Action(42): "none",
	} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestZeroGraceSkipsItsStage(t *testing.T) {
	// kill.abort_grace 0: an escalating stop goes straight to term.
	e := supervisor.NewEscalation(0, time.Second)
	if act, wait := e.Start(supervisor.StopEscalate); act != supervisor.ActTerm || wait != time.Second {
		t.Fatalf("Start(escalate) with no abort grace = %v, %v; want term, 1s", act, wait)
	}
	// kill.term_grace 0: a graceful stop goes straight to kill.
	e = supervisor.NewEscalation(time.Second, 0)
	if act, wait := e.Start(supervisor.StopGraceful); act != supervisor.ActKill || wait != 0 {
		t.Fatalf("Start(graceful) with no term grace = %v, %v; want kill", act, wait)
	}
	e = supervisor.NewEscalation(time.Second, 0)
	e.Start(supervisor.StopEscalate)
	if act, _ := e.Timeout(); act != supervisor.ActKill {
		t.Fatalf("abort timeout with no term grace = %v, want kill", act)
	}
}
