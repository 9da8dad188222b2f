package actorref_test

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/actorref"
	"github.com/shard-dev/shard/internal/actortest"
)

// big is an actor with memory worth keeping track of.
type big struct {
	buf     []byte
	release bool
	stopped chan struct{}
}

func (b *big) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopped); ok {
		if b.release {
			actorref.Release(c)
		}
		close(b.stopped)
	}
}

// TestReleaseFreesStoppedActor: a PID held after its actor stopped keeps
// the actor reachable, unless the actor released it when it stopped.
func TestReleaseFreesStoppedActor(t *testing.T) {
	for _, release := range []bool{false, true} {
		sys := actortest.NewSystem()
		held, stopped, w := spawnAndStop(t, sys, release)
		select {
		case <-stopped:
		case <-time.After(30 * time.Second): // a failure bound
			t.Fatal("actor never stopped")
		}
		freed := false
		for range 20 {
			runtime.GC()
			if w.Value() == nil {
				freed = true
				break
			}
			runtime.Gosched()
		}
		if freed != release {
			t.Errorf("release %v: stopped actor freed = %v, want %v", release, freed, release)
		}
		runtime.KeepAlive(held)
	}
}

// spawnAndStop spawns a big actor, asks it to stop and returns its PID (as
// a holder keeps it), a channel closed once it handled Stopped, and a weak
// pointer to it.
func spawnAndStop(t *testing.T, sys *actor.ActorSystem, release bool) (*actor.PID, chan struct{}, weak.Pointer[big]) {
	t.Helper()
	b := &big{buf: make([]byte, 1<<20), release: release, stopped: make(chan struct{})}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b }))
	sys.Root.Send(pid, "resolve the PID once, as every sender does")
	sys.Root.Stop(pid)
	return pid, b.stopped, weak.Make(b)
}
