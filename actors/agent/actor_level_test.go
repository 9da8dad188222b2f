package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// The actor-level tests: one agent actor, spawned under a probe parent,
// running the real runtime (`shardd agent --headless`, sim provider), with
// probe connections for clients. They check the agent's behaviour at its
// message surface; the daemon tests check the same through sockets.

// TestActorLevelCreateAnswersOnceReady: agent.create starts the runtime and
// is answered with the agent's id only once it is ready; the parent and
// the Hub see starting, then running. A create while ready is answered at
// once.
func TestActorLevelCreateAnswersOnceReady(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	f.send(c, &protocol.AgentCreate{Header: f.header(protocol.TypeAgentCreate, "create-1"), Cwd: f.m.Cwd})
	f.info(runtimeState(protocol.RuntimeStarting))
	f.statusChanged(protocol.RuntimeStarting)
	rec, before := c.Expect(t, actortest.ResponseTo("create-1"))
	if len(before) != 0 {
		t.Fatalf("records before the create response: %d", len(before))
	}
	resp := rec.Response(t)
	var data protocol.AgentCreateData
	if !resp.Success || resp.Command != protocol.TypeAgentCreate || decode(t, resp.Data, &data).AgentID != f.m.AgentID {
		t.Fatalf("create response = %s", rec.Raw)
	}
	// Ready before the answer: the running state was announced already.
	if info := f.info(runtimeState(protocol.RuntimeRunning)); info.Status != protocol.StatusIdle {
		t.Fatalf("info once running = %+v", info)
	}
	f.statusChanged(protocol.RuntimeRunning)
	f.create(c) // ready: answered without a new generation
	if n := len(actortest.RuntimePIDs(t, f.m.AgentID)); n != 1 {
		t.Fatalf("%d runtime processes after two creates, want 1", n)
	}
}

// TestActorLevelAttachSyncAndRelay: an interactive attach starts the
// runtime and is answered, then synced (epoch 0, the runtime's
// capabilities); a prompt's events reach the client in order with the
// agent_id spliced in and the response under the client's own id, which
// another client may use too.
func TestActorLevelAttachSyncAndRelay(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	data, s := f.attach(c, protocol.RoleInteractive)
	if data.Info.AgentID != f.m.AgentID || data.Info.RuntimeState != protocol.RuntimeRunning || data.Status != protocol.StatusIdle {
		t.Fatalf("attach data = %+v", data)
	}
	if s.AgentID != f.m.AgentID || s.RuntimeEpoch == nil || *s.RuntimeEpoch != 0 || len(s.Capabilities) == 0 ||
		s.Status != protocol.StatusIdle || s.Mode == "" {
		t.Fatalf("sync = %+v", s)
	}

	f.send(c, &protocol.Prompt{Header: f.header(protocol.TypePrompt, "p1"), Message: "sim: say hello"})
	end, evs := c.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	evs = append(evs, end)
	var order []string
	var text strings.Builder
	answered := false
	for _, r := range evs {
		if r.AgentID != f.m.AgentID {
			t.Errorf("record without the agent's id: %s", r.Raw)
		}
		switch r.Type {
		case protocol.TypeResponse:
			resp := r.Response(t)
			if r.ID != "p1" || resp.Command != protocol.TypePrompt || !resp.Success || answered {
				t.Errorf("response %s, want one success under the client's id p1", r.Raw)
			}
			answered = true
			continue
		case protocol.TypeMessageDelta:
			var d protocol.MessageDelta
			r.Decode(t, &d)
			text.WriteString(d.TextDelta)
		case protocol.TypeStatus, protocol.TypeTurnStart, protocol.TypeMessageComplete, protocol.TypeTurnEnd:
		default:
			continue
		}
		if n := len(order); n == 0 || order[n-1] != r.Type {
			order = append(order, r.Type)
		}
	}
	want := []string{protocol.TypeStatus, protocol.TypeTurnStart, protocol.TypeMessageDelta, protocol.TypeMessageComplete, protocol.TypeTurnEnd}
	if strings.Join(order, " ") != strings.Join(want, " ") || !answered || text.String() != "hello" {
		t.Fatalf("events %v (text %q, answered %v), want %v with text hello", order, text.String(), answered, want)
	}
	idle, _ := c.Expect(t, actortest.Type(protocol.TypeStatus))
	var st protocol.Status
	if idle.Decode(t, &st); st.Status != protocol.StatusIdle {
		t.Fatalf("status after the turn = %s", idle.Raw)
	}
	var hubStatus protocol.AgentStatusChanged
	f.hub.Expect(t, func(r actortest.Record) bool {
		r.Decode(t, &hubStatus)
		return r.Type == protocol.TypeAgentStatusChanged && hubStatus.Status == protocol.StatusStreaming
	})
	f.hub.Expect(t, func(r actortest.Record) bool {
		r.Decode(t, &hubStatus)
		return r.Type == protocol.TypeAgentStatusChanged && hubStatus.Status == protocol.StatusIdle
	})

	// A second client reusing the id p1 gets its own answer (the agent
	// forwards under ids of its own, since clients choose theirs); the
	// first gets none.
	c2 := f.conn("websocket")
	f.attach(c2, "")
	if resp := f.prompt(c2, "p1", "sim: say again"); !resp.Success {
		t.Fatalf("second client's prompt: %+v", resp.Error)
	}
	c2.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	_, evs = c.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	for _, r := range evs {
		if r.Type == protocol.TypeResponse {
			t.Fatalf("the first client got the second's response: %s", r.Raw)
		}
	}
}

// TestActorLevelRolesGuardCommands: an observer may read but not prompt
// (PERMISSION_DENIED); a connection that is not attached may do neither
// (NOT_ATTACHED).
func TestActorLevelRolesGuardCommands(t *testing.T) {
	f := newAgent(t)
	obs := f.conn("unix")
	if data, _ := f.attach(obs, protocol.RoleObserver); data.Info.RuntimeState != protocol.RuntimeRunning {
		t.Fatalf("observer attach: %+v", data)
	}
	if resp := f.prompt(obs, "p1", "hi"); resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodePermissionDenied {
		t.Fatalf("observer prompt = %+v, want PERMISSION_DENIED", resp)
	}
	if resp := f.call(obs, &protocol.ListModes{Header: f.header(protocol.TypeListModes, "m1")}); !resp.Success {
		t.Fatalf("observer list_modes = %+v, want success (read-only)", resp.Error)
	}
	stranger := f.conn("unix")
	if resp := f.prompt(stranger, "p2", "hi"); resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodeNotAttached {
		t.Fatalf("unattached prompt = %+v, want NOT_ATTACHED", resp)
	}
	if resp := f.call(stranger, &protocol.ListModes{Header: f.header(protocol.TypeListModes, "m2")}); resp.Success || resp.Error.Code != protocol.CodeNotAttached {
		t.Fatalf("unattached list_modes = %+v, want NOT_ATTACHED", resp)
	}
}

// permissionRequest waits for the permission request on c.
func permissionRequest(t *testing.T, c *actortest.Conn) protocol.PermissionRequest {
	t.Helper()
	rec, _ := c.Expect(t, actortest.Type(protocol.TypePermissionRequest))
	var req protocol.PermissionRequest
	rec.Decode(t, &req)
	return req
}

// permissionResolved waits for the permission_resolved on c.
func permissionResolved(t *testing.T, c *actortest.Conn) protocol.PermissionResolved {
	t.Helper()
	rec, _ := c.Expect(t, actortest.Type(protocol.TypePermissionResolved))
	var res protocol.PermissionResolved
	rec.Decode(t, &res)
	return res
}

// TestActorLevelPermissionFirstAnswerWins: a permission request reaches
// every interactive client; an unknown choice is INVALID_REQUEST and
// leaves it open; the first valid answer wins and carries its client's
// source; a later answer succeeds and is dropped.
func TestActorLevelPermissionFirstAnswerWins(t *testing.T) {
	f := newAgent(t)
	c1, c2 := f.conn("unix"), f.conn("websocket")
	f.attach(c1, "")
	f.attach(c2, "")
	if resp := f.prompt(c1, "p1", `sim: tool write {"path":"out.txt","content":"hello"}`); !resp.Success {
		t.Fatalf("prompt: %+v", resp.Error)
	}
	req1, req2 := permissionRequest(t, c1), permissionRequest(t, c2)
	if req1.RequestID == "" || req1.RequestID != req2.RequestID || req1.ToolName != "write" || req1.AgentID != f.m.AgentID {
		t.Fatalf("requests %+v / %+v", req1, req2)
	}
	answer := func(c *actortest.Conn, id, decision, choice string) protocol.Response {
		t.Helper()
		return f.call(c, &protocol.PermissionResponse{Header: f.header(protocol.TypePermissionResponse, id),
			RequestID: req1.RequestID, Decision: decision, ChoiceID: choice})
	}
	if resp := answer(c1, "a1", "", "no-such-choice"); resp.Success || resp.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("unknown choice_id = %+v, want INVALID_REQUEST", resp)
	}
	if resp := answer(c2, "a2", "", "allow"); !resp.Success {
		t.Fatalf("winning answer: %+v", resp.Error)
	}
	if resp := answer(c1, "a3", protocol.DecisionDeny, ""); !resp.Success {
		t.Fatalf("late answer = %+v, want success (dropped)", resp.Error)
	}
	for _, c := range []*actortest.Conn{c1, c2} {
		res := permissionResolved(t, c)
		if res.RequestID != req1.RequestID || res.ChoiceID != "allow" || res.Source != "websocket" {
			t.Errorf("permission_resolved = %+v, want choice allow from websocket", res)
		}
		rec, _ := c.Expect(t, actortest.Type(protocol.TypeToolResult))
		var tr protocol.ToolResult
		if rec.Decode(t, &tr); tr.IsError {
			t.Errorf("tool_result after allow is an error: %s", rec.Raw)
		}
		c.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	}
	if b, err := os.ReadFile(filepath.Join(f.m.Cwd, "out.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("out.txt = %q, %v", b, err)
	}
}

// TestActorLevelHeadlessDenyAndInject: a report injected while only an
// observer is attached is accepted (Injected to its sender); the
// permission its turn asks for has no interactive responder, so the
// agent's headless policy (deny) answers it.
func TestActorLevelHeadlessDenyAndInject(t *testing.T) {
	f := newAgent(t)
	obs := f.conn("unix")
	f.attach(obs, protocol.RoleObserver)
	f.parent.Send(f.pid, &agent.Inject{Key: "run-1", Text: `sim: tool write {"path":"no.txt","content":"x"}`})
	if in := actortest.Expect[*agent.Injected](t, f.parent, nil); in.Key != "run-1" || in.Err != nil {
		t.Fatalf("Injected = %+v", in)
	}
	req := permissionRequest(t, obs)
	res := permissionResolved(t, obs)
	if res.RequestID != req.RequestID || res.Decision != protocol.DecisionDeny || res.Source != "headless" {
		t.Fatalf("permission_resolved = %+v, want deny from headless", res)
	}
	rec, _ := obs.Expect(t, actortest.Type(protocol.TypeToolResult))
	var tr protocol.ToolResult
	if rec.Decode(t, &tr); !tr.IsError {
		t.Fatalf("tool_result after a headless deny = %s, want an error", rec.Raw)
	}
	obs.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	if _, err := os.Stat(filepath.Join(f.m.Cwd, "no.txt")); !os.IsNotExist(err) {
		t.Fatalf("no.txt after deny: %v", err)
	}
}

// manualClock is a manual clock for one test; wait waits until n of its
// timers are armed, failing after actortest.Timeout.
type manualClock struct {
	*clock.Manual
	t *testing.T
}

func newManualClock(t *testing.T) manualClock {
	return manualClock{Manual: clock.NewManual(time.Unix(1_700_000_000, 0)), t: t}
}

func (m manualClock) wait(n int) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	if err := m.WaitPending(ctx, n); err != nil {
		m.t.Fatalf("%d timers armed, want %d: %v", m.Pending(), n, err)
	}
}

// barrier returns once the agent has handled everything sent to it so
// far: agent.detach of a connection that is not attached is answered by
// the agent itself.
func (f *fixture) barrier() {
	f.t.Helper()
	c := f.conn("unix")
	f.call(c, &protocol.AgentDetach{Header: f.header(protocol.TypeAgentDetach, "barrier")})
}

// TestActorLevelIdleReaping: the idle timer (fired through a manual
// clock) never reaps an active turn; once the turn ended it stops the
// runtime, which the Hub and the parent see; the next attach restores a
// new generation.
func TestActorLevelIdleReaping(t *testing.T) {
	const idle = time.Minute
	clk := newManualClock(t)
	f := newAgent(t, withClock(clk), func(d *agent.Deps, _ *store.Agent) { d.Runtime.IdleTimeout = idle })
	c := f.conn("unix")
	f.attach(c, "")
	clk.wait(2) // the readiness bound and the idle timer armed when it got ready

	// A turn waiting for the user is active: the idle timer passes it by.
	f.prompt(c, "p1", `sim: ask confirm "proceed?"`)
	rec, _ := c.Expect(t, actortest.Type(protocol.TypeUIRequest))
	var ui protocol.UIRequest
	rec.Decode(t, &ui)
	if fired := clk.Advance(2 * idle); fired == 0 {
		t.Fatal("no timer was due after twice the idle timeout")
	}
	f.barrier()
	for _, r := range f.hub.Queued(t) {
		var ev protocol.AgentStatusChanged
		if r.Type != protocol.TypeAgentStatusChanged {
			continue
		}
		if r.Decode(t, &ev); ev.RuntimeState == protocol.RuntimeStopping {
			t.Fatal("an active turn was reaped")
		}
	}

	resp := f.call(c, &protocol.UIResponse{Header: f.header(protocol.TypeUIResponse, "u1"), RequestID: ui.RequestID, Value: json.RawMessage(`"yes"`)})
	if !resp.Success {
		t.Fatalf("ui_response: %+v", resp.Error)
	}
	c.Expect(t, actortest.Type(protocol.TypeTurnEnd))
	c.Expect(t, func(r actortest.Record) bool {
		var st protocol.Status
		return r.Type == protocol.TypeStatus && json.Unmarshal(r.Raw, &st) == nil && st.Status == protocol.StatusIdle
	})
	clk.wait(1) // idle again: the idle timer is armed anew
	clk.Advance(idle)
	f.statusChanged(protocol.RuntimeStopping)
	if ev := f.statusChanged(protocol.RuntimeStopped); ev.Status != protocol.StatusIdle {
		t.Fatalf("reaped status = %+v", ev)
	}
	f.info(runtimeState(protocol.RuntimeStopped))
	actortest.Eventually(t, "the reaped runtime process gone", func() bool {
		return len(actortest.RuntimePIDs(t, f.m.AgentID)) == 0
	})

	// Restored on demand, as a new generation.
	c2 := f.conn("unix")
	if _, s := f.attach(c2, ""); s.RuntimeEpoch == nil || *s.RuntimeEpoch != 1 {
		t.Fatalf("restored sync epoch = %v, want 1", s.RuntimeEpoch)
	}
}

// TestActorLevelKillEscalatesThroughAHungRuntime: agent.kill of a runtime
// that ignores abort and SIGTERM (`sim: hang`) goes through both graces
// (fired through a manual clock) to SIGKILL, and is answered once the
// process is gone; the identity stays usable.
func TestActorLevelKillEscalatesThroughAHungRuntime(t *testing.T) {
	clk := newManualClock(t)
	f := newAgent(t, withClock(clk))
	c := f.conn("unix")
	f.attach(c, "")
	clk.wait(1) // the readiness bound (no idle timeout here)
	f.prompt(c, "p1", "sim: say hanging\nsim: hang")
	c.Expect(t, actortest.Type(protocol.TypeMessageDelta))
	pid := f.runtimePID()
	// The hang is in place once the runtime ignores SIGTERM (it stops
	// reading input first); before that an abort would be honoured.
	actortest.Eventually(t, "the runtime ignores SIGTERM", func() bool { return actortest.Ignores(pid, syscall.SIGTERM) })

	f.send(c, &protocol.AgentKill{Header: f.header(protocol.TypeAgentKill, "k1")})
	clk.wait(2) // abort sent; its grace armed
	f.statusChanged(protocol.RuntimeStopping)
	clk.Advance(2 * time.Second)
	clk.wait(2) // SIGTERM sent; its grace armed
	if !actortest.Alive(pid) {
		t.Fatal("the hung runtime died of abort or SIGTERM")
	}
	for _, r := range c.Queued(t) {
		if r.Type == protocol.TypeResponse && r.ID == "k1" {
			t.Fatalf("agent.kill answered before the kill stage: %s", r.Raw)
		}
	}
	clk.Advance(2 * time.Second)
	rec, _ := c.Expect(t, actortest.ResponseTo("k1"))
	if resp := rec.Response(t); !resp.Success {
		t.Fatalf("agent.kill: %s", rec.Raw)
	}
	if actortest.Alive(pid) {
		t.Fatal("runtime alive after the kill response")
	}
	if !f.log.Contains("stage=kill") {
		t.Fatal("the escalation never reached the kill stage")
	}
	f.info(runtimeState(protocol.RuntimeStopped))

	if resp := f.prompt(c, "p2", "sim: say back"); !resp.Success {
		t.Fatalf("prompt after kill: %+v", resp.Error)
	}
	c.Expect(t, actortest.Type(protocol.TypeTurnEnd))
}

// TestActorLevelTerminate: agent.terminate stops an idle runtime at once;
// during a turn it is deferred until the turn ends; with no runtime it is
// a no-op.
func TestActorLevelTerminate(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	f.attach(c, "")
	terminate := func(id string) protocol.AgentTerminateData {
		t.Helper()
		resp := f.call(c, &protocol.AgentTerminate{Header: f.header(protocol.TypeAgentTerminate, id)})
		var data protocol.AgentTerminateData
		if !resp.Success {
			t.Fatalf("agent.terminate: %+v", resp.Error)
		}
		return *decode(t, resp.Data, &data)
	}
	if terminate("t1").Deferred {
		t.Fatal("terminate of an idle runtime deferred")
	}
	f.statusChanged(protocol.RuntimeStopping)
	f.statusChanged(protocol.RuntimeStopped)
	actortest.Eventually(t, "runtime gone", func() bool { return len(actortest.RuntimePIDs(t, f.m.AgentID)) == 0 })
	if terminate("t2").Deferred {
		t.Fatal("terminate with no runtime deferred")
	}

	f.prompt(c, "p1", `sim: ask confirm "stop?"`) // restores the runtime
	rec, _ := c.Expect(t, actortest.Type(protocol.TypeUIRequest))
	var ui protocol.UIRequest
	rec.Decode(t, &ui)
	if !terminate("t3").Deferred {
		t.Fatal("terminate during a turn not deferred")
	}
	f.call(c, &protocol.UIResponse{Header: f.header(protocol.TypeUIResponse, "u1"), RequestID: ui.RequestID, Value: json.RawMessage(`"yes"`)})
	c.Expect(t, actortest.Type(protocol.TypeTurnEnd)) // the turn finishes first
	f.statusChanged(protocol.RuntimeStopping)
	f.statusChanged(protocol.RuntimeStopped)
}

// TestActorLevelRuntimeCrash: a runtime that exits on its own is reported
// failed (agent_exited with its exit code on the Hub, an error event to
// the attached client, the parent's projection); the next prompt
// restores a new generation.
func TestActorLevelRuntimeCrash(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	f.attach(c, "")
	f.prompt(c, "p1", "sim: exit 3")
	var exited protocol.AgentExited
	f.hub.Expect(t, func(r actortest.Record) bool {
		return r.Type == protocol.TypeAgentExited && r.AgentID == f.m.AgentID && json.Unmarshal(r.Raw, &exited) == nil
	})
	if exited.RuntimeState != protocol.RuntimeFailed || exited.ExitCode == nil || *exited.ExitCode != 3 {
		t.Fatalf("agent_exited = %+v, want failed with exit code 3", exited)
	}
	rec, _ := c.Expect(t, actortest.Type(protocol.TypeError))
	var ev protocol.ErrorEvent
	if rec.Decode(t, &ev); ev.Code != protocol.CodeInternal || rec.AgentID != f.m.AgentID {
		t.Fatalf("error event = %s", rec.Raw)
	}
	if info := f.info(runtimeState(protocol.RuntimeFailed)); info.Status != protocol.StatusError {
		t.Fatalf("info after the crash = %+v", info)
	}

	f.send(c, &protocol.Prompt{Header: f.header(protocol.TypePrompt, "p2"), Message: "sim: say again"})
	rec, _ = c.Expect(t, actortest.Type(protocol.TypeSync))
	var s protocol.Sync
	if rec.Decode(t, &s); s.RuntimeEpoch == nil || *s.RuntimeEpoch != 1 {
		t.Fatalf("sync after restore = %s, want epoch 1", rec.Raw)
	}
	if rec, _ := c.Expect(t, actortest.ResponseTo("p2")); !rec.Response(t).Success {
		t.Fatalf("prompt after restore: %s", rec.Raw)
	}
}

// TestActorLevelShutdownDrains: Shutdown stops the runtime and the parent
// hears Drained; afterwards no runtime starts, and another Shutdown drains
// at once.
func TestActorLevelShutdownDrains(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	f.create(c)
	f.sys.Root.Send(f.pid, &agent.Shutdown{})
	if d := actortest.Expect[*agent.Drained](t, f.parent, nil); d.AgentID != f.m.AgentID {
		t.Fatalf("Drained = %+v", d)
	}
	if n := len(actortest.RuntimePIDs(t, f.m.AgentID)); n != 0 {
		t.Fatalf("%d runtime processes after Drained", n)
	}
	f.info(runtimeState(protocol.RuntimeStopped))
	resp := f.call(c, &protocol.AgentAttach{Header: f.header(protocol.TypeAgentAttach, "a1")})
	if resp.Success || resp.Error.Code != protocol.CodeRuntimeStartFailed {
		t.Fatalf("attach while drained = %+v, want RUNTIME_START_FAILED", resp)
	}
	f.sys.Root.Send(f.pid, &agent.Shutdown{Force: true})
	actortest.Expect[*agent.Drained](t, f.parent, nil)
}

// TestActorLevelLease: a lease starts the runtime and runs its task: the
// holder hears LeaseStarted, then LeaseEnded with the final text. While
// it holds the agent a client's prompt is refused with CONFLICT.
func TestActorLevelLease(t *testing.T) {
	f := newAgent(t)
	c := f.conn("unix")
	f.attach(c, "")
	holder := actortest.NewProbe(t, f.sys, "jobs")
	f.sys.Root.Send(f.pid, &agent.LeaseStart{RunID: "run-1", Task: `sim: ask confirm "go?"`, Holder: holder.PID})
	if st := actortest.Expect[*agent.LeaseStarted](t, holder, nil); st.RunID != "run-1" || st.AgentID != f.m.AgentID {
		t.Fatalf("LeaseStarted = %+v", st)
	}
	rec, _ := c.Expect(t, actortest.Type(protocol.TypeUIRequest))
	var ui protocol.UIRequest
	rec.Decode(t, &ui)
	if resp := f.prompt(c, "p1", "hi"); resp.Success || resp.Error.Code != protocol.CodeConflict {
		t.Fatalf("prompt during a lease = %+v, want CONFLICT", resp)
	}
	f.call(c, &protocol.UIResponse{Header: f.header(protocol.TypeUIResponse, "u1"), RequestID: ui.RequestID, Value: json.RawMessage(`"yes"`)})
	end := actortest.Expect[*agent.LeaseEnded](t, holder, nil)
	if end.RunID != "run-1" || !end.Completed || end.Cancelled || end.Error != "" || end.FinalText != "answer: yes" {
		t.Fatalf("LeaseEnded = %+v, want completed with the turn's final text", end)
	}
	// Released: the client may prompt again.
	if resp := f.prompt(c, "p2", "sim: say free"); !resp.Success {
		t.Fatalf("prompt after the lease: %+v", resp.Error)
	}
}

// TestActorLevelStartTimeout: a runtime that never gets ready is killed
// when the readiness bound (fired through a manual clock) passes; the
// create is answered RUNTIME_START_FAILED and the agent is reported
// failed, its identity kept.
func TestActorLevelStartTimeout(t *testing.T) {
	sleep := testhost.Tool(t, "sleep") // stands in for a mute runtime
	clk := newManualClock(t)
	f := newAgent(t, withClock(clk), func(d *agent.Deps, _ *store.Agent) {
		d.Runtime.Path, d.Runtime.Args = sleep, []string{"600"} // never writes hello
	})
	c := f.conn("unix")
	f.send(c, &protocol.AgentCreate{Header: f.header(protocol.TypeAgentCreate, "create-1"), Cwd: f.m.Cwd})
	f.statusChanged(protocol.RuntimeStarting)
	clk.wait(1)
	actortest.Eventually(t, "the mute runtime started", func() bool { return len(actortest.RuntimePIDs(t, f.m.AgentID)) == 1 })
	clk.Advance(actortest.Timeout) // the readiness bound
	rec := c.Take(t, actortest.ResponseTo("create-1"))
	if resp := rec.Response(t); resp.Success || resp.Error.Code != protocol.CodeRuntimeStartFailed {
		t.Fatalf("create = %s, want RUNTIME_START_FAILED", rec.Raw)
	}
	var exited protocol.AgentExited
	f.hub.Expect(t, func(r actortest.Record) bool {
		return r.Type == protocol.TypeAgentExited && json.Unmarshal(r.Raw, &exited) == nil
	})
	if exited.RuntimeState != protocol.RuntimeFailed || !strings.Contains(exited.Reason, "not ready") {
		t.Fatalf("agent_exited = %+v", exited)
	}
	if info := f.info(runtimeState(protocol.RuntimeFailed)); info.AgentID != f.m.AgentID {
		t.Fatalf("info = %+v", info)
	}
}

// TestActorLevelSubagentRoutesRequestsUp: a subagent with no interactive
// client of its own sends its permission request up the hierarchy,
// through its parent (the registry), to its parent agent.
func TestActorLevelSubagentRoutesRequestsUp(t *testing.T) {
	const parentID = "agent-parent"
	f := newAgent(t, func(_ *agent.Deps, m *store.Agent) { m.ParentAgentID = parentID })
	f.parent.Send(f.pid, &agent.Inject{Key: "run-1", Text: `sim: tool write {"path":"x.txt","content":"x"}`})
	actortest.Expect[*agent.Injected](t, f.parent, nil)
	if r := actortest.Expect[*agent.Route](t, f.parent, nil); r.AgentID != parentID || r.Msg == nil {
		t.Fatalf("Route = %+v, want a message for %s", r, parentID)
	}
}

// TestActorLevelLeaseStopOfAHungRuntimeReportsKill: a leased run whose
// runtime ignores abort and SIGTERM (`sim: hang`) is stopped through the
// whole escalation; the holder hears each stage while it runs
// (LeaseStopping) and LeaseEnded with stage kill, the one that ended the
// process (the escalation state used to be cleared before it was read).
func TestActorLevelLeaseStopOfAHungRuntimeReportsKill(t *testing.T) {
	clk := newManualClock(t)
	f := newAgent(t, withClock(clk))
	c := f.conn("unix")
	f.attach(c, "")
	clk.wait(1) // the readiness bound
	holder := actortest.NewProbe(t, f.sys, "jobs")
	f.sys.Root.Send(f.pid, &agent.LeaseStart{RunID: "run-1", Task: "sim: say hanging\nsim: hang", Holder: holder.PID})
	actortest.Expect[*agent.LeaseStarted](t, holder, nil)
	c.Expect(t, actortest.Type(protocol.TypeMessageDelta))
	pid := f.runtimePID()
	actortest.Eventually(t, "the runtime ignores SIGTERM", func() bool { return actortest.Ignores(pid, syscall.SIGTERM) })

	f.sys.Root.Send(f.pid, &agent.LeaseStop{RunID: "run-1"})
	if st := actortest.Expect[*agent.LeaseStopping](t, holder, nil); st.RunID != "run-1" || st.Stage != "abort" {
		t.Fatalf("first LeaseStopping = %+v, want abort", st)
	}
	clk.wait(2)
	clk.Advance(2 * time.Second)
	if st := actortest.Expect[*agent.LeaseStopping](t, holder, nil); st.Stage != "term" {
		t.Fatalf("second LeaseStopping = %+v, want term", st)
	}
	clk.wait(2)
	clk.Advance(2 * time.Second)
	if st := actortest.Expect[*agent.LeaseStopping](t, holder, nil); st.Stage != "kill" {
		t.Fatalf("third LeaseStopping = %+v, want kill", st)
	}
	end := actortest.Expect[*agent.LeaseEnded](t, holder, nil)
	if end.RunID != "run-1" || !end.Cancelled || end.Completed || end.StopStage != "kill" {
		t.Fatalf("LeaseEnded = %+v, want cancelled at stage kill", end)
	}
}
