package actortest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/supervisor"
)

// Timeout bounds every wait of the kit: a message, a record or a state that
// has not come within it fails the test. It is generous because the machine
// running the tests may be loaded; a passing test never waits for it.
const Timeout = 20 * time.Second

// NewSystem returns an actor system for one test, logging nothing (its
// messages would only be noise in test output). A system has nothing to
// stop itself (protoactor's Shutdown only closes a channel); the actors a
// test spawns are stopped by their probes' cleanups.
func NewSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(Discard))
}

// Probe is an actor that records every message it receives, in order, for
// the test to read: it stands in for a connection (its PID is a client's
// PID, whose termination detaches the client), for a parent (children it
// spawns with Spawn send it InfoChanged, Drained, Route) and for the holder
// of a subagent lease. Its children fail by stopping (as the registry's do).
//
// A Probe is safe for concurrent use; the messages it records are read by
// one test goroutine.
type Probe struct {
	// PID is the probe actor.
	PID *actor.PID
	sys *actor.ActorSystem

	// mu protects msgs.
	mu   sync.Mutex
	msgs []any
	// more has a token when msgs grew since the reader last looked.
	more chan struct{}
}

// NewProbe spawns a probe named name on sys. t.Cleanup stops it, and with
// it every child it spawned, waiting until they are gone.
func NewProbe(t testing.TB, sys *actor.ActorSystem, name string) *Probe {
	t.Helper()
	p := &Probe{sys: sys, more: make(chan struct{}, 1)}
	props := actor.PropsFromProducer(func() actor.Actor { return probeActor{p} },
		actor.WithSupervisor(supervisor.StopOnFailure()))
	pid, err := sys.Root.SpawnNamed(props, name)
	if err != nil {
		t.Fatalf("spawn probe %s: %v", name, err)
	}
	p.PID = pid
	t.Cleanup(func() {
		// Children stop first (their runtimes killed on the way): when the
		// future completes, nothing the probe spawned is left.
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Errorf("stop probe %s: %v", name, err)
		}
	})
	return p
}

// Spawn spawns props as a child of the probe, named name, and returns its
// PID: the child's Parent() is the probe.
func (p *Probe) Spawn(t testing.TB, props *actor.Props, name string) *actor.PID {
	t.Helper()
	res, err := p.sys.Root.RequestFuture(p.PID, &spawnChild{props: props, name: name}, Timeout).Result()
	if err != nil {
		t.Fatalf("spawn %s under probe: %v", name, err)
	}
	s := res.(*spawned)
	if s.err != nil {
		t.Fatalf("spawn %s under probe: %v", name, s.err)
	}
	return s.pid
}

// Send delivers msg to target with the probe as its sender, so that an
// actor answering c.Sender() answers the probe.
func (p *Probe) Send(target *actor.PID, msg any) {
	p.sys.Root.Send(p.PID, &sendAs{to: target, msg: msg})
}

// Expect waits for a message of type T that pred accepts (nil accepts any)
// and returns it. The messages of type T before it are consumed with it;
// messages of other types stay recorded, in order, for later Expects. It
// fails the test after Timeout.
func Expect[T any](t testing.TB, p *Probe, pred func(T) bool) T {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	isT := func(m any) bool { _, ok := m.(T); return ok }
	hit := func(m any) bool { v, ok := m.(T); return ok && (pred == nil || pred(v)) }
	for {
		if m, ok := p.take(isT, hit); ok {
			return m.(T)
		}
		select {
		case <-p.more:
		case <-deadline.C:
			var zero T
			t.Fatalf("probe %s: no matching %T within %s; recorded: %s", p.PID.Id, zero, Timeout, p.describe())
			return zero
		}
	}
}

// None reports whether no message of type T is recorded now (a check of
// what has arrived, not a wait).
func None[T any](p *Probe) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.msgs {
		if _, ok := m.(T); ok {
			return false
		}
	}
	return true
}

// take removes the first message hit accepts, and every message before it
// of the same kind (isT).
func (p *Probe) take(isT, hit func(any) bool) (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.msgs {
		if !hit(m) {
			continue
		}
		var kept []any
		for _, o := range p.msgs[:i] {
			if !isT(o) {
				kept = append(kept, o)
			}
		}
		p.msgs = append(kept, p.msgs[i+1:]...)
		return m, true
	}
	return nil, false
}

func (p *Probe) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := ""
	for i, m := range p.msgs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%T", m)
	}
	return "[" + s + "]"
}

func (p *Probe) record(m any) {
	p.mu.Lock()
	p.msgs = append(p.msgs, m)
	p.mu.Unlock()
	select {
	case p.more <- struct{}{}:
	default:
	}
}

// The probe's own control messages.
type (
	spawnChild struct {
		props *actor.Props
		name  string
	}
	spawned struct {
		pid *actor.PID
		err error
	}
	sendAs struct {
		to  *actor.PID
		msg any
	}
)

type probeActor struct{ p *Probe }

// Receive implements actor.Actor: control messages are obeyed, lifecycle
// messages of the probe itself ignored, everything else recorded.
func (a probeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *spawnChild:
		pid, err := c.SpawnNamed(m.props, m.name)
		c.Respond(&spawned{pid: pid, err: err})
	case *sendAs:
		c.Request(m.to, m.msg)
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		a.p.record(m)
	}
}
