package daemon_test

import (
	"cmp"
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// TestCodexCallsShardMCPTools: Codex (codex-acp) hosted through the ACP
// adapter gets Shard's MCP server (`shard` in session/new's mcpServers)
// and offers its tools to the model as the Responses namespace mcp__shard
// (each tool under its own name in it, called as a function_call with
// namespace "mcp__shard"). Its model creates a subagent job with
// subagent_create — a child on the reference runtime, under the Codex
// agent as its parent — and waits for it with subagent_wait, whose result
// (the child's final text, which only the owning parent may read) reaches
// the model in its next request. Codex asks no permission for these calls
// (acpTurn would allow one); the completion report Shard injects then
// reaches Codex as a turn of its own.
func TestCodexCallsShardMCPTools(t *testing.T) {
	bin := codexAgent(t)
	fake := fakellm.Start(t, fakellm.Script(shardMCPScript("mcp__shard"+fakellm.NamespaceSep)))
	h := start(t, func(cfg *config.Config) {
		// The child runs at the daemon's priority, as startCodex's do.
		cfg.Jobs.Nice = 0
		cfg.Jobs.SchedIdle = false
		cfg.Runtimes["codex"] = codexProfile(t, bin, fake.URL)
	})
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	attach(t, c, id, "")
	prompt(t, c, id, "please delegate to a child")
	text, asked := acpTurn(t, c, id)
	if !strings.Contains(text, "the child has answered.") {
		t.Fatalf("Codex said %q (asked permission for %v), want the answer after the wait", text, asked)
	}

	// The job is the Codex agent's, its child on the reference runtime.
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: id}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ParentAgentID != id || len(st.Agents) != 1 || st.Agents[0].ParentAgentID != id ||
		st.Agents[0].Run == nil || st.Agents[0].Run.State != protocol.RunCompleted {
		t.Fatalf("the Codex agent's jobs = %+v", st)
	}
	var child protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: st.Agents[0].AgentID}}, &child); err != nil {
		t.Fatal(err)
	}
	if a := child.Agents[0]; a.ParentAgentID != id || cmp.Or(a.Runtime, config.DefaultRuntime) != config.DefaultRuntime {
		t.Fatalf("child = %+v, want the Codex agent's child on the shard runtime", a)
	}

	// The completion report reaches Codex as a turn of its own.
	acpTurn(t, c, id)

	// The model was offered Shard's tools in the namespace mcp__shard, it
	// called them there, and the wait's result — the child's final text —
	// was in a request it was sent.
	var offered, calledNS, sawFinal, sawReport bool
	for _, r := range fake.Requests() {
		if r.Path != "/v1/responses" {
			continue
		}
		tools, _ := r.Body["tools"].([]any)
		for _, tl := range tools {
			if m, _ := tl.(map[string]any); m["type"] == "namespace" && m["name"] == "mcp__shard" {
				inner, _ := m["tools"].([]any)
				for _, it := range inner {
					if f, _ := it.(map[string]any); f["name"] == "subagent_create" {
						offered = true
					}
				}
			}
		}
		input, _ := r.Body["input"].([]any)
		for _, it := range input {
			if m, _ := it.(map[string]any); m["type"] == "function_call" && m["namespace"] == "mcp__shard" && m["name"] == "subagent_wait" {
				calledNS = true
			}
		}
		sawFinal = sawFinal || strings.Contains(string(r.Raw), `\"final_text\":\"from the child\"`)
		sawReport = sawReport || strings.Contains(string(r.Raw), "[subagent report]")
	}
	if !offered || !calledNS || !sawFinal || !sawReport {
		t.Fatalf("Shard's tools offered in mcp__shard %v; subagent_wait called there %v; the wait's final text reached the model %v; the report %v",
			offered, calledNS, sawFinal, sawReport)
	}
}
