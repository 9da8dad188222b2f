package daemontool

import (
	"encoding/json"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestCommands: each action builds its command with the calling agent in
// the field the daemon checks, and a refusal names the argument.
func TestCommands(t *testing.T) {
	const me = "agent-me"
	steer, err := SubagentCommand(ActionSteer, me, map[string]any{"target": "run-1", "message": "hurry"})
	if s, ok := steer.(*protocol.SubagentSteer); err != nil || !ok || s.ParentAgentID != me || s.Target != "run-1" || s.Message != "hurry" {
		t.Fatalf("steer = %+v, %v", steer, err)
	}
	wait, err := SubagentCommand(ActionWait, me, map[string]any{"handles": "job-1", "mode": "any", "timeout": 2.5})
	if w, ok := wait.(*protocol.SubagentWait); err != nil || !ok || w.ParentAgentID != me || w.Handles[0] != "job-1" || *w.Timeout != 2.5 {
		t.Fatalf("wait = %+v, %v", wait, err)
	}
	if _, err := SubagentCommand(ActionStop, me, nil); err == nil {
		t.Fatal("stop without a handle was built")
	}
	if _, err := SubagentCommand("nope", me, nil); err == nil {
		t.Fatal("an unknown action was built")
	}
	dec, err := TeamCommand(ActionDecisions, me, map[string]any{"goal_id": "goal-1", "open_only": true})
	if d, ok := dec.(*protocol.TeamDecisionList); err != nil || !ok || d.GoalID != "goal-1" || !d.OpenOnly {
		t.Fatalf("decisions = %+v, %v", dec, err)
	}
	ans, err := TeamCommand(ActionAnswer, me, map[string]any{"decision_id": "decision-1", "index": json.Number("1")})
	if a, ok := ans.(*protocol.TeamDecisionAnswer); err != nil || !ok || a.DecisionID != "decision-1" || a.Index == nil || *a.Index != 1 || a.ByAgentID != me {
		t.Fatalf("answer = %+v, %v", ans, err)
	}
	if _, err := TeamCommand(ActionAnswer, me, map[string]any{"decision_id": "decision-1", "index": 0.5}); err == nil {
		t.Fatal("a fractional index was built")
	}
	mem, err := TeamCommand(ActionMemoryWrite, me, map[string]any{"scope": "self", "key": "k", "body": "b"})
	if m, ok := mem.(*protocol.TeamMemoryPut); err != nil || !ok || m.Scope != me || m.Author != me {
		t.Fatalf("memory_write = %+v, %v", mem, err)
	}
}

// FuzzCommands: any JSON object of arguments builds a valid command of
// each action or is refused; it never panics.
func FuzzCommands(f *testing.F) {
	f.Add(`{"name":"a","task":"b"}`)
	f.Add(`{"tasks":[{"name":"a","task":"b"}],"strategy":"chain"}`)
	f.Add(`{"handles":["job-1"],"timeout":"3"}`)
	f.Add(`{"goal_id":"goal-1","tasks":[{"title":"t","prompt":"p","after":[1],"priority":2}]}`)
	f.Add(`{"decision_id":"d","option":"Merge","index":1}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		for _, a := range []string{ActionCreate, ActionWait, ActionStatus, ActionStop, ActionSteer} {
			if cmd, err := SubagentCommand(a, "agent-x", args); err == nil && cmd.Validate() != nil {
				t.Fatalf("%s built an invalid command %+v", a, cmd)
			}
		}
		for _, a := range []string{ActionCreateTasks, ActionMemoryList, ActionMemoryWrite, ActionMessage, ActionGoals, ActionBoard, ActionDecisions, ActionAnswer} {
			if cmd, err := TeamCommand(a, "agent-x", args); err == nil && cmd.Validate() != nil {
				t.Fatalf("%s built an invalid command %+v", a, cmd)
			}
		}
	})
}
