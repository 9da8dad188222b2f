package acp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/runtime/adapter/acp"
)

// geminiCommand runs the Gemini CLI scripts/install-agents.sh installs as
// an ACP agent; without it the test skips (fails in strict mode:
// testhost.Missing).
func geminiCommand(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	bundle := filepath.Join(root, ".cache", "agents", "node_modules", "@google", "gemini-cli", "bundle", "gemini.js")
	if _, err := os.Stat(bundle); err != nil {
		testhost.Missing(t, "gemini-cli", err.Error())
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testhost.Missing(t, "node", err.Error())
	}
	return []string{node, bundle, "--acp"}
}

// geminiEnv returns the agent environment pointing Gemini CLI at fake: a
// disposable HOME (and GEMINI_CLI_HOME) whose settings turn off updates,
// usage statistics, telemetry and folder trust.
func geminiEnv(t *testing.T, fake *fakellm.Server) []string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"general":{"disableAutoUpdate":true,"disableUpdateNag":true},"privacy":{"usageStatisticsEnabled":false},` +
		`"telemetry":{"enabled":false},"security":{"folderTrust":{"enabled":false}}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "GEMINI_CLI_HOME=" + home, "GOOGLE_GEMINI_BASE_URL=" + fake.URL,
		"GEMINI_API_KEY=not-a-real-key", "GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_TELEMETRY_ENABLED=false",
		"GEMINI_CLI_NO_RELAUNCH=1", "GEMINI_MODEL=gemini-2.5-flash", "PATH=" + os.Getenv("PATH")}
}

// TestGeminiAllowAlways records what Gemini CLI sends into
// $SHARD_RECORD_ACP when it is set. Its modes and models are offered. A
// write_file allowed with
// proceed_always (intent persist) creates the file, and Gemini then runs
// the next write without asking: it switched itself to its autoEdit mode,
// which it says only as agent text "[MODE_UPDATE] autoEdit".
func TestGeminiAllowAlways(t *testing.T) {
	cmd := geminiCommand(t)
	var trace io.Writer
	if p := os.Getenv("SHARD_RECORD_ACP"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		trace = f
	}
	cwd := t.TempDir()
	fake := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		usage := fakellm.Usage{Input: 42, Output: 7}
		if p.ToolOutput {
			return fakellm.Turn{Text: "done.", Usage: usage}
		}
		// The first user turn carries Gemini's context before the prompt:
		// the file name is the last word.
		words := strings.Fields(p.LastUser)
		name := words[len(words)-1]
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "write_file",
			Args: `{"file_path":"` + filepath.Join(cwd, name) + `","content":"tool-ok\n"}`}}, Usage: usage}
	}))
	h := startHost(t, acp.Options{Command: cmd, Cwd: cwd, Env: geminiEnv(t, fake), Stderr: os.Stderr,
		SessionDir: t.TempDir(), NoFS: true, Trace: trace})
	h.until(t, "sync", typeIs("sync"))
	h.send(t, map[string]any{"type": "list_modes", "id": "m"})
	h.send(t, map[string]any{"type": "list_models", "id": "mm"})
	for _, want := range []string{"autoEdit", "gemini-2.5-pro"} {
		ev := h.until(t, "an answer", typeIs("response"))
		raw, _ := json.Marshal(ev[len(ev)-1])
		if !strings.Contains(string(raw), `"`+want+`"`) {
			t.Errorf("answer %s does not offer %s", raw, want)
		}
	}
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "write one.txt"})
	asked := 0
	var evs []map[string]any
	for ev := range h.events {
		evs = append(evs, ev)
		if ev["type"] == "permission_request" {
			asked++
			h.send(t, map[string]any{"type": "permission_response", "request_id": ev["request_id"], "choice_id": "proceed_always"})
		}
		if ev["type"] == "turn_end" {
			break
		}
	}
	if asked != 1 {
		t.Fatalf("first write: %d permission requests", asked)
	}
	if !strings.Contains(textOf(evs), "[MODE_UPDATE] autoEdit") {
		t.Errorf("first turn's text = %q; Gemini no longer announces autoEdit as text", textOf(evs))
	}
	// Gemini sends no current_mode_update: the mode Shard reports stays.
	h.send(t, map[string]any{"type": "list_modes", "id": "m2"})
	if ev := h.until(t, "list_modes answer", typeIs("response")); !strings.Contains(fmt.Sprint(ev[len(ev)-1]), "active:default") {
		t.Errorf("list_modes after proceed_always = %v", ev[len(ev)-1])
	}
	h.send(t, map[string]any{"type": "prompt", "id": "p2", "message": "write two.txt"})
	evs = h.until(t, "turn_end", typeIs("turn_end"))
	for _, ev := range evs {
		if ev["type"] == "permission_request" {
			t.Fatalf("second write asked again after proceed_always: %v", types(evs))
		}
	}
	for _, name := range []string{"one.txt", "two.txt"} {
		if b, err := os.ReadFile(filepath.Join(cwd, name)); err != nil || string(b) != "tool-ok\n" {
			t.Fatalf("%s = %q, %v", name, b, err)
		}
	}
}
