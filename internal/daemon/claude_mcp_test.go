package daemon_test

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// jobIDPattern finds the job id in subagent_create's result.
var jobIDPattern = regexp.MustCompile(`"job_id":"(job-[0-9a-z]+)"`)

// shardMCPScript is the fake model of an agent given Shard's MCP server:
// asked to delegate, it calls Shard's subagent_create (offered by the
// adapter's `shard` MCP server, named prefix+"subagent_create": Claude's
// mcp__shard__subagent_create, Codex's subagent_create of the namespace
// mcp__shard) for a child on the reference runtime; given the job back, it
// calls subagent_wait on it; given the wait's result, it says what the
// child said. Anything else (the completion report Shard injects later) is
// a short answer.
func shardMCPScript(prefix string) func(fakellm.Prompt) fakellm.Turn {
	return func(p fakellm.Prompt) fakellm.Turn { return shardMCPTurn(prefix, p) }
}

func shardMCPTurn(prefix string, p fakellm.Prompt) fakellm.Turn {
	usage := fakellm.Usage{Input: 42, Output: 7}
	last := ""
	if n := len(p.ToolResults); n > 0 {
		last = p.ToolResults[n-1]
	}
	switch {
	case p.ToolOutput && strings.Contains(last, `"final_text"`):
		return fakellm.Turn{Text: "the child has answered.", Usage: usage}
	case p.ToolOutput && jobIDPattern.MatchString(last):
		job := jobIDPattern.FindStringSubmatch(last)[1]
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: prefix + "subagent_wait",
			Args: `{"handles":["` + job + `"],"timeout":60}`}}, Usage: usage}
	case p.ToolOutput:
		return fakellm.Turn{Text: "the tool failed.", Usage: usage}
	case strings.HasSuffix(p.LastUser, "delegate to a child"):
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: prefix + "subagent_create",
			Args: `{"name":"helper","task":"sim: say from the child","runtime":"shard"}`}}, Usage: usage}
	}
	return fakellm.Turn{Text: "noted.", Usage: usage}
}

// TestClaudeCallsShardMCPTools: Claude Code hosted through the ACP adapter
// gets Shard's MCP server (`shard` in session/new's mcpServers): its model
// creates a subagent job with mcp__shard__subagent_create — a child on the
// reference runtime, under the Claude agent as its parent — and waits for
// it with mcp__shard__subagent_wait, whose result (the child's final text,
// which only the owning parent may read) reaches the model in its next
// request. A profile whose env has SHARD_ACP_SHARD_MCP off offers Claude
// no Shard tools.
func TestClaudeCallsShardMCPTools(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "claude-agent-acp")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "claude-agent-acp", err.Error())
	}
	fake := fakellm.Start(t, fakellm.Script(shardMCPScript("mcp__shard__")))
	plain := fakellm.Start(t, fakellm.Script(shardMCPScript("mcp__shard__")))
	// startClaude's profile; env adds to its environment.
	profile := func(url string, env map[string]string) config.RuntimeProfile {
		home := shortTemp(t)
		p := config.RuntimeProfile{Kind: config.KindACP, Command: []string{bin},
			Env: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": filepath.Join(home, ".claude"),
				"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "not-a-real-key",
				"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": ""}}
		maps.Copy(p.Env, env)
		return p
	}
	h := start(t, func(cfg *config.Config) {
		cfg.Runtimes["claude"] = profile(fake.URL, nil)
		cfg.Runtimes["claude-off"] = profile(plain.URL, map[string]string{"SHARD_ACP_SHARD_MCP": "off"})
	})
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "claude" })
	attach(t, c, id, "")
	prompt(t, c, id, "please delegate to a child")
	text, asked := acpTurn(t, c, id)
	if !strings.Contains(text, "the child has answered.") {
		t.Fatalf("Claude said %q (asked permission for %v), want the answer after the wait", text, asked)
	}

	// The job is the Claude agent's, its child on the reference runtime.
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: id}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ParentAgentID != id || len(st.Agents) != 1 || st.Agents[0].ParentAgentID != id ||
		st.Agents[0].Run == nil || st.Agents[0].Run.State != protocol.RunCompleted {
		t.Fatalf("the Claude agent's jobs = %+v", st)
	}
	var child protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: st.Agents[0].AgentID}}, &child); err != nil {
		t.Fatal(err)
	}
	if a := child.Agents[0]; a.ParentAgentID != id || cmp.Or(a.Runtime, config.DefaultRuntime) != config.DefaultRuntime {
		t.Fatalf("child = %+v, want the Claude agent's child on the shard runtime", a)
	}

	// The completion report Shard injects into the parent reaches Claude
	// as a turn of its own (ACP takes no input into a running turn).
	acpTurn(t, c, id)

	// The model was offered Shard's tools, and the wait's result — the
	// child's final text — was in a request it was sent.
	var offered, sawFinal, sawReport bool
	for _, r := range fake.Requests() {
		if r.Path != "/v1/messages" {
			continue
		}
		tools, _ := r.Body["tools"].([]any)
		for _, tl := range tools {
			if m, _ := tl.(map[string]any); m["name"] == "mcp__shard__subagent_create" {
				offered = true
			}
		}
		sawFinal = sawFinal || strings.Contains(string(r.Raw), `\"final_text\":\"from the child\"`)
		sawReport = sawReport || strings.Contains(string(r.Raw), "[subagent report]")
	}
	if !offered || !sawFinal || !sawReport {
		t.Fatalf("Shard's tools offered %v; the wait's final text reached the model %v; the report %v", offered, sawFinal, sawReport)
	}

	// With SHARD_ACP_SHARD_MCP off Claude has no Shard tools: the model's
	// call of one fails, and no job is made.
	off := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "claude-off" })
	attach(t, c, off, "")
	prompt(t, c, off, "please delegate to a child")
	if text, _ := acpTurn(t, c, off); !strings.Contains(text, "the tool failed.") {
		t.Fatalf("Claude without Shard's server said %q", text)
	}
	for _, r := range plain.Requests() {
		tools, _ := r.Body["tools"].([]any)
		for _, tl := range tools {
			if m, _ := tl.(map[string]any); strings.HasPrefix(fmt.Sprint(m["name"]), "mcp__shard__") {
				t.Fatalf("Shard's tool %v offered with the server off", m["name"])
			}
		}
	}
	var none protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: off}, &none); err != nil || len(none.Jobs) != 0 {
		t.Fatalf("jobs of the agent without Shard's server = %+v, %v", none.Jobs, err)
	}
}

// acpTurn reads c until agent id's turn ends, allowing each permission
// request of the agent (Claude asks before it calls an MCP tool; Codex
// does not) as a person would through Shard; it returns the streamed text
// and the tool kinds asked for.
func acpTurn(t *testing.T, c *client.Conn, id string) (string, []string) {
	t.Helper()
	var text strings.Builder
	var asked []string
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed: %v", c.Err())
			}
			switch m := e.Msg.(type) {
			case *protocol.PermissionRequest:
				if m.AgentID != id {
					continue
				}
				asked = append(asked, m.ToolName)
				if _, err := c.Request(ctx(t), permResponse(id, m.RequestID, protocol.DecisionAllow, "")); err != nil {
					t.Fatal(err)
				}
			case *protocol.MessageDelta:
				if m.AgentID == id && m.Kind == protocol.DeltaText {
					text.WriteString(m.TextDelta)
				}
			case *protocol.TurnEnd:
				if m.AgentID == id {
					return text.String(), asked
				}
			}
		case <-deadline.C:
			t.Fatalf("the turn did not end; text so far %q, asked %v", text.String(), asked)
		}
	}
}
