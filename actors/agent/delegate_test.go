package agent

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// An ancestor that surfaces a descendant's request tells the descendant
// before any client can read the request: a client that answers the moment
// the record is written then reaches a descendant that knows whom to ask
// (else its answer was refused NOT_ATTACHED).
func TestDelegationIsAcceptedBeforeTheClientSeesTheRequest(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	// The descendant runs inline on the sender (a synchronized
	// dispatcher), so what it received is noted by the time Send returns.
	child := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*DelegateResult); ok && m.Accepted {
			note("accepted")
		}
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(300))))

	out := outbox.New(outbox.Limits{})
	out.SetDirect(func(recs [][]byte) int {
		n := 0
		for _, r := range recs {
			note("written")
			n += len(r) + 1
		}
		return n
	})
	a := &Actor{m: store.Agent{AgentID: "agent-parent"}, attached: map[uint64]*attachment{
		1: {client: &Client{ID: 1, Out: out}, role: protocol.RoleInteractive, live: true},
	}, requestState: requestState{foreign: map[string]*foreignRequest{}}}
	done := make(chan struct{})
	host := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*Delegate); ok {
			a.self = c.Self()
			a.onDelegate(c, m)
			close(done)
		}
	}))
	sys.Root.Send(host, &Delegate{RequestID: "req-1", Rec: []byte(`{"type":"permission_request","request_id":"req-1"}`), Origin: child})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the delegation was not handled")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(log) != 2 || log[0] != "accepted" || log[1] != "written" {
		t.Fatalf("order = %v, want [accepted written]", log)
	}
}
