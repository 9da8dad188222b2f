package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// runtimeBin is the real shardd binary, built once by TestMain; agent
// actors run it as `shardd agent --headless` (the sim provider).
var runtimeBin string

func TestMain(m *testing.M) { os.Exit(actortest.Main(m, &runtimeBin)) }

// harness is a registry on a real store, with agent actors that run the
// real runtime, and one client connection: a probe actor (the connection
// actor agents watch) whose records land in an outbox.
type harness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	reg    *actor.PID
	st     *store.Store
	hub    *outbox.Hub
	client *agent.Client
	out    *outbox.Outbox
	seen   map[string]protocol.Response // responses read so far, by id
	events [][]byte                     // other records read so far
	seq    int
}

// nop is an actor that ignores everything (a connection, a holder).
var nop = actor.PropsFromFunc(func(actor.Context) {})

func start(t *testing.T) *harness {
	t.Helper()
	return startLogging(t, slog.New(slog.DiscardHandler))
}

// startLogging is start with the registry's logger.
func startLogging(t *testing.T, log *slog.Logger) *harness {
	t.Helper()
	return startWith(t, log, nil)
}

// startWith is startLogging with setup, which may change the registry's
// deps and fill the store before the registry starts.
func startWith(t *testing.T, log *slog.Logger, setup func(*registry.Deps)) *harness {
	t.Helper()
	home := t.TempDir()
	st, err := store.Open(filepath.Join(home, "shard.db"), store.Options{NoSync: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	hub := outbox.NewHub()
	group := &xsync.Group{}
	rc := actortest.RuntimeConfig(t, runtimeBin)
	rc.StartTimeout, rc.IdleTimeout = 20*time.Second, time.Hour
	rc.AbortGrace, rc.TermGrace = 500*time.Millisecond, 500*time.Millisecond
	deps := registry.Deps{
		Store: st, Hub: hub, Logger: log, Group: group,
		Agent: agent.Deps{Hub: hub, Logger: discard, Goroutines: group, Runtime: rc},
	}
	if setup != nil {
		setup(&deps)
	}
	reg, err := sys.Root.SpawnNamed(registry.Props(deps), "registry")
	if err != nil {
		t.Fatal(err)
	}
	conn := sys.Root.Spawn(nop)
	h := &harness{t: t, sys: sys, reg: reg, st: st, hub: hub, out: outbox.New(outbox.Limits{}), seen: map[string]protocol.Response{}}
	h.client = &agent.Client{ID: 1, PID: conn, Out: h.out, Source: "unix"}
	t.Cleanup(func() {
		// As the daemon does: drain (runtimes killed), stop the tree, then
		// wait for the registry's goroutines, then close the store.
		done := make(chan struct{})
		sys.Root.Send(reg, &registry.Drain{Force: true, Done: done})
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("drain at cleanup did not finish")
		}
		_ = sys.Root.StopFuture(reg).Wait()
		_ = sys.Root.StopFuture(conn).Wait()
		sys.Shutdown()
		group.Close()
		if err := st.Check(); err != nil {
			t.Errorf("store check: %v", err)
		}
		st.Close()
	})
	return h
}

// send sends cmd as the gateway does (decoded from its wire form, with the
// raw record) and returns its id.
func (h *harness) send(cmd protocol.Command) string {
	h.t.Helper()
	h.seq++
	id := fmt.Sprint("c", h.seq)
	var rec map[string]any
	if err := json.Unmarshal(protocol.MustMarshal(cmd), &rec); err != nil {
		h.t.Fatal(err)
	}
	rec["id"] = id
	raw, err := json.Marshal(rec)
	if err != nil {
		h.t.Fatal(err)
	}
	dec, hdr, err := protocol.DecodeCommand(raw)
	if err != nil {
		h.t.Fatalf("decode %s: %v", raw, err)
	}
	h.sys.Root.Send(h.reg, &registry.Command{Client: h.client, Header: hdr, Cmd: dec, Raw: raw})
	return id
}

// response reads the client's records until the response to id arrived.
func (h *harness) response(id string) protocol.Response {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	for {
		if r, ok := h.seen[id]; ok {
			return r
		}
		recs, ok := h.out.Next(ctx)
		if !ok {
			h.t.Fatalf("no response to %s", id)
		}
		for _, rec := range recs {
			var head struct{ Type string }
			if err := json.Unmarshal(rec, &head); err != nil {
				h.t.Fatal(err)
			}
			if head.Type != protocol.TypeResponse {
				h.events = append(h.events, rec)
				continue
			}
			var r protocol.Response
			if err := json.Unmarshal(rec, &r); err != nil {
				h.t.Fatal(err)
			}
			h.seen[r.ID] = r
		}
	}
}

// call sends cmd and returns its response.
func (h *harness) call(cmd protocol.Command) protocol.Response {
	h.t.Helper()
	return h.response(h.send(cmd))
}

func ok[T any](t *testing.T, r protocol.Response) T {
	t.Helper()
	var d T
	if !r.Success {
		t.Fatalf("%s %s failed: %+v", r.Command, r.ID, r.Error)
	}
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func failed(t *testing.T, r protocol.Response, code protocol.ErrorCode) *protocol.Error {
	t.Helper()
	if r.Success || r.Error == nil || r.Error.Code != code {
		t.Fatalf("%s %s = %+v, want %s", r.Command, r.ID, r, code)
	}
	return r.Error
}

func (h *harness) create() string {
	h.t.Helper()
	d := ok[protocol.AgentCreateData](h.t, h.call(&protocol.AgentCreate{
		Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: h.t.TempDir()}))
	return d.AgentID
}

// recv waits for a value on ch (a hang guard of 10 s).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		var zero T
		t.Fatalf("no %T arrived", zero)
		return zero
	}
}

// nextOn reads o until a record of type typ arrives and returns it.
func nextOn(t *testing.T, o *outbox.Outbox, typ string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	for {
		recs, ok := o.Next(ctx)
		if !ok {
			t.Fatalf("no %s arrived", typ)
		}
		for _, rec := range recs {
			if hdr, err := protocol.DecodeHeader(rec); err == nil && hdr.Type == typ {
				return rec
			}
		}
	}
}

// agent.create commits the manifest before it acknowledges: when the
// response arrives (after the runtime is ready), the store has it; every
// connection hears agent_spawned.
func TestCreateCommitsBeforeAck(t *testing.T) {
	h := start(t)
	watcher := outbox.New(outbox.Limits{})
	h.hub.Add(watcher)
	defer h.hub.Remove(watcher)
	cwd := t.TempDir()
	d := ok[protocol.AgentCreateData](t, h.call(&protocol.AgentCreate{
		Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd, Name: "first"}))
	m, err := h.st.GetAgent(d.AgentID)
	if err != nil {
		t.Fatalf("manifest of the acknowledged agent: %v", err)
	}
	if m.Name != "first" || m.Mode != "build" || m.SessionID == "" {
		t.Fatalf("manifest = %+v", m)
	}
	if want, _ := filepath.EvalSymlinks(cwd); m.Cwd != want {
		t.Fatalf("cwd = %q, want the canonical %q", m.Cwd, want)
	}
	var ev protocol.AgentSpawned
	if err := json.Unmarshal(nextOn(t, watcher, protocol.TypeAgentSpawned), &ev); err != nil || ev.AgentID != d.AgentID {
		t.Fatalf("agent_spawned = %+v, %v; want %s", ev, err, d.AgentID)
	}

	// Invalid creates write nothing.
	failed(t, h.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: "relative"}), protocol.CodeInvalidRequest)
	failed(t, h.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: filepath.Join(cwd, "missing")}), protocol.CodeInvalidRequest)
	failed(t, h.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd, ParentAgentID: "agent-nope"}), protocol.CodeNotFound)
	if all, err := h.st.ListAgents(); err != nil || len(all) != 1 {
		t.Fatalf("agents stored = %d, %v; want 1", len(all), err)
	}
}

// agent.list and agent.status answer from the projections; an unknown
// agent_id is NOT_FOUND; a per-agent command without one is NOT_ATTACHED.
func TestListStatusAndRoutingErrors(t *testing.T) {
	h := start(t)
	a, b := h.create(), h.create()
	list := ok[protocol.AgentListData](t, h.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}))
	if len(list.Agents) != 2 || list.Agents[0].AgentID != a || list.Agents[1].AgentID != b {
		t.Fatalf("agent.list = %+v, want %s then %s (by creation)", list.Agents, a, b)
	}
	st := ok[protocol.AgentListData](t, h.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: b}}))
	if len(st.Agents) != 1 || st.Agents[0].AgentID != b {
		t.Fatalf("agent.status %s = %+v", b, st.Agents)
	}
	all := ok[protocol.AgentListData](t, h.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus}}))
	if len(all.Agents) != 2 {
		t.Fatalf("agent.status without agent_id = %+v, want every agent", all.Agents)
	}
	failed(t, h.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: "agent-nope"}}), protocol.CodeNotFound)
	failed(t, h.call(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: "agent-nope"}, Message: "hi"}), protocol.CodeNotFound)
	failed(t, h.call(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt}, Message: "hi"}), protocol.CodeNotAttached)
	// daemon.check runs off the mailbox, in the registry's group.
	if chk := ok[protocol.DaemonCheckData](t, h.call(&protocol.DaemonCheck{Header: protocol.Header{Type: protocol.TypeDaemonCheck}})); !chk.StoreOK {
		t.Fatalf("daemon.check = %+v", chk)
	}
	// A per-agent command with an agent_id reaches the agent (which
	// answers it; the registry does not).
	ok[json.RawMessage](t, h.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: a}}))
}

// jobsProbe stands for the jobs coordinator: it hands over what the
// registry forwards.
func jobsProbe(got chan<- *registry.Command) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*registry.Command); ok {
			got <- m
		}
	})
}

// subagent.* and jobs.* go to the jobs PID the registry was handed, as the
// client sent them (the coordinator answers the client itself); before it
// is handed over, after DetachJobs and once it stopped, they are answered
// CONFLICT and forwarded nowhere.
func TestSubagentCommandsGoToTheJobsPID(t *testing.T) {
	logs := make(chan string, 100)
	h := startLogging(t, slog.New(logSignal{logs}))
	parent := h.create()
	status := func() protocol.Command {
		return &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}
	}
	failed(t, h.call(status()), protocol.CodeConflict) // nothing attached yet

	got := make(chan *registry.Command, 10)
	jobs := h.sys.Root.Spawn(jobsProbe(got))
	h.sys.Root.Send(h.reg, &registry.AttachJobs{PID: jobs})
	for _, cmd := range []protocol.Command{
		status(),
		&protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}},
		&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Name: "t", Task: "x"},
	} {
		id := h.send(cmd)
		fwd := recv(t, got)
		if fwd.Header.ID != id || fwd.Client != h.client || fwd.Cmd == nil || fwd.Header.Type != cmd.Head().Type || len(fwd.Raw) == 0 {
			t.Fatalf("forwarded %+v for %s", fwd.Header, id)
		}
	}

	detached := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.DetachJobs{Done: detached})
	recv(t, detached)
	e := failed(t, h.call(status()), protocol.CodeConflict)
	if e.Message != "subagent jobs are not available (daemon shutting down)" {
		t.Fatalf("CONFLICT message = %q", e.Message)
	}

	// A coordinator that stops under the registry is not forwarded to.
	h.sys.Root.Send(h.reg, &registry.AttachJobs{PID: jobs})
	h.send(status())
	recv(t, got)
	_ = h.sys.Root.StopFuture(jobs).Wait()
	// The registry hears of it on its own mailbox: wait for its log line.
	for msg := recv(t, logs); msg != "registry: jobs coordinator stopped; subagent jobs are unavailable"; msg = recv(t, logs) {
	}
	failed(t, h.call(status()), protocol.CodeConflict)
	select {
	case fwd := <-got:
		t.Fatalf("forwarded %+v to a stopped coordinator", fwd.Header)
	default:
	}
}

// logSignal is a slog handler that hands every message to a channel (tests
// wait on it instead of sleeping).
type logSignal struct{ msgs chan<- string }

func (l logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (l logSignal) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.msgs <- r.Message:
	default:
	}
	return nil
}
func (l logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSignal) WithGroup(string) slog.Handler      { return l }

// While draining, subagent.* is answered CONFLICT and never forwarded, and
// agent.create is refused; Done closes once every agent's runtime stopped,
// and a later Drain finds nothing left to wait for.
func TestDrain(t *testing.T) {
	h := start(t)
	a := h.create()
	got := make(chan *registry.Command, 10)
	h.sys.Root.Send(h.reg, &registry.AttachJobs{PID: h.sys.Root.Spawn(jobsProbe(got))})

	done := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.Drain{Done: done})
	e := failed(t, h.call(&protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: a, Handles: []string{"x"}}), protocol.CodeConflict)
	if e.Message != "subagent jobs are not available (daemon shutting down)" {
		t.Fatalf("CONFLICT message = %q", e.Message)
	}
	failed(t, h.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: t.TempDir()}), protocol.CodeConflict)
	recv(t, done)
	select {
	case fwd := <-got:
		t.Fatalf("forwarded %+v while draining", fwd.Header)
	default:
	}
	// Still answering the orchestrator commands that need no agent.
	list := ok[protocol.AgentListData](t, h.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}))
	if len(list.Agents) != 1 || list.Agents[0].RuntimeState != protocol.RuntimeStopped {
		t.Fatalf("after the drain: %+v, want %s with its runtime stopped", list.Agents, a)
	}
	again := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.Drain{Done: again})
	recv(t, again)
}

// A drain with no agents is done at once.
func TestDrainEmpty(t *testing.T) {
	h := start(t)
	done := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.Drain{Done: done})
	recv(t, done)
}

// Adopt serves committed Agents the registry did not know (the children a
// subagent.create committed): they are listed and every connection hears
// agent_spawned; adopting one again changes nothing.
func TestAdopt(t *testing.T) {
	h := start(t)
	watcher := outbox.New(outbox.Limits{})
	h.hub.Add(watcher)
	defer h.hub.Remove(watcher)
	parent := h.create()
	nextOn(t, watcher, protocol.TypeAgentSpawned) // the parent's
	child := store.Agent{AgentID: "agent-child1", SessionID: "sess-child1", Cwd: t.TempDir(), Mode: "build",
		ParentAgentID: parent, Alias: "ada", Depth: 1, CreatedAt: time.Now().UnixMilli() + 1}
	if err := h.st.CreateAgent(child); err != nil {
		t.Fatal(err)
	}
	h.sys.Root.Send(h.reg, &registry.Adopt{Agents: []store.Agent{child}})
	var ev protocol.AgentSpawned
	if err := json.Unmarshal(nextOn(t, watcher, protocol.TypeAgentSpawned), &ev); err != nil || ev.AgentID != child.AgentID {
		t.Fatalf("agent_spawned = %+v, %v; want %s", ev, err, child.AgentID)
	}
	if ev.Info.ParentAgentID != parent {
		t.Fatalf("adopted info = %+v, want parent %s", ev.Info, parent)
	}
	h.sys.Root.Send(h.reg, &registry.Adopt{Agents: []store.Agent{child}})
	list := ok[protocol.AgentListData](t, h.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}))
	if len(list.Agents) != 2 || list.Agents[1].AgentID != child.AgentID {
		t.Fatalf("agent.list after adopt = %+v", list.Agents)
	}
	// The repeat broadcast nothing: the list's response was queued for
	// the client after the repeat was handled, and the watcher has no
	// agent_spawned beyond the child's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		recs, more := watcher.Next(ctx)
		if !more {
			break
		}
		for _, rec := range recs {
			if hdr, _ := protocol.DecodeHeader(rec); hdr.Type == protocol.TypeAgentSpawned {
				t.Fatalf("second agent_spawned: %s", rec)
			}
		}
	}
}

// agent.Route delivers to the agent with the sender kept (the agent's
// answer reaches whoever asked); to an unknown agent it answers in the
// agent's stead, so a holder or an injector is never left waiting.
func TestRoute(t *testing.T) {
	h := start(t)
	a := h.create()
	res, err := h.sys.Root.RequestFuture(h.reg, &agent.Route{AgentID: a, Msg: &agent.Inject{Key: "k1", Text: "a report"}}, 30*time.Second).Result()
	if in, ok := res.(*agent.Injected); err != nil || !ok || in.Key != "k1" || in.Err != nil {
		t.Fatalf("inject into %s = %#v, %v; want accepted", a, res, err)
	}
	res, err = h.sys.Root.RequestFuture(h.reg, &agent.Route{AgentID: "agent-nope", Msg: &agent.Inject{Key: "k2"}}, 10*time.Second).Result()
	if in, ok := res.(*agent.Injected); err != nil || !ok || in.Key != "k2" || protocol.CodeOf(in.Err) != protocol.CodeNotFound {
		t.Fatalf("inject into an unknown agent = %#v, %v; want NOT_FOUND", res, err)
	}
	ended := make(chan *agent.LeaseEnded, 1)
	holder := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*agent.LeaseEnded); ok {
			ended <- m
		}
	}))
	h.sys.Root.Send(h.reg, &agent.Route{AgentID: "agent-nope", Msg: &agent.LeaseStart{RunID: "run-1", Task: "t", Holder: holder}})
	if m := recv(t, ended); m.RunID != "run-1" || m.Completed || m.Error == "" {
		t.Fatalf("lease on an unknown agent = %+v, want ended with an error", m)
	}
	_ = h.sys.Root.StopFuture(holder).Wait()
}

// workspace.* goes to the workspace PID the registry was handed, like
// subagent.* to the coordinator: CONFLICT before it is attached and after
// DetachWorkspaces. AgentStates answers the projections of the agents the
// registry serves and names the others.
func TestWorkspaceCommandsGoToTheWorkspacePID(t *testing.T) {
	h := start(t)
	a := h.create()
	list := func() protocol.Command {
		return &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}
	}
	failed(t, h.call(list()), protocol.CodeConflict)

	got := make(chan *registry.Command, 10)
	ws := h.sys.Root.Spawn(jobsProbe(got))
	h.sys.Root.Send(h.reg, &registry.AttachWorkspaces{PID: ws})
	for _, cmd := range []protocol.Command{
		list(),
		&protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: "workspace-x"},
		&protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: "workspace-x", Strategy: protocol.MergeSquash},
	} {
		id := h.send(cmd)
		fwd := recv(t, got)
		if fwd.Header.ID != id || fwd.Client != h.client || fwd.Header.Type != cmd.Head().Type || len(fwd.Raw) == 0 {
			t.Fatalf("forwarded %+v for %s", fwd.Header, id)
		}
	}

	res, err := h.sys.Root.RequestFuture(h.reg, &registry.AgentStates{AgentIDs: []string{a, "agent-nope"}}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	st := res.(*registry.AgentStatesResult)
	if len(st.Infos) != 1 || st.Infos[0].AgentID != a || st.Infos[0].RuntimeState == "" || len(st.Unknown) != 1 || st.Unknown[0] != "agent-nope" {
		t.Fatalf("AgentStates = %+v", st)
	}

	detached := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.DetachWorkspaces{Done: detached})
	recv(t, detached)
	e := failed(t, h.call(list()), protocol.CodeConflict)
	if e.Message != "workspaces are not available (daemon shutting down)" {
		t.Fatalf("CONFLICT message = %q", e.Message)
	}
	select {
	case fwd := <-got:
		t.Fatalf("forwarded %+v after DetachWorkspaces", fwd.Header)
	default:
	}
}

// team.* goes to the team coordinator's PID, like workspace.* to the
// workspace actor: CONFLICT ("teams are not available") before it is
// attached and after DetachTeam.
func TestTeamCommandsGoToTheTeamPID(t *testing.T) {
	h := start(t)
	list := func() protocol.Command {
		return &protocol.TeamGoalList{Header: protocol.Header{Type: protocol.TypeTeamGoalList}}
	}
	failed(t, h.call(list()), protocol.CodeConflict)

	got := make(chan *registry.Command, 10)
	tm := h.sys.Root.Spawn(jobsProbe(got))
	h.sys.Root.Send(h.reg, &registry.AttachTeam{PID: tm})
	for _, cmd := range []protocol.Command{
		list(),
		&protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: "goal-x"},
		&protocol.TeamFeed{Header: protocol.Header{Type: protocol.TypeTeamFeed}},
	} {
		id := h.send(cmd)
		fwd := recv(t, got)
		if fwd.Header.ID != id || fwd.Client != h.client || fwd.Header.Type != cmd.Head().Type {
			t.Fatalf("forwarded %+v for %s", fwd.Header, id)
		}
	}
	detached := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.DetachTeam{Done: detached})
	recv(t, detached)
	e := failed(t, h.call(list()), protocol.CodeConflict)
	if e.Message != "teams are not available (daemon shutting down)" {
		t.Fatalf("CONFLICT message = %q", e.Message)
	}
	select {
	case fwd := <-got:
		t.Fatalf("forwarded %+v after DetachTeam", fwd.Header)
	default:
	}
}

// A drain waits for every agent, however many: each adopted agent (no
// runtime) reports drained once, and Done closes after the last.
func TestDrainWaitsForEveryAgent(t *testing.T) {
	h := start(t)
	const n = 300
	var agents []store.Agent
	for i := range n {
		a := store.Agent{AgentID: fmt.Sprintf("agent-d%03d", i), SessionID: fmt.Sprintf("sess-d%03d", i), Cwd: t.TempDir(),
			Mode: "build", CreatedAt: time.Now().UnixMilli() + int64(i)}
		if err := h.st.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	h.sys.Root.Send(h.reg, &registry.Adopt{Agents: agents})
	done := make(chan struct{})
	h.sys.Root.Send(h.reg, &registry.Drain{Done: done})
	recv(t, done)
	list := ok[protocol.AgentListData](t, h.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}))
	if len(list.Agents) != n {
		t.Fatalf("listed %d agents after the drain, want %d", len(list.Agents), n)
	}
}

// An agent actor that stops under the registry (a failure) is served
// again: the registry finds its entry from the stopped actor's PID and
// spawns a new actor under the same agent ID, which answers commands.
func TestAgentActorStoppedUnderTheRegistryIsRespawned(t *testing.T) {
	logs := make(chan string, 100)
	h := startLogging(t, slog.New(logSignal{logs}))
	a := h.create()
	pid := actor.NewPID(h.sys.Address(), h.reg.Id+"/"+a)
	if err := h.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	for msg := recv(t, logs); msg != "registry: agent actor stopped unexpectedly; respawning"; msg = recv(t, logs) {
	}
	list := ok[protocol.AgentListData](t, h.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}))
	if len(list.Agents) != 1 || list.Agents[0].AgentID != a {
		t.Fatalf("agent.list after the respawn = %+v, want %s", list.Agents, a)
	}
	// The new actor serves the agent: an attach reaches it and is answered.
	ok[protocol.AgentAttachData](t, h.call(&protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: a}}))
}
