package actortest_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, actortest.LeakOptions()...) }

type ping struct{ n int }
type pong struct{ n int }

// TestProbeExpect: Expect takes the first matching message of its type,
// dropping the earlier ones of that type only; Send makes the probe the
// sender; Spawn makes it the parent.
func TestProbeExpect(t *testing.T) {
	sys := actortest.NewSystem()
	p := actortest.NewProbe(t, sys, "p")
	for i := range 3 {
		sys.Root.Send(p.PID, &ping{i})
	}
	sys.Root.Send(p.PID, &pong{7})
	if got := actortest.Expect(t, p, func(m *ping) bool { return m.n == 1 }); got.n != 1 {
		t.Fatalf("got ping %d", got.n)
	}
	if got := actortest.Expect[*pong](t, p, nil); got.n != 7 {
		t.Fatalf("got pong %d", got.n)
	}
	if got := actortest.Expect[*ping](t, p, nil); got.n != 2 {
		t.Fatalf("got ping %d, want 2 (0 was consumed with 1)", got.n)
	}
	if !actortest.None[*ping](p) {
		t.Fatal("pings left")
	}

	// A child that echoes to its parent whatever it gets from its sender.
	child := p.Spawn(t, echoProps(), "child")
	p.Send(child, &ping{9})
	if got := actortest.Expect[*pong](t, p, nil); got.n != 9 {
		t.Fatalf("echo %d", got.n)
	}
}

// TestReaderTakeKeepsOthers: Take leaves the records it skips queued, in
// order; Expect consumes them.
func TestReaderTakeKeepsOthers(t *testing.T) {
	o := outbox.New(outbox.Limits{})
	r := actortest.NewReader("r", o)
	o.Push([]byte(`{"type":"status","status":"streaming"}`))
	o.Push([]byte(`{"type":"response","id":"x","command":"prompt","success":true}`))
	o.Push([]byte(`{"type":"turn_end"}`))
	if resp := r.Take(t, actortest.ResponseTo("x")).Response(t); !resp.Success || resp.ID != "x" {
		t.Fatalf("response %+v", resp)
	}
	rec, before := r.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	if rec.Type != protocol.TypeTurnEnd || len(before) != 1 || before[0].Type != protocol.TypeStatus {
		t.Fatalf("got %s after %v", rec.Raw, before)
	}
	if q := r.Queued(t); len(q) != 0 {
		t.Fatalf("%d records left", len(q))
	}
}

// TestProcessState reads this process's own state.
func TestProcessState(t *testing.T) {
	if !actortest.Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	if actortest.Ignores(os.Getpid(), syscall.SIGTERM) {
		t.Fatal("the test binary ignores SIGTERM")
	}
}

// echoProps is an actor that answers a ping from its sender with a pong to
// its parent.
func echoProps() *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok && c.Sender() != nil {
			c.Send(c.Parent(), &pong{m.n})
		}
	})
}
