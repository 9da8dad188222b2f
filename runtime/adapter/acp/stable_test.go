package acp_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
	"github.com/shard-dev/shard/runtime/adapter/acp"
)

// The tests of what ACP made stable in 2026 (session/resume and close,
// config options, usage updates) run this test binary as a scripted ACP
// agent (scripted_test.go) under the adapter, and read the methods it got
// from its log.

// scriptedAgent returns the options running the scripted agent, with env
// added, and the path of its method log.
func scriptedAgent(t *testing.T, sessionDir string, env ...string) (acp.Options, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "methods.log")
	// A binary built with -race sleeps 1 s at exit unless told not to,
	// which would look like an agent ignoring its stdin's end.
	return acp.Options{Command: []string{self}, Cwd: t.TempDir(), Stderr: os.Stderr, SessionDir: sessionDir,
		Env: append([]string{acp.ScriptedAgentEnv + "=1", acp.ScriptedLogEnv + "=" + logPath, "GORACE=atexit_sleep_ms=0"}, env...)}, logPath
}

// stop ends the adapter as the daemon does (stdin closed) and waits.
func (h *hostRun) stop(t *testing.T) {
	t.Helper()
	h.in.Close()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("the adapter did not stop")
	}
}

func methods(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// response waits for the response to id.
func (h *hostRun) response(t *testing.T, id string) map[string]any {
	t.Helper()
	evs := h.until(t, "response "+id, func(m map[string]any) bool { return m["type"] == "response" && m["id"] == id })
	return evs[len(evs)-1]
}

func errCode(resp map[string]any) string {
	e, _ := resp["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// windowTexts are the texts of a sync's live window, role:text.
func windowTexts(sync map[string]any) []string {
	var out []string
	lw, _ := sync["live_window"].(map[string]any)
	msgs, _ := lw["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		blocks, _ := mm["content"].([]any)
		for _, b := range blocks {
			bb, _ := b.(map[string]any)
			out = append(out, mm["role"].(string)+":"+bb["text"].(string))
		}
	}
	return out
}

// TestSessionCloseThenResume: an agent that advertises session/close gets
// it when the adapter stops, before its stdin ends (the agent, which
// exits at its stdin's end, could not log it after); the next generation
// resumes the session with session/resume, not session/load, passing the
// MCP servers again (each generation: the stdio one, as the agent takes
// no HTTP ones), and shows the live window the adapter kept (no
// replay).
func TestSessionCloseThenResume(t *testing.T) {
	sessionDir := t.TempDir()
	servers := map[string]protocol.MCPServer{"fs": {Command: "mcp-server-filesystem"}, "web": {URL: "http://127.0.0.1:9/mcp"}}
	opts, log1 := scriptedAgent(t, sessionDir)
	// The agent takes no HTTP servers (no mcpCapabilities.http): only the
	// stdio one reaches it.
	opts.MCPServers = servers
	b := acp.New(opts)
	h := startBackend(t, b, func(o *adapter.Options) { o.SessionDir = sessionDir })
	h.until(t, "sync", typeIs("sync"))
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "remember this"})
	h.until(t, "turn_end", typeIs("turn_end"))
	h.stop(t)
	if got, want := methods(t, log1), "initialize\nsession/new mcpServers=1\nsession/prompt\nsession/close scripted-1"; got != want {
		t.Fatalf("first generation's methods:\n%s\nwant\n%s", got, want)
	}
	if err := b.Err(); err != nil && strings.Contains(err.Error(), "terminated") {
		t.Fatalf("the agent needed SIGTERM: %v", err)
	}

	opts, log2 := scriptedAgent(t, sessionDir)
	opts.MCPServers = servers
	h = startHost(t, opts)
	sync := h.until(t, "sync", typeIs("sync"))
	if got := strings.Join(windowTexts(sync[len(sync)-1]), "|"); got != "user:remember this|assistant:ok #1" {
		t.Fatalf("resumed window = %q", got)
	}
	h.stop(t)
	if got, want := methods(t, log2), "initialize\nsession/resume scripted-1 mcpServers=1\nsession/close scripted-1"; got != want {
		t.Fatalf("second generation's methods:\n%s\nwant\n%s", got, want)
	}
}

// TestStopEscalatesWhenAgentIgnoresEOF: an agent that keeps running after
// session/close and its stdin's end is sent SIGTERM.
func TestStopEscalatesWhenAgentIgnoresEOF(t *testing.T) {
	opts, _ := scriptedAgent(t, t.TempDir(), acp.ScriptedIgnoreEOFEnv+"=1")
	b := acp.New(opts)
	h := startBackend(t, b)
	h.until(t, "sync", typeIs("sync"))
	h.stop(t)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("the agent ended with %v, want SIGTERM", err)
	}
}

// TestConfigOptionsAndUsage: an agent with both the older modes/models and
// config options is driven through the config options
// (session/set_config_option for set_mode and set_model); its option of
// category thought_level is the agent's reasoning levels
// (list_reasoning_levels, set_reasoning_level with CONFLICT for a stale
// model and NOT_FOUND for an unknown level, reasoning_level_changed, also
// when the agent switches on its own through config_option_update, as
// its switch of model is model_changed). Its
// usage_update gives turn_end's usage context_tokens and the turn's cost
// (the difference of the cumulative costs), and the window size becomes
// the active model's context_window.
func TestConfigOptionsAndUsage(t *testing.T) {
	opts, logPath := scriptedAgent(t, t.TempDir(), acp.ScriptedConfigEnv+"=1")
	h := startHost(t, opts)
	evs := h.until(t, "sync", typeIs("sync"))
	caps, _ := evs[len(evs)-1]["capabilities"].([]any)
	var capNames []string
	for _, c := range caps {
		capNames = append(capNames, c.(string))
	}
	if got := strings.Join(capNames, ","); !strings.Contains(got, "reasoning-catalog,reasoning-switch") || !strings.Contains(got, "mode-switch") {
		t.Fatalf("capabilities %s", got)
	}
	if evs[len(evs)-1]["mode"] != "ask" {
		t.Fatalf("sync mode = %v", evs[len(evs)-1]["mode"])
	}

	h.send(t, map[string]any{"type": "set_mode", "id": "m1", "mode": "code"})
	if r := h.response(t, "m1"); r["success"] != true {
		t.Fatalf("set_mode: %v", r)
	}
	h.send(t, map[string]any{"type": "set_model", "id": "m2", "model": "m-large"})
	if r := h.response(t, "m2"); r["success"] != true {
		t.Fatalf("set_model: %v", r)
	}
	h.send(t, map[string]any{"type": "list_reasoning_levels", "id": "r1"})
	r := h.response(t, "r1")
	data, _ := r["data"].(map[string]any)
	model, _ := data["model"].(map[string]any)
	levels := protocol.MustMarshal(data["levels"])
	if data["active"] != "low" || model["id"] != "m-large" || data["effective"] != "next_provider_call" ||
		string(levels) != `[{"id":"low","label":"Low"},{"description":"Think longer","id":"high","label":"High"}]` {
		t.Fatalf("list_reasoning_levels: %v", r)
	}
	h.send(t, map[string]any{"type": "set_reasoning_level", "id": "r2", "model": "m-small", "effort": "high"})
	if r := h.response(t, "r2"); errCode(r) != string(protocol.CodeConflict) {
		t.Fatalf("stale model: %v", r)
	}
	h.send(t, map[string]any{"type": "set_reasoning_level", "id": "r3", "model": "m-large", "effort": "max"})
	if r := h.response(t, "r3"); errCode(r) != string(protocol.CodeNotFound) {
		t.Fatalf("unknown level: %v", r)
	}

	// The agent switches its level itself.
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "think hard"})
	evs = h.until(t, "turn_end", typeIs("turn_end"))
	var changed map[string]any
	for _, e := range evs {
		if e["type"] == "reasoning_level_changed" {
			changed = e
		}
	}
	if changed == nil || changed["previous"] != "low" || changed["active"] != "high" {
		t.Fatalf("reasoning_level_changed = %v in %v", changed, types(evs))
	}
	end := evs[len(evs)-1]
	if u := string(protocol.MustMarshal(end["usage"])); u != `{"context_tokens":1000,"cost":0.25,"input":10,"output":5}` {
		t.Fatalf("first turn's usage %s", u)
	}

	h.send(t, map[string]any{"type": "set_reasoning_level", "id": "r4", "model": "m-large", "effort": "low"})
	evs = h.until(t, "response r4", func(m map[string]any) bool { return m["type"] == "response" && m["id"] == "r4" })
	if r := evs[len(evs)-1]; r["success"] != true || !slices.Contains(types(evs), "reasoning_level_changed") {
		t.Fatalf("set_reasoning_level low: %v after %v", r, types(evs))
	}

	h.send(t, map[string]any{"type": "prompt", "id": "p2", "message": "again"})
	evs = h.until(t, "turn_end", typeIs("turn_end"))
	if u := string(protocol.MustMarshal(evs[len(evs)-1]["usage"])); u != `{"context_tokens":2000,"cost":0.25,"input":10,"output":5}` {
		t.Fatalf("second turn's usage %s (the cost is the turn's)", u)
	}
	h.send(t, map[string]any{"type": "list_models", "id": "l1"})
	r = h.response(t, "l1")
	data, _ = r["data"].(map[string]any)
	if active, _ := data["active"].(map[string]any); active["id"] != "m-large" || active["context_window"] != float64(200000) {
		t.Fatalf("list_models: %v", r)
	}

	// The agent switches its model itself.
	h.send(t, map[string]any{"type": "prompt", "id": "p3", "message": "use small"})
	evs = h.until(t, "model_changed", typeIs("model_changed"))
	if mc := evs[len(evs)-1]; mc["active"].(map[string]any)["id"] != "m-small" || mc["previous"].(map[string]any)["id"] != "m-large" {
		t.Fatalf("model_changed %v", mc)
	}
	h.until(t, "turn_end", typeIs("turn_end"))
	h.stop(t)
	want := strings.Join([]string{"initialize", "session/new mcpServers=0",
		"session/set_config_option mode=code", "session/set_config_option model=m-large",
		"session/prompt", "session/set_config_option thought=low", "session/prompt", "session/prompt", "session/close scripted-1"}, "\n")
	if got := methods(t, logPath); got != want {
		t.Fatalf("methods:\n%s\nwant\n%s", got, want)
	}
}

// TestResumeRestoresSelection: a generation whose agent's session opens in
// another mode or model than the daemon kept (SHARD_AGENT_MODE, _MODEL)
// switches it back before hello: the mode by name, the model by its name
// (as the daemon keeps a third-party model); a kept model of another
// provider than acp is not the agent's and is left alone.
func TestResumeRestoresSelection(t *testing.T) {
	sessionDir := t.TempDir()
	opts, _ := scriptedAgent(t, sessionDir, acp.ScriptedConfigEnv+"=1")
	h := startHost(t, opts)
	h.until(t, "sync", typeIs("sync"))
	h.stop(t)

	opts, logPath := scriptedAgent(t, sessionDir, acp.ScriptedConfigEnv+"=1")
	h = startBackend(t, acp.New(opts), func(o *adapter.Options) {
		o.SessionDir, o.Mode, o.Provider, o.Model = sessionDir, "code", "acp", "Large"
	})
	evs := h.until(t, "sync", typeIs("sync"))
	if evs[len(evs)-1]["mode"] != "code" {
		t.Fatalf("sync mode %v, want the kept code", evs[len(evs)-1]["mode"])
	}
	h.send(t, map[string]any{"type": "list_models", "id": "l1"})
	if active := h.response(t, "l1")["data"].(map[string]any)["active"].(map[string]any); active["id"] != "m-large" {
		t.Fatalf("active model %v, want the kept m-large", active)
	}
	h.stop(t)
	want := "initialize\nsession/resume scripted-1 mcpServers=0\nsession/set_config_option mode=code\nsession/set_config_option model=m-large\nsession/close scripted-1"
	if got := methods(t, logPath); got != want {
		t.Fatalf("methods:\n%s\nwant\n%s", got, want)
	}

	opts, logPath = scriptedAgent(t, sessionDir, acp.ScriptedConfigEnv+"=1")
	h = startBackend(t, acp.New(opts), func(o *adapter.Options) {
		o.SessionDir, o.Provider, o.Model = sessionDir, "openai", "m-large"
	})
	h.until(t, "sync", typeIs("sync"))
	h.stop(t)
	if got := methods(t, logPath); strings.Contains(got, "set_config_option") {
		t.Fatalf("a model of another provider was restored:\n%s", got)
	}
}
