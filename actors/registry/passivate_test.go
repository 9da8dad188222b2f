package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/telemetry"
)

// grace is the passivation grace period of these tests, run on a manual
// clock.
const grace = time.Minute

// startStored starts a registry on a store that already holds agents
// (stopped: as a daemon finds them at a start), with a manual clock for
// passivation. Its log goes to logs.
func startStored(t *testing.T, agents []store.Agent, logs chan string) (*harness, *clock.Manual) {
	t.Helper()
	h, clk, _ := startStoredMetrics(t, agents, logs)
	return h, clk
}

// startStoredMetrics is startStored with the registry's metrics.
func startStoredMetrics(t *testing.T, agents []store.Agent, logs chan string) (*harness, *clock.Manual, *telemetry.Metrics) {
	t.Helper()
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	m := telemetry.New("test")
	h := startWith(t, slog.New(logSignal{logs}), func(d *registry.Deps) {
		for _, a := range agents {
			if err := d.Store.CreateAgent(a); err != nil {
				t.Fatal(err)
			}
		}
		d.Clock, d.PassivateAfter, d.Metrics = clk, grace, m
	})
	return h, clk, m
}

// stoppedGauge reads shard_agents_by_runtime_state{runtime_state="stopped"}.
func stoppedGauge(t *testing.T, m *telemetry.Metrics) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "shard_agents_by_runtime_state" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "runtime_state" && l.GetValue() == string(protocol.RuntimeStopped) {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// stored is a stopped agent's manifest.
func stored(t *testing.T, id string, createdAt int64, parent string) store.Agent {
	return store.Agent{AgentID: id, SessionID: "sess-" + id, Cwd: t.TempDir(), Mode: "build", CreatedAt: createdAt, ParentAgentID: parent}
}

// live returns the agents the registry runs an actor for, sorted.
func (h *harness) live() []string {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.reg, &registry.LiveAgents{}, 10*time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	ids := res.(*registry.LiveAgentsResult).AgentIDs
	slices.Sort(ids)
	return ids
}

// waitLog reads logs until msg arrives.
func waitLog(t *testing.T, logs <-chan string, msg string) {
	t.Helper()
	for got := recv(t, logs); got != msg; got = recv(t, logs) {
	}
}

// passivate ends the grace period of the one idle agent and waits for its
// actor to be gone.
func passivate(t *testing.T, clk *clock.Manual, logs <-chan string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal("no grace period started")
	}
	clk.Advance(grace)
	waitLog(t, logs, "registry: agent passivated")
}

func listIDs(l protocol.AgentListData) []string {
	out := []string{}
	for _, in := range l.Agents {
		out = append(out, in.AgentID)
	}
	return out
}

// A stored, stopped agent has no actor after a start: it is listed,
// counted and shown from its manifest. Addressing it serves it (an actor
// answers the command); once idle for the grace period it is passivated,
// and listed and counted as before.
func TestStoppedAgentsLiveOnlyWhileAddressed(t *testing.T) {
	logs := make(chan string, 1000)
	h, clk, metrics := startStoredMetrics(t, []store.Agent{stored(t, "agent-a", 10, ""), stored(t, "agent-b", 20, ""), stored(t, "agent-c", 30, "agent-a")}, logs)
	if got := h.live(); len(got) != 0 {
		t.Fatalf("live agents after a start = %v, want none", got)
	}
	listCmd := func(m protocol.AgentList) protocol.AgentListData {
		m.Header = protocol.Header{Type: protocol.TypeAgentList}
		return ok[protocol.AgentListData](t, h.call(&m))
	}
	before := listCmd(protocol.AgentList{})
	if got := listIDs(before); !slices.Equal(got, []string{"agent-a", "agent-b", "agent-c"}) {
		t.Fatalf("agent.list = %v", got)
	}
	for _, in := range before.Agents {
		if in.RuntimeState != protocol.RuntimeStopped || in.Status != protocol.StatusIdle || in.Mode != "build" || in.Runtime == "" {
			t.Fatalf("stored agent listed as %+v", in)
		}
	}
	status := func() protocol.DaemonStatusData {
		return ok[protocol.DaemonStatusData](t, h.call(&protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}))
	}
	if st := status(); st.AgentsByRuntimeState[protocol.RuntimeStopped] != 3 || st.AgentsByStatus[protocol.StatusIdle] != 3 {
		t.Fatalf("daemon.status counts = %v %v, want 3 stopped and idle", st.AgentsByRuntimeState, st.AgentsByStatus)
	}
	if g := stoppedGauge(t, metrics); g != 3 {
		t.Fatalf("stopped gauge after a start = %v, want 3", g)
	}
	one := ok[protocol.AgentListData](t, h.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: "agent-b"}}))
	if len(one.Agents) != 1 || one.Agents[0].AgentID != "agent-b" {
		t.Fatalf("agent.status agent-b = %+v", one.Agents)
	}
	if got := h.live(); len(got) != 0 {
		t.Fatalf("live agents after reads = %v, want none (reads serve from the store)", got)
	}

	// A per-agent command is answered by the agent, which is live then.
	ok[json.RawMessage](t, h.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: "agent-b"}}))
	if got := h.live(); !slices.Equal(got, []string{"agent-b"}) {
		t.Fatalf("live agents after a command to agent-b = %v", got)
	}
	if st := status(); st.AgentsByRuntimeState[protocol.RuntimeStopped] != 3 || stoppedGauge(t, metrics) != 3 {
		t.Fatalf("counts with agent-b live = %v, gauge %v; want 3 stopped", st.AgentsByRuntimeState, stoppedGauge(t, metrics))
	}
	// Its live projection is the one the store gave.
	if after := listCmd(protocol.AgentList{}); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("agent.list with agent-b live = %+v, want %+v", after, before)
	}

	passivate(t, clk, logs)
	if got := h.live(); len(got) != 0 {
		t.Fatalf("live agents after the grace period = %v, want none", got)
	}
	if st := status(); st.AgentsByRuntimeState[protocol.RuntimeStopped] != 3 || stoppedGauge(t, metrics) != 3 {
		t.Fatalf("daemon.status after passivation = %v, gauge %v", st.AgentsByRuntimeState, stoppedGauge(t, metrics))
	}
	if after := listCmd(protocol.AgentList{}); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("agent.list after passivation = %+v, want %+v", after, before)
	}
	// And it is served again when addressed.
	ok[json.RawMessage](t, h.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: "agent-b"}}))
	if got := h.live(); !slices.Equal(got, []string{"agent-b"}) {
		t.Fatalf("live agents after a second command = %v", got)
	}
}

// Commands that reach the registry while an agent is being passivated are
// all answered, in order, whichever way the passivation goes.
func TestCommandsRacingPassivationAreAnswered(t *testing.T) {
	logs := make(chan string, 1000)
	h, clk := startStored(t, []store.Agent{stored(t, "agent-a", 10, "")}, logs)
	var held, busy int
	for round := range 5 {
		ok[json.RawMessage](t, h.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: "agent-a"}}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Fatalf("round %d: no grace period started", round)
		}
		cancel()
		clk.Advance(grace) // the tick is in the registry's mailbox now
		var sent []string
		for range 4 {
			sent = append(sent, h.send(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: "agent-a"}}))
		}
		sent = append(sent, h.send(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: "agent-a"}}))
		for _, id := range sent {
			if r := h.response(id); !r.Success {
				t.Fatalf("round %d: %s %s = %+v", round, r.Command, id, r.Error)
			}
		}
		// Either the agent stopped and a new actor answered what was held,
		// or it was busy and answered it itself: live either way, and
		// passivated again later.
		for got := recv(t, logs); ; got = recv(t, logs) {
			if got == "registry: agent passivated" {
				held++
				break
			}
			if got == "registry: agent busy; not passivated" {
				busy++
				break
			}
		}
		if got := h.live(); !slices.Equal(got, []string{"agent-a"}) {
			t.Fatalf("round %d: live = %v", round, got)
		}
		passivate(t, clk, logs)
	}
	t.Logf("held and delivered to a new actor: %d rounds; busy: %d", held, busy)
}

// A session adopted by a stored agent without an actor is still refused
// to another agent.create.
func TestAdoptionOfAStoredAgentsSessionRefused(t *testing.T) {
	logs := make(chan string, 1000)
	h, _ := startStored(t, []store.Agent{stored(t, "agent-a", 10, "")}, logs)
	e := failed(t, h.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: t.TempDir(), SessionID: "sess-agent-a"}),
		protocol.CodeInvalidRequest)
	if e.Message != "session is already adopted" {
		t.Fatalf("refusal = %q", e.Message)
	}
	if got := h.live(); len(got) != 0 {
		t.Fatalf("live agents = %v, want none", got)
	}
}

// agent.list's filters and pages read the store's index: the same pages
// with agents live or not, and the active filter lists the live ones.
func TestListPagesFromTheStore(t *testing.T) {
	logs := make(chan string, 1000)
	var agents []store.Agent
	for i := range 7 {
		parent := ""
		if i%2 == 1 {
			parent = "agent-0"
		}
		agents = append(agents, stored(t, fmt.Sprintf("agent-%d", i), int64(100+i/2), parent))
	}
	h, _ := startStored(t, agents, logs)
	page := func(m protocol.AgentList) protocol.AgentListData {
		m.Header = protocol.Header{Type: protocol.TypeAgentList}
		return ok[protocol.AgentListData](t, h.call(&m))
	}
	walk := func(m protocol.AgentList) []string {
		var got []string
		for n := 0; ; n++ {
			if n > 10 {
				t.Fatal("no last page")
			}
			p := page(m)
			if m.Limit > 0 && len(p.Agents) > m.Limit {
				t.Fatalf("page of %d over limit %d", len(p.Agents), m.Limit)
			}
			got = append(got, listIDs(p)...)
			if p.NextCursor == "" {
				return got
			}
			m.Cursor = p.NextCursor
		}
	}
	all := []string{"agent-0", "agent-1", "agent-2", "agent-3", "agent-4", "agent-5", "agent-6"}
	for _, limit := range []int{0, 1, 2, 3, 7, 8} {
		if got := walk(protocol.AgentList{Limit: limit}); !slices.Equal(got, all) {
			t.Fatalf("limit %d: %v", limit, got)
		}
	}
	if got := walk(protocol.AgentList{Limit: 2, ParentAgentID: "agent-0"}); !slices.Equal(got, []string{"agent-1", "agent-3", "agent-5"}) {
		t.Fatalf("children of agent-0: %v", got)
	}
	if got := walk(protocol.AgentList{Limit: 2, SinceMs: 102}); !slices.Equal(got, []string{"agent-4", "agent-5", "agent-6"}) {
		t.Fatalf("since 102: %v", got)
	}
	if got := walk(protocol.AgentList{Active: true}); len(got) != 0 {
		t.Fatalf("active with nothing live: %v", got)
	}
	// Live or not, the pages are the same.
	ok[json.RawMessage](t, h.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: "agent-3"}}))
	if got := walk(protocol.AgentList{Limit: 3}); !slices.Equal(got, all) {
		t.Fatalf("with agent-3 live: %v", got)
	}
}

// agent.remove of a stored agent without an actor removes it (store,
// broadcast); AgentStates reports such agents from their manifests.
func TestRemoveAndStatesOfStoredAgents(t *testing.T) {
	logs := make(chan string, 1000)
	h, _, metrics := startStoredMetrics(t, []store.Agent{stored(t, "agent-a", 10, ""), stored(t, "agent-b", 20, "")}, logs)
	watcher := outbox.New(outbox.Limits{})
	h.hub.Add(watcher)
	defer h.hub.Remove(watcher)

	res, err := h.sys.Root.RequestFuture(h.reg, &registry.AgentStates{AgentIDs: []string{"agent-b", "agent-nope"}}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	st := res.(*registry.AgentStatesResult)
	if len(st.Infos) != 1 || st.Infos[0].AgentID != "agent-b" || st.Infos[0].RuntimeState != protocol.RuntimeStopped ||
		!slices.Equal(st.Unknown, []string{"agent-nope"}) {
		t.Fatalf("AgentStates = %+v", st)
	}

	rm := ok[protocol.AgentRemoveData](t, h.call(&protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: []string{"agent-a", "agent-nope"}}))
	if len(rm.Results) != 2 || !rm.Results[0].Removed || rm.Results[1].Error != protocol.CodeNotFound {
		t.Fatalf("agent.remove = %+v", rm.Results)
	}
	if _, err := h.st.GetAgent("agent-a"); err == nil {
		t.Fatal("agent-a is still stored")
	}
	var ev protocol.AgentRemoved
	if err := json.Unmarshal(nextOn(t, watcher, protocol.TypeAgentRemoved), &ev); err != nil || ev.AgentID != "agent-a" {
		t.Fatalf("agent_removed = %+v, %v", ev, err)
	}
	if got := h.live(); len(got) != 0 {
		t.Fatalf("live agents after the removal = %v", got)
	}
	failed(t, h.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: "agent-a"}}), protocol.CodeNotFound)
	st2 := ok[protocol.DaemonStatusData](t, h.call(&protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}))
	if st2.AgentsByRuntimeState[protocol.RuntimeStopped] != 1 || stoppedGauge(t, metrics) != 1 {
		t.Fatalf("daemon.status after the removal = %v, gauge %v; want 1 stopped", st2.AgentsByRuntimeState, stoppedGauge(t, metrics))
	}
}
