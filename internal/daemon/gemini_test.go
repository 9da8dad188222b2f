package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// The test below runs the real Gemini CLI from npm (@google/gemini-cli,
// installed by scripts/install-agents.sh) in its ACP mode on an acp
// runtime profile, through the adapter, against the fake Gemini API on
// 127.0.0.1 (internal/fakellm). It skips when the agent is not installed.

// geminiCommand returns the command that runs the installed Gemini CLI as
// an ACP agent (node running its bundle, so the process the adapter
// starts is the agent), or skips (fails in strict mode: testhost.Missing).
func geminiCommand(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bundle := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", "@google", "gemini-cli", "bundle", "gemini.js")
	if _, err := os.Stat(bundle); err != nil {
		testhost.Missing(t, "gemini-cli", err.Error())
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testhost.Missing(t, "node", err.Error())
	}
	return []string{node, bundle, "--acp"}
}

// geminiSettings turns off what would reach the network or ask the
// person: auto-update, usage statistics, telemetry, folder trust.
const geminiSettings = `{
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "security": {"folderTrust": {"enabled": false}}
}
`

// geminiScript is the fake model: "write <name>" asks Gemini to create
// <name> in the cwd with write_file, then says done; "mcp read <path>"
// calls the MCP server fs's read_text_file on path; "slow" streams one
// word and waits for hold; anything else is a short answer.
type geminiScript struct {
	cwd  string
	hold chan struct{}
	once sync.Once
}

func (s *geminiScript) release() { s.once.Do(func() { close(s.hold) }) }

func (s *geminiScript) answer(p fakellm.Prompt) fakellm.Turn {
	usage := fakellm.Usage{Input: 42, Output: 7}
	switch {
	case p.ToolOutput:
		return fakellm.Turn{Text: "done.", Usage: usage}
	case strings.Contains(p.LastUser, "write "):
		// The first user turn carries Gemini's context before the
		// prompt: the file name is the last word.
		words := strings.Fields(p.LastUser)
		name := words[len(words)-1]
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "write_file",
			Args: `{"file_path":"` + filepath.Join(s.cwd, name) + `","content":"tool-ok\n"}`}}, Usage: usage}
	case strings.Contains(p.LastUser, "mcp read "):
		// "mcp read <path>": the MCP server fs's read_text_file, whatever
		// prefix Gemini gives it (the first offered name containing it).
		_, path, _ := strings.Cut(p.LastUser, "mcp read ")
		args := protocol.MustMarshal(map[string]string{"path": strings.TrimSpace(path)})
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "read_text_file", Args: string(args)}}, Usage: usage}
	case strings.Contains(p.LastUser, "slow"):
		return fakellm.Turn{Text: "thinking slowly about it", Hold: s.hold, Usage: usage}
	}
	return fakellm.Turn{Text: "Hello from the fake Gemini.", Usage: usage}
}

// startGemini starts a daemon with a "gemini" acp profile pointing at a
// new fake Gemini API, the agent's HOME a temporary directory holding its
// settings.
func startGemini(t *testing.T, cwd string, edit ...func(*config.RuntimeProfile)) (*harness, *geminiScript) {
	h, script, _ := startGeminiFake(t, cwd, edit...)
	return h, script
}

// startGeminiFake is startGemini that also returns the fake Gemini API;
// edit, when given, changes the profile before the daemon starts.
func startGeminiFake(t *testing.T, cwd string, edit ...func(*config.RuntimeProfile)) (*harness, *geminiScript, *fakellm.Server) {
	t.Helper()
	cmd := geminiCommand(t)
	script := &geminiScript{cwd: cwd, hold: make(chan struct{})}
	fake := fakellm.Start(t, fakellm.Script(script.answer))
	t.Cleanup(script.release) // before the fake closes
	home := shortTemp(t)
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(geminiSettings), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		cfg.Jobs.Nice = 0
		cfg.Jobs.SchedIdle = false
		p := config.RuntimeProfile{Kind: config.KindACP, Command: cmd,
			Env: map[string]string{"HOME": home, "GEMINI_CLI_HOME": home,
				"GOOGLE_GEMINI_BASE_URL": fake.URL, "GEMINI_API_KEY": "not-a-real-key",
				"GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_TELEMETRY_ENABLED": "false",
				"GEMINI_CLI_NO_RELAUNCH": "1", "GEMINI_MODEL": "gemini-2.5-flash",
				"SHARD_ACP_FS": "off"}}
		for _, e := range edit {
			e(&p)
		}
		cfg.Runtimes["gemini"] = p
	})
	return h, script, fake
}

// choiceOf is the id of the request's choice with intent.
func choiceOf(t *testing.T, req *protocol.PermissionRequest, intent string) string {
	t.Helper()
	for _, ch := range req.Choices {
		if ch.Intent == intent {
			return ch.ID
		}
	}
	t.Fatalf("no %s choice in %+v", intent, req.Choices)
	return ""
}

// TestGeminiProfile drives Gemini CLI on a runtime profile as a client
// would: a prompt streams Gemini's text with turn_end end_turn; a
// write_file in the cwd raises a permission_request with Gemini's own
// options as choices (proceed_once allow, proceed_always persist, cancel
// deny), allow lets it create the file and deny leaves none; abort while
// it waits for that answer, or of a streaming turn, ends the turn
// cancelled; terminating the agent leaves no
// process of it.
func TestGeminiProfile(t *testing.T) {
	cwd := shortTemp(t)
	h, script := startGemini(t, cwd)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "gemini"; m.Cwd = cwd })
	attach(t, c, id, "")

	prompt(t, c, id, "hi")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got := deltaText(evs); !strings.Contains(got, "Hello from the fake Gemini.") {
		t.Fatalf("streamed text = %q", got)
	}
	if r := rawField(evs[len(evs)-1], "stop_reason"); r != "end_turn" {
		t.Fatalf("turn_end stop_reason = %q", r)
	}
	// Gemini's usage comes only in the answer's _meta.quota: the fake's
	// 42 in and 7 out, for its one model.
	if u := evs[len(evs)-1].Msg.(*protocol.TurnEnd).Usage; u == nil || u.Input != 42 || u.Output != 7 || u.Model == "" {
		t.Fatalf("turn_end = %s, want the usage of _meta.quota", evs[len(evs)-1].Raw)
	}

	// Allow: the file is created, new.
	prompt(t, c, id, "write allowed.txt")
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	intents := map[string]string{}
	for _, ch := range req.Choices {
		intents[ch.ID] = ch.Intent
	}
	if intents["proceed_once"] != "allow" || intents["proceed_always"] != "persist" || intents["cancel"] != "deny" {
		t.Errorf("choices = %+v, want Gemini's proceed_once allow, proceed_always persist, cancel deny", req.Choices)
	}
	allow := choiceOf(t, req, protocol.DecisionAllow)
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, "", allow)); err != nil {
		t.Fatal(err)
	}
	evs = collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	var sawResult bool
	for _, e := range evs {
		if _, ok := e.Msg.(*protocol.ToolResult); ok {
			sawResult = true
		}
	}
	if !sawResult {
		t.Errorf("no tool_result for the allowed write")
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "allowed.txt")); err != nil || string(b) != "tool-ok\n" {
		t.Fatalf("allowed.txt = %q, %v", b, err)
	}

	// Deny: nothing is written.
	prompt(t, c, id, "write denied.txt")
	req = waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	if deny := choiceOf(t, req, protocol.DecisionDeny); deny != "cancel" {
		t.Errorf("deny choice = %q, want Gemini's cancel", deny)
	}
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, "", "cancel")); err != nil {
		t.Fatal(err)
	}
	// Gemini tells its model the call was refused and the turn goes on;
	// the refused call never shows as a tool_call.
	for _, e := range collectUntil(t, c, isType(protocol.TypeTurnEnd, id)) {
		if _, ok := e.Msg.(*protocol.ToolCall); ok {
			t.Errorf("the denied call shows as a tool_call: %s", e.Raw)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "denied.txt")); err == nil {
		t.Fatal("the denied write ran")
	}

	// Abort while Gemini waits for the answer: the request is resolved
	// by the abort, the turn ends cancelled and nothing is written.
	prompt(t, c, id, "write aborted.txt")
	req = waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	if _, err := c.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
	if res.RequestID != req.RequestID || res.Source != "abort" {
		t.Fatalf("resolved = %+v, want the request resolved by abort", res)
	}
	if end := waitFor(t, c, isType(protocol.TypeTurnEnd, id)); rawField(end, "stop_reason") != "cancelled" {
		t.Fatalf("turn_end after abort = %s", end.Raw)
	}
	if _, err := os.Stat(filepath.Join(cwd, "aborted.txt")); err == nil {
		t.Fatal("the write ran after its request was aborted")
	}

	// Abort mid-stream.
	prompt(t, c, id, "slow please")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	if _, err := c.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	end := waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if r := rawField(end, "stop_reason"); r != "cancelled" {
		t.Fatalf("aborted stop_reason = %q", r)
	}
	waitFor(t, c, func(e client.Event) bool {
		s, ok := e.Msg.(*protocol.Status)
		return ok && s.AgentID == id && s.Status == protocol.StatusIdle
	})
	script.release()

	// Stopping the agent leaves no process.
	if len(runtimePIDs(t, id)) == 0 {
		t.Fatal("no process carries the agent's SHARD_AGENT_ID while it runs")
	}
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's processes are gone", func() bool { return len(runtimePIDs(t, id)) == 0 })
}

// TestGeminiMCPServer: the gemini profile's MCP server (the npm filesystem
// server, stdio) reaches Gemini CLI in session/new; Gemini offers its
// read_text_file to the model under a name of its own, runs the call
// (after a permission_request through Shard, if it asks), and the file's
// text reaches the model and the client's tool_result.
func TestGeminiMCPServer(t *testing.T) {
	fsBin := fsServerBin(t)
	cwd := shortTemp(t)
	note := filepath.Join(cwd, "note.txt")
	if err := os.WriteFile(note, []byte("served by MCP to Gemini"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _, fake := startGeminiFake(t, cwd, func(p *config.RuntimeProfile) {
		p.MCPServers = map[string]config.MCPServer{"fs": {Command: fsBin, Args: []string{cwd}}}
	})
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "gemini"; m.Cwd = cwd })
	attach(t, c, id, "")
	prompt(t, c, id, "please mcp read "+note)
	result, asked := allowThroughTurn(t, c, id)
	var offered []string
	var returned bool
	for _, r := range fake.Requests() {
		if !strings.Contains(r.Path, "streamGenerateContent") {
			continue
		}
		for _, tl := range fakellmToolNames(r.Body) {
			if strings.Contains(tl, "read_text_file") && !slices.Contains(offered, tl) {
				offered = append(offered, tl)
			}
		}
		returned = returned || strings.Contains(string(r.Raw), "served by MCP to Gemini")
	}
	if len(offered) == 0 || !returned {
		t.Fatalf("the fake model was offered %v, got the file's text %v (tool_result %+v, permission asked for %v)", offered, returned, result, asked)
	}
	if result == nil || result.IsError {
		t.Fatalf("tool_result %+v (permission asked for %v)", result, asked)
	}
	t.Logf("Gemini offered %v; permission asked for %v", offered, asked)
}

// fakellmToolNames are the function names a Gemini API request body
// offers (tools[].functionDeclarations[].name).
func fakellmToolNames(body map[string]any) []string {
	var out []string
	tools, _ := body["tools"].([]any)
	for _, tl := range tools {
		m, _ := tl.(map[string]any)
		decls, _ := m["functionDeclarations"].([]any)
		for _, d := range decls {
			dm, _ := d.(map[string]any)
			if n, ok := dm["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}
