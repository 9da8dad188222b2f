package refagent

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// teamResultOf returns the single tool_result among evs, asserting that the
// call was the team tool's, reported as not read-only, and asked no
// permission.
func teamResultOf(t *testing.T, evs []event) *protocol.ToolResult {
	t.Helper()
	call := one[*protocol.ToolCall](t, evs)
	if call.Name != toolTeam || call.ReadOnly == nil || *call.ReadOnly {
		t.Fatalf("tool_call %+v: want team with read_only false", call)
	}
	if n := len(of[*protocol.PermissionRequest](evs)); n != 0 {
		t.Fatalf("the team tool asked for permission %d times", n)
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.ToolCallID != call.ToolCallID {
		t.Fatalf("tool_result %+v does not answer %s", res, call.ToolCallID)
	}
	return res
}

func TestTeamToolActionsSendTheirCommands(t *testing.T) {
	d := newFakeDaemon(t, echoAnswer)
	h := startWithDaemon(t, d, nil)
	tests := []struct {
		name, args string
		want       map[string]any
	}{
		{"create tasks with deps, after, priority and an assignee",
			`{"action":"create_tasks","goal_id":"goal-1","tasks":[{"title":"a","prompt":"do a","priority":2,"assignee":"agent-w1"},` +
				`{"title":"b","prompt":"do b\nthen more","description":"the b part","deps":["task-0"],"after":[1]}]}`,
			map[string]any{"type": "team.task.create", "goal_id": "goal-1", "by_agent_id": "agent-test", "tasks": []protocol.TeamTaskSpec{
				{Title: "a", Prompt: "do a", Priority: 2, Assignee: "agent-w1"},
				{Title: "b", Prompt: "do b\nthen more", Description: "the b part", Deps: []string{"task-0"}, After: []int{1}}}}},
		{"after as one number", `{"action":"create_tasks","goal_id":"goal-1","tasks":[{"title":"a","prompt":"x"},{"title":"b","prompt":"y","after":1}]}`,
			map[string]any{"type": "team.task.create", "goal_id": "goal-1", "by_agent_id": "agent-test", "tasks": []protocol.TeamTaskSpec{
				{Title: "a", Prompt: "x"}, {Title: "b", Prompt: "y", After: []int{1}}}}},
		{"memory list of every scope", `{"action":"memory_list"}`, map[string]any{"type": "team.memory.list"}},
		{"memory list of my own scope", `{"action":"memory_list","scope":"self"}`, map[string]any{"type": "team.memory.list", "scope": "agent-test"}},
		{"memory write defaults to shared", `{"action":"memory_write","key":"conventions","title":"How we work","body":"# Tabs\nalways"}`,
			map[string]any{"type": "team.memory.put", "scope": "shared", "key": "conventions", "title": "How we work", "body": "# Tabs\nalways", "author": "agent-test"}},
		{"memory write to my own scope", `{"action":"memory_write","scope":"self","key":"k","body":"b"}`,
			map[string]any{"type": "team.memory.put", "scope": "agent-test", "key": "k", "body": "b", "author": "agent-test"}},
		{"memory write to another scope", `{"action":"memory_write","scope":"agent-7","key":"k","body":""}`,
			map[string]any{"type": "team.memory.put", "scope": "agent-7", "key": "k", "body": "", "author": "agent-test"}},
		{"message the person", `{"action":"message","to":"user","text":"the plan is ready","goal_id":"goal-1"}`,
			map[string]any{"type": "team.message", "to": "user", "text": "the plan is ready", "goal_id": "goal-1", "from_agent_id": "agent-test"}},
		{"message the lead", `{"action":"message","to":"lead","text":"done with a"}`,
			map[string]any{"type": "team.message", "to": "lead", "text": "done with a", "from_agent_id": "agent-test"}},
		{"goals", `{"action":"goals","open_only":true}`, map[string]any{"type": "team.goal.list", "open_only": true}},
		{"board", `{"action":"board","goal_id":"goal-1"}`, map[string]any{"type": "team.goal.show", "goal_id": "goal-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.prompt("sim: tool team " + tt.args)
			res := teamResultOf(t, h.untilIdle())
			req := d.request()
			d.waitClosed() // one connection per call, closed after the response
			if got := payload(t, req); !jsonEq(t, got, tt.want) {
				t.Errorf("daemon received %s\nwant %s", req.raw, protocol.MustMarshal(tt.want))
			}
			wantValue := map[string]any{"echo": tt.want["type"], "n": 1}
			if res.IsError || res.Content.Kind != "json" || !jsonEq(t, res.Content.Value, wantValue) {
				t.Errorf("tool_result %+v, want json %v", res.Content, wantValue)
			}
		})
	}
}

func TestTeamToolRunsInPlanMode(t *testing.T) {
	d := newFakeDaemon(t, echoAnswer)
	h := startWithDaemon(t, d, func(o *Options) { o.Mode = modePlan })
	h.prompt(`sim: tool team {"action":"create_tasks","goal_id":"goal-1","tasks":[{"title":"a","prompt":"x"}]}`)
	if res := teamResultOf(t, h.untilIdle()); res.IsError {
		t.Fatalf("plan mode refused the team tool: %+v", res.Content)
	}
	if req := d.request(); req.header.Type != protocol.TypeTeamTaskCreate {
		t.Fatalf("daemon received %s", req.raw)
	}
}

func TestTeamToolErrors(t *testing.T) {
	d := newFakeDaemon(t, func(req fakeRequest) (any, error) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no goal %v", req.fields["goal_id"])
	})
	h := startWithDaemon(t, d, nil)

	t.Run("daemon error keeps its code and message", func(t *testing.T) {
		h.prompt(`sim: tool team {"action":"board","goal_id":"goal-x"}`)
		evs := h.untilIdle()
		res := teamResultOf(t, evs)
		if !res.IsError || res.Content.Kind != "error" || res.Content.Message != "team.goal.show failed: NOT_FOUND: no goal goal-x" {
			t.Fatalf("tool_result %+v", res.Content)
		}
		if txt := assistantText(evs); !strings.HasSuffix(txt, afterToolsReply) {
			t.Fatalf("a tool error must not end the turn: %q", txt)
		}
		d.request()
	})

	invalid := []struct{ args, want string }{
		{`{}`, `argument "action" is required`},
		{`{"action":"dance"}`, `unknown action "dance"`},
		{`{"action":["board"]}`, `argument "action" must be a string`},
		{`{"action":"board"}`, `field "goal_id"`},
		{`{"action":"create_tasks","tasks":[{"title":"a","prompt":"x"}]}`, `field "goal_id"`},
		{`{"action":"create_tasks","goal_id":"g"}`, `field "tasks"`},
		{`{"action":"create_tasks","goal_id":"g","tasks":"a"}`, `"tasks" must be a list`},
		{`{"action":"create_tasks","goal_id":"g","tasks":["a"]}`, `element 0 must be an object`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"prompt":"x"}]}`, `field "tasks[0].title"`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a"}]}`, `field "tasks[0].prompt"`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","after":[1]}]}`, `field "tasks[0].after"`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x"},{"title":"b","prompt":"y","after":[2]}]}`, `field "tasks[1].after"`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","after":[1.5]}]}`, `element 0 must be an integer`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","priority":"high"}]}`, `"priority" must be an integer`},
		{`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","deps":[1]}]}`, `element 0 must be a string`},
		{`{"action":"memory_write","body":"b"}`, `field "key"`},
		{`{"action":"memory_write","key":"k","body":3}`, `argument "body" must be a string`},
		{`{"action":"message","text":"hi"}`, `field "to"`},
		{`{"action":"message","to":"user"}`, `field "text"`},
		{`{"action":"goals","open_only":"yes"}`, `"open_only" must be true or false`},
	}
	for _, tt := range invalid {
		t.Run(tt.args, func(t *testing.T) {
			h.prompt("sim: tool team " + tt.args)
			res := teamResultOf(t, h.untilIdle())
			if !res.IsError || !strings.HasPrefix(res.Content.Message, "invalid arguments: ") || !strings.Contains(res.Content.Message, tt.want) {
				t.Fatalf("tool_result %q, want invalid arguments with %q", res.Content.Message, tt.want)
			}
		})
	}
	d.noRequest() // invalid calls never reach the daemon

	t.Run("no daemon", func(t *testing.T) {
		for _, mod := range []func(*Options){
			func(o *Options) { o.Socket = "" },
			func(o *Options) { o.AgentID = "" },
		} {
			h := startWithDaemon(t, d, mod)
			h.prompt(`sim: tool team {"action":"memory_list"}`)
			res := teamResultOf(t, h.untilIdle())
			if !res.IsError || !strings.Contains(res.Content.Message, "the team tool needs the daemon") {
				t.Fatalf("tool_result %+v", res.Content)
			}
			// Nor is the model told about it.
			if tb := newToolbox(h.opts, slog.New(slog.DiscardHandler), func() string { return "" }, nil); slices.ContainsFunc(tb.specs, func(s provider.ToolSpec) bool { return s.Name == toolTeam }) {
				t.Fatalf("the team tool is offered without a daemon")
			}
		}
		d.noRequest()
	})

	t.Run("unreachable daemon", func(t *testing.T) {
		h := start(t, func(o *Options) { o.Socket = filepath.Join(t.TempDir(), "gone.sock") })
		h.handshake()
		h.prompt(`sim: tool team {"action":"memory_list"}`)
		res := teamResultOf(t, h.untilIdle())
		if !res.IsError || !strings.HasPrefix(res.Content.Message, "team.memory.list failed: reach the daemon: ") {
			t.Fatalf("tool_result %+v", res.Content)
		}
	})
}

func TestTeamIsAToolName(t *testing.T) {
	if !slices.Contains(ToolNames(), toolTeam) {
		t.Fatalf("ToolNames() = %v, want team among them", ToolNames())
	}
}

// FuzzTeamCommand: any JSON object of arguments, decoded as a model's
// (float64) or a sim directive's (json.Number), builds a command that
// validates, or is refused with an error; never a panic.
func FuzzTeamCommand(f *testing.F) {
	for _, s := range []string{
		`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","priority":-3},{"title":"b","prompt":"y","after":[1],"deps":["t"]}]}`,
		`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","after":1e400}]}`,
		`{"action":"create_tasks","goal_id":"g","tasks":[{"title":"a","prompt":"x","priority":2147483648}]}`,
		`{"action":"memory_write","scope":"self","key":"k","body":"b"}`, `{"action":"memory_list","scope":7}`,
		`{"action":"message","to":"user","text":"hi"}`, `{"action":"goals","open_only":true}`, `{"action":"board","goal_id":"g"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(strings.NewReader(raw))
			if useNumber {
				dec.UseNumber()
			}
			var args map[string]any
			if dec.Decode(&args) != nil || args == nil {
				return
			}
			cmd, err := teamCommand("agent-x", args)
			if err != nil {
				continue
			}
			if err := cmd.Validate(); err != nil {
				t.Fatalf("teamCommand built an invalid command %+v: %v", cmd, err)
			}
			if !strings.HasPrefix(cmd.Head().Type, "team.") {
				t.Fatalf("command type %q", cmd.Head().Type)
			}
		}
	})
}
