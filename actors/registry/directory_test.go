package registry_test

import (
	"log/slog"
	"testing"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/protocol"
)

// learnedOnly is a directory that lists nothing yet but was told where one
// agent lives (a claimed run's parent, its node carried with the run).
type learnedOnly struct{ id, node string }

func (learnedOnly) Remote() []protocol.AgentInfo             { return nil }
func (learnedOnly) Lookup(string) (protocol.AgentInfo, bool) { return protocol.AgentInfo{}, false }
func (d learnedOnly) NodeOf(id string) (string, bool)        { return d.node, id == d.id }

// TestDelegateToALearnedNode: a child's request for an ancestor this node
// does not host goes to the uplink naming the ancestor's node as the
// directory knows it, its listing or what it learned (NodeOf); an
// ancestor of no known node leaves the child to its headless policy.
func TestDelegateToALearnedNode(t *testing.T) {
	h := startWith(t, slog.New(slog.DiscardHandler), func(d *registry.Deps) { d.Directory = learnedOnly{id: "agent-parent", node: "n1"} })
	up := actortest.NewProbe(t, h.sys, "uplink")
	h.sys.Root.Send(h.reg, &registry.AttachUplink{PID: up.PID})
	child := actortest.NewProbe(t, h.sys, "child")
	child.Send(h.reg, &agent.Route{AgentID: "agent-parent", Msg: &agent.Delegate{RequestID: "r1", Rec: []byte(`{}`), Origin: child.PID}})
	rd := actortest.Expect(t, up, func(m *registry.RemoteDelegate) bool { return m.Msg.RequestID == "r1" })
	if rd.Node != "n1" || rd.AgentID != "agent-parent" {
		t.Fatalf("delegated %+v, want agent-parent on n1", rd)
	}
	child.Send(h.reg, &agent.Route{AgentID: "agent-nobody", Msg: &agent.Delegate{RequestID: "r2", Rec: []byte(`{}`), Origin: child.PID}})
	if res := actortest.Expect(t, child, func(m *agent.DelegateResult) bool { return m.RequestID == "r2" }); res.Accepted {
		t.Fatalf("a request for an ancestor of no known node: %+v, want not accepted", res)
	}
}
