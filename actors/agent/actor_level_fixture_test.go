package agent_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// fixture is one agent actor under test: spawned by a probe standing in
// for the registry (its parent), running the real runtime, broadcasting
// to a Hub the test watches.
type fixture struct {
	t      *testing.T
	sys    *actor.ActorSystem
	parent *actortest.Probe
	hub    *actortest.Reader
	log    *actortest.Log
	m      store.Agent
	pid    *actor.PID
	nextID uint64
}

// setup adjusts the agent's dependencies and manifest before it starts.
type setup func(*agent.Deps, *store.Agent)

// withClock runs the agent's timers on clk.
func withClock(clk clock.Clock) setup {
	return func(d *agent.Deps, _ *store.Agent) { d.Clock = clk }
}

// newAgent starts an agent actor with no runtime yet. The cleanups stop
// the connections, then the parent and with it the agent, and check that
// no runtime process of the agent is left.
func newAgent(t *testing.T, setups ...setup) *fixture {
	t.Helper()
	m := store.Agent{AgentID: ids.New(ids.Agent), SessionID: ids.New(ids.Session), Cwd: t.TempDir(),
		CreatedAt: time.Now().UnixMilli()}
	t.Cleanup(func() {
		actortest.Eventually(t, "no runtime process of the agent left", func() bool {
			return len(actortest.RuntimePIDs(t, m.AgentID)) == 0
		})
	})
	rc := actortest.RuntimeConfig(t, shardd)
	rc.StartTimeout = actortest.Timeout
	rc.AbortGrace, rc.TermGrace = 2*time.Second, 2*time.Second
	hub := outbox.NewHub()
	log := actortest.NewLog(t)
	// Closed after the probes' cleanups (registered later, run earlier)
	// have stopped the agent and its runtime.
	group := &xsync.Group{}
	t.Cleanup(group.Close)
	deps := agent.Deps{Runtime: rc, Hub: hub, Logger: log.Logger, Goroutines: group}
	for _, s := range setups {
		s(&deps, &m)
	}
	f := &fixture{t: t, sys: actortest.NewSystem(), hub: actortest.WatchHub(t, hub), log: log, m: m}
	f.parent = actortest.NewProbe(t, f.sys, "registry")
	f.pid = f.parent.Spawn(t, agent.Props(m, deps), m.AgentID)
	// The agent announces itself to its parent as it starts: no runtime.
	if info := f.info(nil); info.AgentID != m.AgentID || info.RuntimeState != protocol.RuntimeStopped {
		t.Fatalf("first InfoChanged = %+v, want agent %s stopped", info, m.AgentID)
	}
	return f
}

// conn returns a new connection of transport source.
func (f *fixture) conn(source string) *actortest.Conn {
	f.nextID++
	return actortest.NewConn(f.t, f.sys, f.nextID, source)
}

// send delivers cmd from c to the agent, as the registry routes it.
func (f *fixture) send(c *actortest.Conn, cmd protocol.Command) {
	f.t.Helper()
	f.sys.Root.Send(f.pid, c.Request(f.t, cmd))
}

// header is the envelope of a command with client id id to this agent.
func (f *fixture) header(typ, id string) protocol.Header {
	return protocol.Header{Type: typ, ID: id, AgentID: f.m.AgentID}
}

// call sends cmd (whose id must be set) and returns its response; the
// events that overtook it stay queued on c.
func (f *fixture) call(c *actortest.Conn, cmd protocol.Command) protocol.Response {
	f.t.Helper()
	f.send(c, cmd)
	return c.Take(f.t, actortest.ResponseTo(cmd.Head().ID)).Response(f.t)
}

// create sends agent.create and checks it is answered, once the runtime is
// ready, with the agent's id.
func (f *fixture) create(c *actortest.Conn) {
	f.t.Helper()
	resp := f.call(c, &protocol.AgentCreate{Header: f.header(protocol.TypeAgentCreate, "create-1"), Cwd: f.m.Cwd})
	var data protocol.AgentCreateData
	if !resp.Success || resp.Command != protocol.TypeAgentCreate || decode(f.t, resp.Data, &data).AgentID != f.m.AgentID {
		f.t.Fatalf("agent.create response = %+v, want success with agent_id %s", resp, f.m.AgentID)
	}
}

// attach attaches c in role and returns the attach response's data and
// the sync that follows it.
func (f *fixture) attach(c *actortest.Conn, role string) (protocol.AgentAttachData, protocol.Sync) {
	f.t.Helper()
	id := fmt.Sprintf("attach-%d", c.Client.ID)
	resp := f.call(c, &protocol.AgentAttach{Header: f.header(protocol.TypeAgentAttach, id), Role: role})
	if !resp.Success {
		f.t.Fatalf("agent.attach: %+v", resp.Error)
	}
	var data protocol.AgentAttachData
	decode(f.t, resp.Data, &data)
	// The sync comes right after the response (docs/protocol.md §6.4).
	rec := c.Next(f.t)
	if rec.Type != protocol.TypeSync {
		f.t.Fatalf("record after the attach response is %s, want sync", rec.Raw)
	}
	var s protocol.Sync
	rec.Decode(f.t, &s)
	return data, s
}

// prompt sends a prompt with client id id and returns its response.
func (f *fixture) prompt(c *actortest.Conn, id, text string) protocol.Response {
	f.t.Helper()
	return f.call(c, &protocol.Prompt{Header: f.header(protocol.TypePrompt, id), Message: text})
}

// info waits for the parent to hear an InfoChanged pred accepts (nil:
// any) and returns its info.
func (f *fixture) info(pred func(protocol.AgentInfo) bool) protocol.AgentInfo {
	f.t.Helper()
	return actortest.Expect(f.t, f.parent, func(m *agent.InfoChanged) bool {
		return pred == nil || pred(m.Info)
	}).Info
}

// runtimeState accepts an info in runtime state rs.
func runtimeState(rs protocol.RuntimeState) func(protocol.AgentInfo) bool {
	return func(i protocol.AgentInfo) bool { return i.RuntimeState == rs }
}

// statusChanged waits for the Hub to carry this agent's
// agent_status_changed in runtime state rs.
func (f *fixture) statusChanged(rs protocol.RuntimeState) protocol.AgentStatusChanged {
	f.t.Helper()
	var ev protocol.AgentStatusChanged
	f.hub.Expect(f.t, func(r actortest.Record) bool {
		if r.Type != protocol.TypeAgentStatusChanged || r.AgentID != f.m.AgentID {
			return false
		}
		r.Decode(f.t, &ev)
		return ev.RuntimeState == rs
	})
	return ev
}

// runtimePID returns the agent's one runtime process.
func (f *fixture) runtimePID() int {
	f.t.Helper()
	pids := actortest.RuntimePIDs(f.t, f.m.AgentID)
	if len(pids) != 1 {
		f.t.Fatalf("runtime processes of %s: %v, want one", f.m.AgentID, pids)
	}
	return pids[0]
}

func decode[T any](t testing.TB, raw []byte, v *T) *T {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}
