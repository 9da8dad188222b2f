package agent_test

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// An agent reports whether it is idle (InfoChanged.Idle) as that changes;
// asked to passivate while busy (a runtime, an attachment) it answers
// PassivateBusy and stays; once idle again it stops itself.
func TestActorLevelPassivate(t *testing.T) {
	f := newAgent(t) // it announced itself idle (newAgent took that InfoChanged)

	c := f.conn("unix")
	f.create(c) // a runtime runs
	actortest.Expect(t, f.parent, func(m *agent.InfoChanged) bool { return !m.Idle })
	f.parent.Send(f.pid, &agent.Passivate{})
	if m := actortest.Expect(t, f.parent, func(*agent.PassivateBusy) bool { return true }); m.AgentID != f.m.AgentID {
		t.Fatalf("PassivateBusy = %+v", m)
	}

	f.attach(c, "")
	resp := f.call(c, &protocol.AgentTerminate{Header: f.header(protocol.TypeAgentTerminate, "t1")})
	if !resp.Success {
		t.Fatalf("agent.terminate: %+v", resp.Error)
	}
	f.statusChanged(protocol.RuntimeStopped)
	// Still attached: busy.
	f.parent.Send(f.pid, &agent.Passivate{})
	actortest.Expect(t, f.parent, func(*agent.PassivateBusy) bool { return true })

	if resp := f.call(c, &protocol.AgentDetach{Header: f.header(protocol.TypeAgentDetach, "d1")}); !resp.Success {
		t.Fatalf("agent.detach: %+v", resp.Error)
	}
	actortest.Expect(t, f.parent, func(m *agent.InfoChanged) bool {
		return m.Idle && m.Info.RuntimeState == protocol.RuntimeStopped && m.Attachments == 0
	})
	f.parent.Send(f.pid, &agent.Passivate{})
	if m := actortest.Expect(t, f.parent, func(m *actor.Terminated) bool { return m.Who.Equal(f.pid) }); m == nil {
		t.Fatal("no Terminated")
	}
	if !actortest.None[*agent.PassivateBusy](f.parent) {
		t.Fatal("an idle agent answered PassivateBusy")
	}
}

// A connection whose agent.attach failed (here: the runtime cannot start)
// was told Routed and still sends to the agent directly: the agent stays
// busy until that connection detaches.
func TestActorLevelPassivateWaitsForARoutedConnection(t *testing.T) {
	f := newAgent(t, func(d *agent.Deps, _ *store.Agent) { d.Runtime.Path, d.Runtime.Args = "/bin/false", nil })
	c := f.conn("unix")
	resp := f.call(c, &protocol.AgentAttach{Header: f.header(protocol.TypeAgentAttach, "a1")})
	if resp.Success {
		t.Fatal("agent.attach with a runtime that cannot start succeeded")
	}
	f.info(runtimeState(protocol.RuntimeFailed))
	f.parent.Send(f.pid, &agent.Passivate{})
	actortest.Expect(t, f.parent, func(*agent.PassivateBusy) bool { return true })

	if resp := f.call(c, &protocol.AgentDetach{Header: f.header(protocol.TypeAgentDetach, "d1")}); !resp.Success {
		t.Fatalf("agent.detach: %+v", resp.Error)
	}
	actortest.Expect(t, f.parent, func(m *agent.InfoChanged) bool { return m.Idle })
	f.parent.Send(f.pid, &agent.Passivate{})
	actortest.Expect(t, f.parent, func(m *actor.Terminated) bool { return m.Who.Equal(f.pid) })
}
