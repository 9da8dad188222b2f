package server

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// TestDerive pins the state/station table of docs/agentcraft.md §10.3, row
// by row.
func TestDerive(t *testing.T) {
	task := func(state, ci string) *protocol.TeamTask {
		return &protocol.TeamTask{Title: "Tag parser", State: state, CI: protocol.TeamCI{Status: ci}}
	}
	doing := task(protocol.TaskDoing, protocol.CIUnknown)
	for _, tc := range []struct {
		name    string
		a       agentRec
		task    *protocol.TeamTask
		waiting bool
		lead    bool
		want    look
	}{
		{"stopped", agentRec{stopped: true, phase: protocol.PhaseTool, tool: "edit"}, doing, true, false, look{wire.StateIdle, wire.StationLounge, "off shift"}},
		{"paused", agentRec{paused: true, phase: protocol.PhaseThinking}, doing, false, false, look{wire.StateIdle, wire.StationDesk, "paused: Tag parser"}},
		{"runtime failed", agentRec{info: protocol.AgentInfo{RuntimeState: protocol.RuntimeFailed}}, doing, false, false, look{wire.StateError, wire.StationDesk, "error: Tag parser"}},
		{"phase error", agentRec{phase: protocol.PhaseError}, nil, false, false, look{wire.StateError, wire.StationDesk, "error"}},
		{"decision waits", agentRec{phase: protocol.PhaseTool, tool: "bash"}, doing, true, false, look{wire.StateWaitingUser, wire.StationUser, "waiting for you: Tag parser"}},
		{"permission", agentRec{status: protocol.StatusWaitingForPermission}, doing, false, false, look{wire.StateWaitingUser, wire.StationUser, "waiting for you: Tag parser"}},
		{"ui", agentRec{status: protocol.StatusWaitingForUI}, nil, false, true, look{wire.StateWaitingUser, wire.StationUser, "waiting for you"}},
		{"ci running", agentRec{}, task(protocol.TaskDoing, protocol.CIRunning), false, false, look{wire.StateTesting, wire.StationTestbench, "testing: Tag parser"}},
		{"read", agentRec{phase: protocol.PhaseTool, tool: "grep"}, doing, false, false, look{wire.StateReading, wire.StationLibrary, "reading: Tag parser"}},
		{"edit", agentRec{phase: protocol.PhaseTool, tool: "edit"}, doing, false, false, look{wire.StateEditing, wire.StationDesk, "editing: Tag parser"}},
		{"write", agentRec{phase: protocol.PhaseTool, tool: "write"}, doing, false, false, look{wire.StateEditing, wire.StationDesk, "editing: Tag parser"}},
		{"bash", agentRec{phase: protocol.PhaseTool, tool: "bash"}, doing, false, false, look{wire.StateRunning, wire.StationTerminal, "running a command: Tag parser"}},
		{"lead's team tool", agentRec{phase: protocol.PhaseTool, tool: "team"}, nil, false, true, look{wire.StateThinking, wire.StationMeeting, "coordinating"}},
		{"other tool", agentRec{phase: protocol.PhaseTool, tool: "subagent"}, doing, false, false, look{wire.StateThinking, wire.StationDesk, "using subagent: Tag parser"}},
		{"lead thinking", agentRec{phase: protocol.PhaseStreaming}, nil, false, true, look{wire.StateThinking, wire.StationMeeting, "planning"}},
		{"worker thinking", agentRec{phase: protocol.PhaseThinking}, doing, false, false, look{wire.StateThinking, wire.StationDesk, "thinking: Tag parser"}},
		{"compacting", agentRec{status: protocol.StatusCompacting}, doing, false, false, look{wire.StateThinking, wire.StationDesk, "thinking: Tag parser"}},
		{"review", agentRec{phase: protocol.PhaseIdle}, task(protocol.TaskReview, protocol.CIPass), false, false, look{wire.StateDone, wire.StationMergestation, "in review: Tag parser"}},
		{"blocked", agentRec{}, task(protocol.TaskBlocked, ""), false, false, look{wire.StateBlocked, wire.StationDesk, "blocked: Tag parser"}},
		{"done", agentRec{}, task(protocol.TaskDone, ""), false, false, look{wire.StateDone, wire.StationLounge, "done: Tag parser"}},
		{"idle", agentRec{}, nil, false, false, look{wire.StateIdle, wire.StationLounge, "idle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := derive(&tc.a, tc.task, tc.waiting, tc.lead); got != tc.want {
				t.Errorf("derive = %+v, want %+v", got, tc.want)
			}
		})
	}
	long := strings.Repeat("x", 60)
	if got := cut("editing: " + long); len([]rune(got)) != wire.ActivityMax || !strings.HasSuffix(got, "…") {
		t.Errorf("cut = %q", got)
	}
}

// TestAgentIDs: ids come from the agent's names, lowercased and
// deduplicated, never user or all, and never change.
func TestAgentIDs(t *testing.T) {
	m := newModel()
	m.agent("a1").info = protocol.AgentInfo{AgentID: "a1", Title: "lead"}
	m.agent("a2").info = protocol.AgentInfo{AgentID: "a2", Title: "lead"}
	m.agent("a3").info = protocol.AgentInfo{AgentID: "a3", Alias: "Kit Carson"}
	m.agent("a4").info = protocol.AgentInfo{AgentID: "a4"}
	m.agent("a5").info = protocol.AgentInfo{AgentID: "a5", Name: "user"}
	m.agent("a6").info = protocol.AgentInfo{AgentID: "a6", DisplayName: "Ünïcode"}
	want := map[string]string{"a1": "lead", "a2": "lead-2", "a3": "kit-carson", "a4": "agent", "a5": "agent-2", "a6": "n-code"}
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5", "a6"} {
		if got := m.dialectID(id); got != want[id] {
			t.Errorf("%s: id %q, want %q", id, got, want[id])
		}
	}
	m.agent("a1").info.Title = "renamed"
	if got := m.dialectID("a1"); got != "lead" {
		t.Errorf("after a rename: %q, want the id kept", got)
	}
	if id, ok := m.resolveAgent("Kit-Carson"); !ok || id != "a3" {
		t.Errorf("resolve = %q %v", id, ok)
	}
	if got := displayName(m.agent("a3")); got != "Kit Carson" {
		t.Errorf("name = %q", got)
	}
}

// TestEventQueue: events come out in order, without a bound, and the end
// is reported once they are all out.
func TestEventQueue(t *testing.T) {
	q := newEventQueue()
	done := make(chan []string)
	go func() {
		var got []string
		for {
			msg, ok := q.pop()
			if !ok {
				done <- got
				return
			}
			got = append(got, msg.(*protocol.AgentActivity).AgentID)
		}
	}()
	var want []string
	for i := 0; i < 10000; i++ {
		id := "agent-" + strings.Repeat("x", i%7)
		want = append(want, id)
		q.push(&protocol.AgentActivity{Header: protocol.Header{Type: protocol.TypeAgentActivity, AgentID: id}})
	}
	q.push(nil)
	got := <-done
	if len(got) != len(want) {
		t.Fatalf("%d events out, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// TestPermissionContext: a permission decision's context ends with the
// scope of "Always allow for this agent", after the cwd of its task.
func TestPermissionContext(t *testing.T) {
	m := newModel()
	m.tasks["t1"] = protocol.TeamTask{TaskID: "t1", Worktree: "/wt/t1"}
	d := protocol.TeamDecision{DecisionID: "d1", TaskID: "t1", Kind: protocol.DecisionKindPermission, Tool: "write", Context: "notes.txt",
		Options: wire.PermissionOptions(), State: protocol.DecisionOpen}
	want := "notes.txt\ncwd: /wt/t1\n" + wire.AlwaysAllowCovers + "this exact write call, with the same arguments"
	if got := m.decisionEntity(d).Context; got != want {
		t.Errorf("context = %q, want %q", got, want)
	}
	d.Tool, d.TaskID = "bash", ""
	if got := m.decisionEntity(d).Context; !strings.HasPrefix(got, "notes.txt\n"+wire.AlwaysAllowCovers+"commands of the same form") {
		t.Errorf("bash context = %q", got)
	}
	d.Context = "x\n" + wire.AlwaysAllowCovers + "what the team says"
	if got := m.decisionEntity(d).Context; got != d.Context {
		t.Errorf("a context with its line = %q, want it kept", got)
	}
}
