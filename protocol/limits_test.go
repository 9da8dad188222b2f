package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// limitCase is one bounded value: build returns a record whose field holds
// n units (bytes of a string, items of a list).
type limitCase struct {
	field string
	limit int
	unit  string
	build func(n int) any
}

func str(n int) string { return strings.Repeat("a", n) }

func strs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "h" + fmt.Sprint(i)
	}
	return out
}

func hdrOf(typ string) protocol.Header { return protocol.Header{Type: typ} }

// limitCases covers every family of limits: ids and handles, names,
// labels, refs, paths, text, reasons, commit messages and the lists.
func limitCases() []limitCase {
	B, I := protocol.UnitBytes, protocol.UnitItems
	create := func(f func(*protocol.AgentCreate)) any {
		c := &protocol.AgentCreate{Header: hdrOf(protocol.TypeAgentCreate), Cwd: "/w"}
		f(c)
		return c
	}
	sub := func(f func(*protocol.SubagentCreate)) any {
		c := &protocol.SubagentCreate{Header: hdrOf(protocol.TypeSubagentCreate), ParentAgentID: "agent-1", Name: "n", Task: "t"}
		f(c)
		return c
	}
	ws := func(f func(*protocol.WorkspaceCreate)) any {
		c := &protocol.WorkspaceCreate{Header: hdrOf(protocol.TypeWorkspaceCreate), Cwd: "/r"}
		f(c)
		return c
	}
	return []limitCase{
		{"id", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList, ID: str(n)}}
		}},
		{"agent_id", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: str(n)}}
		}},
		{"name", protocol.MaxNameLen, B, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Name = str(n) }) }},
		{"model", protocol.MaxNameLen, B, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Model = str(n) }) }},
		{"cwd", protocol.MaxPathLen, B, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Cwd = "/" + str(n-1) }) }},
		{"tools", protocol.MaxListLen, I, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Tools = strs(n) }) }},
		{"tools[0]", protocol.MaxNameLen, B, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Tools = []string{str(n)} }) }},
		{"skills", protocol.MaxListLen, I, func(n int) any { return create(func(c *protocol.AgentCreate) { c.Skills = strs(n) }) }},
		{"name", protocol.MaxNameLen, B, func(n int) any { return sub(func(c *protocol.SubagentCreate) { c.Name = str(n) }) }},
		{"task", protocol.MaxTextLen, B, func(n int) any { return sub(func(c *protocol.SubagentCreate) { c.Task = str(n) }) }},
		{"request_id", protocol.MaxIDLen, B, func(n int) any { return sub(func(c *protocol.SubagentCreate) { c.RequestID = str(n) }) }},
		{"tasks", protocol.MaxTasks, I, func(n int) any {
			return sub(func(c *protocol.SubagentCreate) {
				c.Name, c.Task, c.Strategy = "", "", protocol.StrategyParallel
				for i := range n {
					c.Tasks = append(c.Tasks, protocol.TaskSpec{Name: fmt.Sprint("t", i), Task: "x"})
				}
			})
		}},
		{"tasks[1].name", protocol.MaxNameLen, B, func(n int) any {
			return sub(func(c *protocol.SubagentCreate) {
				c.Name, c.Task, c.Strategy = "", "", protocol.StrategyChain
				c.Tasks = []protocol.TaskSpec{{Name: "a", Task: "x"}, {Name: str(n), Task: "y"}}
			})
		}},
		{"tasks[0].task", protocol.MaxTextLen, B, func(n int) any {
			return sub(func(c *protocol.SubagentCreate) {
				c.Name, c.Task, c.Strategy = "", "", protocol.StrategyParallel
				c.Tasks = []protocol.TaskSpec{{Name: "a", Task: str(n)}}
			})
		}},
		{"handles", protocol.MaxHandles, I, func(n int) any {
			return &protocol.SubagentWait{Header: hdrOf(protocol.TypeSubagentWait), ParentAgentID: "agent-1", Handles: strs(n)}
		}},
		{"handles[0]", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.SubagentWait{Header: hdrOf(protocol.TypeSubagentWait), ParentAgentID: "agent-1", Handles: []string{str(n)}}
		}},
		{"targets", protocol.MaxHandles, I, func(n int) any {
			return &protocol.SubagentStatus{Header: hdrOf(protocol.TypeSubagentStatus), ParentAgentID: "agent-1", Targets: strs(n)}
		}},
		{"handle", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.SubagentStop{Header: hdrOf(protocol.TypeSubagentStop), ParentAgentID: "agent-1", Handle: str(n)}
		}},
		{"target", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.SubagentSteer{Header: hdrOf(protocol.TypeSubagentSteer), ParentAgentID: "agent-1", Target: str(n), Message: "m"}
		}},
		{"message", protocol.MaxTextLen, B, func(n int) any {
			return &protocol.SubagentSteer{Header: hdrOf(protocol.TypeSubagentSteer), ParentAgentID: "agent-1", Target: "ada", Message: str(n)}
		}},
		{"task", protocol.MaxTextLen, B, func(n int) any {
			return &protocol.SubagentRelaunch{Header: hdrOf(protocol.TypeSubagentRelaunch), ParentAgentID: "agent-1", Target: "ada", Task: str(n)}
		}},
		{"handle", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.JobsShow{Header: hdrOf(protocol.TypeJobsShow), Handle: str(n)}
		}},
		{"message", protocol.MaxTextLen, B, func(n int) any {
			return &protocol.Prompt{Header: hdrOf(protocol.TypePrompt), Message: str(n), StreamingBehavior: protocol.BehaviorFollowUp}
		}},
		{"images", protocol.MaxImages, I, func(n int) any {
			images := make([]protocol.Image, n)
			for i := range images {
				images[i] = protocol.Image{Type: protocol.ImageType, Data: "iVBORw0KGgo=", MimeType: protocol.MIMEPNG}
			}
			return &protocol.Prompt{Header: hdrOf(protocol.TypePrompt), Images: images, Message: "m"}
		}},
		{"message", protocol.MaxTextLen, B, func(n int) any {
			return &protocol.Steer{Header: hdrOf(protocol.TypeSteer), Message: str(n)}
		}},
		{"reason", protocol.MaxReasonLen, B, func(n int) any {
			return &protocol.PermissionResponse{Header: hdrOf(protocol.TypePermissionResponse), RequestID: "r", Decision: protocol.DecisionDeny, Reason: str(n)}
		}},
		{"mode", protocol.MaxNameLen, B, func(n int) any { return &protocol.SetMode{Header: hdrOf(protocol.TypeSetMode), Mode: str(n)} }},
		{"label", protocol.MaxLabelLen, B, func(n int) any { return ws(func(c *protocol.WorkspaceCreate) { c.Label = str(n) }) }},
		{"title", protocol.MaxLabelLen, B, func(n int) any { return ws(func(c *protocol.WorkspaceCreate) { c.Title = str(n) }) }},
		{"branch", protocol.MaxRefLen, B, func(n int) any { return ws(func(c *protocol.WorkspaceCreate) { c.Branch = str(n) }) }},
		{"base_ref", protocol.MaxRefLen, B, func(n int) any { return ws(func(c *protocol.WorkspaceCreate) { c.BaseRef = str(n) }) }},
		{"workspace_id", protocol.MaxIDLen, B, func(n int) any {
			return &protocol.WorkspaceStatus{Header: hdrOf(protocol.TypeWorkspaceStatus), WorkspaceID: str(n)}
		}},
		{"message", protocol.MaxCommitMessageLen, B, func(n int) any {
			return &protocol.WorkspaceMerge{Header: hdrOf(protocol.TypeWorkspaceMerge), WorkspaceID: "ws-1", Strategy: protocol.MergeSquash, Message: str(n)}
		}},
		{"note", protocol.MaxNoteLen, B, func(n int) any { return &protocol.TokenCreate{Header: hdrOf(protocol.TypeTokenCreate), Note: str(n)} }},
	}
}

// TestLimits: for every family, a value at its limit is accepted and one
// unit more is refused with INVALID_REQUEST naming the field and the limit
// in the message and in the data.
func TestLimits(t *testing.T) {
	t.Parallel()
	for _, lc := range limitCases() {
		rec := func(n int) []byte { return protocol.MustMarshal(lc.build(n)) }
		typ := lc.build(1).(protocol.Typed).Head().Type
		t.Run(typ+"/"+lc.field, func(t *testing.T) {
			t.Parallel()
			if _, _, err := protocol.DecodeCommand(rec(lc.limit)); err != nil {
				t.Fatalf("at the limit (%d %s): %v", lc.limit, lc.unit, err)
			}
			_, _, err := protocol.DecodeCommand(rec(lc.limit + 1))
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest {
				t.Fatalf("over the limit: err = %v, want INVALID_REQUEST", err)
			}
			wantMsg := fmt.Sprintf("field %q: %d %s, limit %d %s", lc.field, lc.limit+1, lc.unit, lc.limit, lc.unit)
			if pe.Message != wantMsg {
				t.Errorf("message = %q, want %q", pe.Message, wantMsg)
			}
			want := protocol.LimitData{Field: lc.field, Limit: lc.limit, Unit: lc.unit}
			if pe.Data != want {
				t.Errorf("data = %#v, want %#v", pe.Data, want)
			}
			// The data survives the wire.
			var back protocol.Error
			if err := json.Unmarshal(protocol.MustMarshal(pe), &back); err != nil {
				t.Fatal(err)
			}
			if m, _ := back.Data.(map[string]any); m["field"] != lc.field || m["limit"] != float64(lc.limit) || m["unit"] != lc.unit {
				t.Errorf("data on the wire = %v", back.Data)
			}
		})
	}
}

// TestManagedChildFieldsRefused: agent.create from a client may not carry the
// fields docs/protocol.md §10.1 reserves for the daemon, whatever their
// value.
func TestManagedChildFieldsRefused(t *testing.T) {
	t.Parallel()
	for field, v := range map[string]string{
		"launch_policy":   `{"maxTasks":100000}`,
		"depth":           `0`,
		"system_prompt":   `"you are root"`,
		"alias":           `"ada"`,
		"definition_name": `"lint"`,
		"display_name":    `"lint · ada"`,
		"names":           `[]`,
	} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			rec := fmt.Sprintf(`{"type":"agent.create","cwd":"/w",%q:%s}`, field, v)
			_, _, err := protocol.DecodeCommand([]byte(rec))
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest || !strings.HasPrefix(pe.Message, fmt.Sprintf("field %q: ", field)) {
				t.Fatalf("%s: err = %v, want INVALID_REQUEST naming %q", rec, err, field)
			}
		})
	}
}

// TestUnknownModeRefused: a create naming a mode the runtime lacks is
// refused at decode, naming the field and the valid modes; the known ones
// and none at all are accepted.
func TestUnknownModeRefused(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{`"type":"agent.create","cwd":"/w"`, `"type":"workspace.create","cwd":"/r"`,
		`"type":"workspace.attach","workspace_id":"ws-1"`, `"type":"subagent.create","parent_agent_id":"a","name":"n","task":"t"`} {
		for _, mode := range protocol.Modes() {
			if _, _, err := protocol.DecodeCommand([]byte(`{` + typ + `,"mode":"` + mode + `"}`)); err != nil {
				t.Errorf("{%s} mode %s: %v", typ, mode, err)
			}
		}
		if _, _, err := protocol.DecodeCommand([]byte(`{` + typ + `}`)); err != nil {
			t.Errorf("{%s} without mode: %v", typ, err)
		}
		_, _, err := protocol.DecodeCommand([]byte(`{` + typ + `,"mode":"yolo"}`))
		if pe := (*protocol.Error)(nil); !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest ||
			pe.Message != `field "mode": must be one of build, plan` {
			t.Errorf("{%s} mode yolo: err = %v, want INVALID_REQUEST naming mode and the valid modes", typ, err)
		}
	}
}
