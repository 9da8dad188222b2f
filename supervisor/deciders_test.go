package supervisor_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/supervisor"
)

// recordingSupervisor is an actor.Supervisor that records what a strategy
// asks of it.
type recordingSupervisor struct {
	stopped, restarted, resumed []*actor.PID
	escalated                   int
}

var _ actor.Supervisor = (*recordingSupervisor)(nil)

func (s *recordingSupervisor) Children() []*actor.PID   { return nil }
func (s *recordingSupervisor) EscalateFailure(any, any) { s.escalated++ }
func (s *recordingSupervisor) RestartChildren(p ...*actor.PID) {
	s.restarted = append(s.restarted, p...)
}
func (s *recordingSupervisor) StopChildren(p ...*actor.PID)   { s.stopped = append(s.stopped, p...) }
func (s *recordingSupervisor) ResumeChildren(p ...*actor.PID) { s.resumed = append(s.resumed, p...) }

// TestStopOnFailure checks that a failing child is stopped, never restarted,
// resumed or escalated, whatever the reason and however often it failed.
func TestStopOnFailure(t *testing.T) {
	t.Parallel()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	strategy := supervisor.StopOnFailure()
	for _, reason := range []any{errors.New("boom"), "panic string", 42, nil} {
		sup := &recordingSupervisor{}
		child := actor.NewPID("local", "child")
		rs := actor.NewRestartStatistics()
		strategy.HandleFailure(sys, sup, child, rs, reason, "msg")
		if len(sup.stopped) != 1 || sup.stopped[0] != child {
			t.Errorf("reason %v: stopped %v, want [child]", reason, sup.stopped)
		}
		if len(sup.restarted)+len(sup.resumed)+sup.escalated != 0 {
			t.Errorf("reason %v: restarted %v, resumed %v, escalated %d; want none",
				reason, sup.restarted, sup.resumed, sup.escalated)
		}
	}
}
