package daemon_test

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// The Claude tests run Claude Code through its ACP adapter (npm
// @zed-industries/claude-agent-acp, from scripts/install-agents.sh: a node
// adapter that starts the claude CLI) on a "claude" acp profile, against a
// fake Anthropic Messages server on 127.0.0.1. They skip when the adapter
// is not installed.

// claudeScript is the fake model: a prompt ending in "write out.txt" has
// Claude call its Write tool (then say done once the result is back), one
// ending in "slow" streams one word and waits for hold, anything else is a
// short answer; one with "mcp read <path>" has Claude call the MCP server
// fs's read_text_file on path. The prompt's end is matched because Claude Code puts its
// own reminders before the person's text in the same message.
func claudeScript(s *codexScript) func(fakellm.Prompt) fakellm.Turn {
	return func(p fakellm.Prompt) fakellm.Turn {
		usage := fakellm.Usage{Input: 42, Output: 7}
		switch {
		case p.ToolOutput:
			return fakellm.Turn{Text: "done.", Usage: usage}
		case strings.HasSuffix(p.LastUser, "write out.txt"):
			return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "Write", Args: `{"file_path":"out.txt","content":"tool-ok\n"}`}}, Usage: usage}
		case strings.Contains(p.LastUser, "mcp read "):
			// "mcp read <path>": Claude's name for the MCP server fs's tool.
			_, path, _ := strings.Cut(p.LastUser, "mcp read ")
			args := protocol.MustMarshal(map[string]string{"path": path})
			return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "mcp__fs__read_text_file", Args: string(args)}}, Usage: usage}
		case strings.HasSuffix(p.LastUser, "slow"):
			return fakellm.Turn{Text: "thinking slowly about it", Hold: s.hold, Usage: usage}
		}
		return fakellm.Turn{Text: "Hello from the fake model.", Usage: usage}
	}
}

// startClaude starts a daemon with a "claude" acp profile pointing Claude
// Code at a new fake model server: its home and config in a temporary
// directory, its background traffic off, and IS_SANDBOX emptied (as root,
// a value other than "1", which this daemon's environment may carry, makes
// the adapter pass a flag the CLI refuses; empty, bypassPermissions is not
// offered).
// edit, when given, changes the profile before the daemon starts.
func startClaude(t *testing.T, edit ...func(*config.RuntimeProfile)) (*harness, *fakellm.Server, *codexScript) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "claude-agent-acp")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "claude-agent-acp", err.Error())
	}
	script := &codexScript{hold: make(chan struct{})}
	fake := fakellm.Start(t, fakellm.Script(claudeScript(script)))
	t.Cleanup(script.release) // before the fake closes
	home := shortTemp(t)
	h := start(t, func(cfg *config.Config) {
		p := config.RuntimeProfile{Kind: config.KindACP, Command: []string{bin},
			Env: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": filepath.Join(home, ".claude"),
				"ANTHROPIC_BASE_URL": fake.URL, "ANTHROPIC_API_KEY": "not-a-real-key",
				"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": ""}}
		for _, e := range edit {
			e(&p)
		}
		cfg.Runtimes["claude"] = p
	})
	return h, fake, script
}

// processNames are the command names of the live processes of an agent's
// runtime generation (those carrying its SHARD_AGENT_ID).
func processNames(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, pid := range runtimePIDs(t, id) {
		if st, err := procstat.Read(pid); err == nil {
			out = append(out, st.Comm)
		}
	}
	return out
}

// TestClaudeProfileStreamsModesAndRestart: an agent on the claude profile
// offers Claude Code's modes and models (its config options of category
// mode and model, which set_mode and set_model set), streams its answer
// (deltas, turn_end with stop_reason and usage, usage_update's context
// tokens and cost in it) from the fake Messages server;
// agent.terminate ends the adapter, node and the claude CLI; the next
// generation resumes the session (session/resume), so a new attachment's
// sync shows the earlier conversation, the model chosen before is chosen
// again, and the next prompt continues the conversation on it.
func TestClaudeProfileStreamsModesAndRestart(t *testing.T) {
	h, fake, _ := startClaude(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "claude" })
	s := attach(t, c, id, "")
	if s.Mode != "default" {
		t.Errorf("sync mode = %q, want Claude's default", s.Mode)
	}
	var modes struct {
		Modes []protocol.ModeDescriptor `json:"modes"`
	}
	if err := c.Call(ctx(t), &protocol.ListModes{Header: protocol.Header{Type: protocol.TypeListModes, AgentID: id}}, &modes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range modes.Modes {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "default,acceptEdits,plan,dontAsk" {
		t.Errorf("modes = %v", names)
	}
	var models struct {
		Models []protocol.ModelDescriptor `json:"models"`
	}
	if err := c.Call(ctx(t), &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, AgentID: id}}, &models); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(models.Models, func(m protocol.ModelDescriptor) bool { return m.ID == "haiku" }) {
		t.Errorf("models = %+v", models.Models)
	}
	if err := c.Call(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: id}, Model: "haiku"}, nil); err != nil {
		t.Fatalf("set_model haiku: %v", err)
	}
	for _, mode := range []string{"acceptEdits", "default"} {
		if err := c.Call(ctx(t), &protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, AgentID: id}, Mode: mode}, nil); err != nil {
			t.Fatalf("set_mode %s: %v", mode, err)
		}
		if mc := waitFor(t, c, isType(protocol.TypeModeChanged, id)).Msg.(*protocol.ModeChanged); mc.Mode != mode {
			t.Fatalf("mode_changed %+v, want %s", mc, mode)
		}
	}

	prompt(t, c, id, "remember this")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got := deltaText(evs); got != "Hello from the fake model." {
		t.Fatalf("streamed text = %q", got)
	}
	end := evs[len(evs)-1]
	if r := rawField(end, "stop_reason"); r != "end_turn" || end.Msg.(*protocol.TurnEnd).Usage == nil {
		t.Fatalf("turn_end = %s", end.Raw)
	}
	// Claude's usage_update: the tokens in its context and the session's
	// cost so far (its price of 42 in and 7 out on haiku); its window
	// size is the active model's context_window.
	if u := end.Msg.(*protocol.TurnEnd).Usage; u.Input != 42 || u.Output != 7 || u.Cost <= 0 || u.ContextTokens <= 0 {
		t.Fatalf("turn_end = %s, want usage_update's context_tokens and cost", end.Raw)
	}
	var active struct {
		Active protocol.ModelDescriptor `json:"active"`
	}
	if err := c.Call(ctx(t), &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, AgentID: id}}, &active); err != nil || active.Active.ID != "haiku" || active.Active.ContextWindow <= 0 {
		t.Fatalf("list_models active = %+v, %v; want haiku with Claude's context window", active.Active, err)
	}
	var sawHead, sawModel bool
	for _, r := range fake.Requests() {
		sawHead = sawHead || r.Method == "HEAD"
		if r.Path == "/v1/messages" {
			m, _ := r.Body["model"].(string)
			sawModel = sawModel || strings.Contains(m, "haiku")
		}
	}
	if !sawHead || !sawModel {
		t.Errorf("the fake saw HEAD %v, a Messages request for the haiku model %v", sawHead, sawModel)
	}

	if procs := processNames(t, id); !slices.Contains(procs, "claude") {
		t.Fatalf("the generation's processes %v have no claude CLI", procs)
	}
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the adapter, node and claude are gone", func() bool { return len(runtimePIDs(t, id)) == 0 })

	c2 := h.dial()
	s = attach(t, c2, id, "")
	var texts []string
	for _, m := range s.LiveWindow.Messages {
		for _, b := range m.Content {
			texts = append(texts, m.Role+":"+b.Text)
		}
	}
	// Claude offers session/resume, so the new generation resumes without
	// a replay and shows the window the adapter kept: the user's text as
	// it was sent (a session/load replay would carry Claude's records of
	// its /model command before it).
	if joined := strings.Join(texts, "|"); joined != "user:remember this|assistant:Hello from the fake model." {
		logData, _ := os.ReadFile(filepath.Join(h.cfg.LogDir(), "agents", id+".log"))
		t.Fatalf("sync after restart = %q\n%s", joined, logData)
	}
	// Claude's resumed session runs its default model; the adapter
	// switches it back to the one the daemon kept.
	var restored struct {
		Active protocol.ModelDescriptor `json:"active"`
	}
	if err := c2.Call(ctx(t), &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, AgentID: id}}, &restored); err != nil || restored.Active.ID != "haiku" {
		t.Fatalf("after the restart list_models active = %+v, %v; want haiku again", restored.Active, err)
	}
	// The resumed session goes on: the model's next request carries the
	// earlier exchange.
	before := fake.Count()
	prompt(t, c2, id, "what did I say?")
	evs = collectUntil(t, c2, isType(protocol.TypeTurnEnd, id))
	first := evs[len(evs)-1].Msg.(*protocol.TurnEnd).Usage
	// Claude's cost is cumulative; a turn's usage has the turn's own, so
	// two like turns cost the same.
	prompt(t, c2, id, "and again")
	evs = collectUntil(t, c2, isType(protocol.TypeTurnEnd, id))
	if second := evs[len(evs)-1].Msg.(*protocol.TurnEnd).Usage; first == nil || second == nil || first.Cost <= 0 || math.Abs(second.Cost-first.Cost) > 1e-9 {
		t.Fatalf("the costs of two like turns: %+v, %+v", first, second)
	}
	var carried, onHaiku bool
	for _, r := range fake.Requests()[before:] {
		if r.Path == "/v1/messages" && strings.Contains(string(r.Raw), "remember this") && strings.Contains(string(r.Raw), "what did I say?") {
			m, _ := r.Body["model"].(string)
			carried, onHaiku = true, strings.Contains(m, "haiku")
		}
	}
	if !carried || !onHaiku {
		t.Fatalf("the resumed session's model request: has the earlier exchange %v, on haiku %v", carried, onHaiku)
	}
}

// answerClaude waits for Claude's permission_request for its Write of
// out.txt (kind edit, Claude's three options as choices) and answers it
// with the choice of intent.
func answerClaude(t *testing.T, c *client.Conn, id, intent string) {
	t.Helper()
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	var got []string
	choice := ""
	for _, ch := range req.Choices {
		got = append(got, ch.ID+"="+ch.Intent)
		if ch.Intent == intent {
			choice = ch.ID
		}
	}
	if in, _ := req.Input.(map[string]any); req.ToolName != "edit" || in["file_path"] != "out.txt" ||
		strings.Join(got, ",") != "allow_always=persist,allow=allow,reject=deny" {
		t.Fatalf("permission_request = %+v", req)
	}
	if _, err := c.Request(ctx(t), &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: req.RequestID, ChoiceID: choice}); err != nil {
		t.Fatal(err)
	}
	if res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved); res.ChoiceID != choice {
		t.Fatalf("permission_resolved = %+v", res)
	}
}

// TestClaudePermissionRejectThenAllow: Claude's Write of a file in the cwd
// is a permission_request through Shard; rejected, the file is not
// written (the call's tool_result is an error) and the turn ends; allowed,
// Claude writes it; allowed always, later Writes no longer ask.
func TestClaudePermissionRejectThenAllow(t *testing.T) {
	h, _, _ := startClaude(t)
	c := h.dial()
	cwd := shortTemp(t)
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "claude"; m.Cwd = cwd })
	attach(t, c, id, "")
	out := filepath.Join(cwd, "out.txt")

	prompt(t, c, id, "please write out.txt")
	answerClaude(t, c, id, protocol.DecisionDeny)
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	var result *protocol.ToolResult
	for _, e := range evs {
		if r, ok := e.Msg.(*protocol.ToolResult); ok {
			result = r
		}
	}
	if result == nil || !result.IsError {
		t.Fatalf("rejected call: tool_result %+v", result)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the rejected Write ran: stat out.txt: %v", err)
	}

	prompt(t, c, id, "now write out.txt")
	answerClaude(t, c, id, protocol.DecisionAllow)
	evs = collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got, err := os.ReadFile(out); err != nil || string(got) != "tool-ok\n" {
		t.Fatalf("out.txt after allow = %q, %v", got, err)
	}
	if !strings.Contains(deltaText(evs), "done.") {
		t.Fatalf("after the tool Claude said %q", deltaText(evs))
	}

	// Always Allow (intent persist) allows Write for the rest of the
	// session: the next Write runs without asking.
	prompt(t, c, id, "again write out.txt")
	answerClaude(t, c, id, "persist") // protocol.PermissionChoice.Intent
	collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	prompt(t, c, id, "once more write out.txt")
	var asked, wrote bool
	for _, e := range collectUntil(t, c, isType(protocol.TypeTurnEnd, id)) {
		switch m := e.Msg.(type) {
		case *protocol.PermissionRequest:
			asked = true
		case *protocol.ToolResult:
			wrote = !m.IsError
		}
	}
	if asked || !wrote {
		t.Fatalf("after Always Allow: asked again %v, wrote %v", asked, wrote)
	}
}

// TestClaudeAbortMidStream: abort while Claude streams ends the turn with
// stop_reason cancelled and the agent idle.
func TestClaudeAbortMidStream(t *testing.T) {
	h, _, _ := startClaude(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "claude" })
	attach(t, c, id, "")
	prompt(t, c, id, "go slow")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	if _, err := c.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	if r := rawField(waitFor(t, c, isType(protocol.TypeTurnEnd, id)), "stop_reason"); r != "cancelled" {
		t.Fatalf("stop_reason = %q", r)
	}
	waitFor(t, c, func(e client.Event) bool {
		s, ok := e.Msg.(*protocol.Status)
		return ok && s.AgentID == id && s.Status == protocol.StatusIdle
	})
}

// TestClaudeMCPServer: MCP servers reach Claude Code through the adapter's
// session/new. The claude profile declares a broken "fs" server and the
// agent its own "fs" (the npm filesystem server, which wins by name);
// Claude offers the model the server's tools as mcp__fs__<tool>, its call
// of mcp__fs__read_text_file runs (after a permission_request through
// Shard, if Claude asks), and the file's text reaches the model in the
// tool result and the client in tool_result. The agent's environment
// does not carry SHARD_MCP_SERVERS, whose env values may be secrets.
func TestClaudeMCPServer(t *testing.T) {
	fsBin := fsServerBin(t)
	served := shortTemp(t)
	note := filepath.Join(served, "note.txt")
	if err := os.WriteFile(note, []byte("served by MCP to Claude"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, fake, _ := startClaude(t, func(p *config.RuntimeProfile) {
		p.MCPServers = map[string]config.MCPServer{"fs": {Command: filepath.Join(served, "no-such-server")}}
	})
	c := h.dial()
	const secret = "s3cret-mcp-env"
	id := h.create(c, func(m *protocol.AgentCreate) {
		// The server serves the roots Claude gives it (MCP roots), the
		// agent's cwd, over its own command-line directories.
		m.Runtime, m.Cwd = "claude", served
		m.MCPServers = map[string]protocol.MCPServer{"fs": {Command: fsBin, Args: []string{served}, Env: map[string]string{"FS_TOKEN": secret}}}
	})
	if info := agentInfo(t, c, id); len(info.MCPServers) != 1 || info.MCPServers[0] != "fs" {
		t.Fatalf("AgentInfo.mcp_servers = %v", info.MCPServers)
	}
	attach(t, c, id, "")
	prompt(t, c, id, "please mcp read "+note)
	result, asked := allowThroughTurn(t, c, id)
	if result == nil || result.IsError || !strings.Contains(result.Content.Text, "served by MCP to Claude") {
		t.Fatalf("tool_result %+v (permission asked for %v)", result, asked)
	}

	var offered, returned bool
	for _, r := range fake.Requests() {
		if r.Path != "/v1/messages" {
			continue
		}
		tools, _ := r.Body["tools"].([]any)
		for _, tl := range tools {
			if m, _ := tl.(map[string]any); m["name"] == "mcp__fs__read_text_file" {
				offered = true
			}
		}
		returned = returned || strings.Contains(string(r.Raw), "served by MCP to Claude")
	}
	if !offered || !returned {
		t.Fatalf("the fake model was offered mcp__fs__read_text_file %v, got its result %v", offered, returned)
	}

	// The adapter (its command line has --adapter) reads the variable;
	// node, claude and the MCP server must not have it. The MCP server has
	// its env (passed as ACP's [{name, value}]).
	var others int
	var serverEnv bool
	for _, pid := range runtimePIDs(t, id) {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		cmdline, err1 := os.ReadFile(filepath.Join(dir, "cmdline"))
		env, err2 := os.ReadFile(filepath.Join(dir, "environ"))
		if err1 != nil || err2 != nil || strings.Contains(string(cmdline), "\x00--adapter\x00") {
			continue
		}
		others++
		if strings.Contains(string(env), "\x00SHARD_MCP_SERVERS=") {
			t.Errorf("process %d (%q) has SHARD_MCP_SERVERS in its environment", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
		if strings.Contains(string(cmdline), "mcp-server-filesystem") {
			serverEnv = serverEnv || strings.Contains(string(env), "\x00FS_TOKEN="+secret+"\x00")
		}
	}
	if others == 0 || !serverEnv {
		t.Errorf("%d processes of the agent besides the adapter; the MCP server has its env: %v", others, serverEnv)
	}
}
