package gateway

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
)

// TestClosedConnectionIsReleased: once a connection that attached an
// agent has closed, nothing keeps its actor (and the transport's buffers,
// 60 KiB or more) alive, although the agent actor lives on. Protoactor
// keeps a watcher's PID in the watched actor until one of them unwatches
// or the watched actor stops, and a PID caches its process: the agent
// would otherwise keep every connection that ever attached it (the soak
// once found one kept per connection).
func TestClosedConnectionIsReleased(t *testing.T) {
	t.Parallel()
	freed := newSignal()
	tg := startGateway(t, Config{hooks: &testHooks{forgot: func(uint64) { freed.fire() }}})

	reached := make(chan struct{}, 1)
	agentPID := tg.g.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if r, ok := c.Message().(*agent.Request); ok {
			r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil)) // and keeps nothing
			reached <- struct{}{}
		}
	}))
	t.Cleanup(func() { tg.g.sys.Root.Stop(agentPID) })

	conn, writerDone, wp := attachThroughGateway(t, tg, agentPID, reached)
	conn.Close()
	freed.wait(t, "the closed connection's slot")
	select {
	case <-writerDone:
	case <-time.After(30 * time.Second): // a failure bound
		t.Fatal("writer never ended")
	}

	// The connection's goroutines have ended; a few collections let the
	// last of their stacks go.
	for range 20 {
		runtime.GC()
		if wp.Value() == nil {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the closed connection's actor is still reachable (kept by the agent it attached)")
}

// attachThroughGateway opens a unix connection, attaches it to agentPID
// (as the registry and agent would: Routed, then the response) and sends
// one command the connection routes to the agent directly, so that the
// connection watches the agent. It returns a weak pointer to the
// connection actor and keeps no strong reference to it or its PID.
func attachThroughGateway(t *testing.T, tg *testGateway, agentPID *actor.PID, reached <-chan struct{}) (*rawConn, <-chan struct{}, weak.Pointer[connActor]) {
	t.Helper()
	c := tg.dialRaw(t)
	c.mustRead(t) // hello
	tg.g.mu.Lock()
	if len(tg.g.conns) != 1 {
		tg.g.mu.Unlock()
		t.Fatalf("%d connections, want 1", len(tg.g.conns))
	}
	var writerDone <-chan struct{}
	var wp weak.Pointer[connActor]
	for _, a := range tg.g.conns {
		wp = weak.Make(a)
		writerDone = a.writerDone
	}
	tg.g.mu.Unlock()

	c.send(t, `{"type":"agent.attach","id":"1","agent_id":"a-1"}`)
	cmd := tg.next(t)
	tg.g.sys.Root.Send(cmd.Client.PID, &agent.Routed{AgentID: "a-1", PID: agentPID})
	answer(cmd)
	if r := c.mustRead(t); r.ID != "1" || !r.Success {
		t.Fatalf("attach answered %+v", r)
	}
	// After the Routed, so routed directly: the connection watches agentPID.
	c.send(t, `{"type":"prompt","id":"2","agent_id":"a-1","message":"hi"}`)
	select {
	case <-reached:
	case <-time.After(30 * time.Second): // a failure bound
		t.Fatal("the command never reached the agent directly")
	}
	if r := c.mustRead(t); r.ID != "2" || !r.Success {
		t.Fatalf("prompt answered %+v", r)
	}
	return c, writerDone, wp
}
