package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// toolValue decodes the JSON value of a successful subagent tool result.
func toolValue(t *testing.T, res *protocol.ToolResult, into any) {
	t.Helper()
	if res.IsError || res.Content.Kind != "json" {
		t.Fatalf("subagent tool result %+v, want a json value", res.Content)
	}
	raw, err := json.Marshal(res.Content.Value)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("decode tool value %s: %v", raw, err)
	}
}

// TestSubagentToolRunsAJobThroughTheDaemon drives the runtime's subagent
// tool end to end: the parent's model creates a job over SHARD_SOCKET with
// its own agent id, the real child runs, the parent receives the completion
// report, and a later wait through the tool sees the final text that only
// the owning parent may read.
func TestSubagentToolRunsAJobThroughTheDaemon(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")

	prompt(t, c, parent, "sim: subagent helper sim: say from the child")
	ev := waitFor(t, c, isType(protocol.TypeToolResult, parent))
	var job protocol.SubagentCreateData
	toolValue(t, ev.Msg.(*protocol.ToolResult), &job)
	if !strings.HasPrefix(job.JobID, "job-") || job.Strategy != protocol.StrategySingle || len(job.Runs) != 1 ||
		job.Runs[0].Name != "helper" || job.Runs[0].AgentID == "" {
		t.Fatalf("create through the tool = %+v", job)
	}
	run := job.Runs[0]

	// The daemon holds the job for this parent (the tool sent the parent's
	// own agent id as parent_agent_id).
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent}, &st); err != nil {
		t.Fatalf("subagent.status: %v", err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].JobID != job.JobID || st.Jobs[0].ParentAgentID != parent {
		t.Fatalf("parent's jobs = %+v", st.Jobs)
	}
	res := waitRuns(t, c, parent, []string{job.JobID}, "all", nil)
	if res.TimedOut || res.Runs[0].State != protocol.RunCompleted || res.Runs[0].FinalText != "from the child" {
		t.Fatalf("wait = %+v", res)
	}

	// The parent's model receives the completion report.
	waitFor(t, c, func(e client.Event) bool {
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == parent && m.Message.Role == "assistant" &&
			strings.Contains(textOf(m.Message), "[subagent report]") && strings.Contains(textOf(m.Message), run.RunID)
	})

	// A wait through the tool (queued behind the report's turn if it is
	// still running) returns the run with its final text.
	if _, err := c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: parent},
		Message: `sim: tool subagent {"action":"wait","handles":["` + job.JobID + `"],"timeout":10}`, StreamingBehavior: protocol.BehaviorFollowUp}); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	ev = waitFor(t, c, isType(protocol.TypeToolResult, parent))
	var waited protocol.SubagentWaitData
	toolValue(t, ev.Msg.(*protocol.ToolResult), &waited)
	if waited.TimedOut || len(waited.Runs) != 1 || waited.Runs[0].RunID != run.RunID ||
		waited.Runs[0].State != protocol.RunCompleted || waited.Runs[0].FinalText != "from the child" {
		t.Fatalf("wait through the tool = %+v", waited)
	}
}
