package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/runtime/adapter"
	"github.com/shard-dev/shard/runtime/adapter/acp"
)

// codexBinary is the codex-acp agent scripts/install-agents.sh installs;
// without it the test skips (fails in strict mode: testhost.Missing).
func codexBinary(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	bin := filepath.Join(root, ".cache", "agents", "node_modules", "@zed-industries", "codex-acp-linux-x64", "bin", "codex-acp")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "codex-acp", err.Error())
	}
	return bin
}

// codexEnv returns the agent environment pointing codex at fake: a
// disposable HOME and CODEX_HOME whose config.toml names the fake as the
// model provider (codex ignores OPENAI_BASE_URL).
func codexEnv(t *testing.T, fake *fakellm.Server) []string {
	t.Helper()
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `model_provider = "fake"
model = "gpt-5"
[model_providers.fake]
name = "fake"
base_url = "` + fake.URL + `/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "OPENAI_API_KEY=not-a-real-key", "PATH=" + os.Getenv("PATH")}
}

// hostRun runs the adapter in-process: commands go in on the returned
// writer, events come out on the channel.
type hostRun struct {
	in     io.WriteCloser
	events chan map[string]any
	done   chan error
}

func startHost(t *testing.T, opts acp.Options) *hostRun {
	t.Helper()
	return startBackend(t, acp.New(opts), func(o *adapter.Options) { o.SessionDir = opts.SessionDir })
}

// startBackend is startHost with the backend made by the caller; edits
// change the Host's options (the daemon's adapter keeps its files in the
// agent's session directory, and restores the kept selection).
func startBackend(t *testing.T, b *acp.Backend, edits ...func(*adapter.Options)) *hostRun {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &hostRun{in: inW, events: make(chan map[string]any, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("adapter wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			h.events <- m
		}
		close(h.events)
	}()
	go func() {
		opts := adapter.Options{Stdin: inR, Stdout: outW, ServerVersion: "test"}
		for _, e := range edits {
			e(&opts)
		}
		err := adapter.Run(context.Background(), opts, b)
		outW.Close()
		h.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			t.Error("adapter did not stop")
		}
	})
	return h
}

func (h *hostRun) send(t *testing.T, v map[string]any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// until returns the events up to and including the first for which match
// is true.
func (h *hostRun) until(t *testing.T, what string, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	var seen []map[string]any
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-h.events:
			if !ok {
				t.Fatalf("adapter output ended before %s; saw %v", what, types(seen))
			}
			seen = append(seen, ev)
			if match(ev) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no %s within 60s; saw %v", what, types(seen))
		}
	}
}

func typeIs(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

func types(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		s, _ := e["type"].(string)
		out = append(out, s)
	}
	return out
}

func textOf(evs []map[string]any) string {
	var b strings.Builder
	for _, e := range evs {
		if e["type"] == "message_delta" && e["kind"] == "text" {
			s, _ := e["text_delta"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// TestCodexStreamedAnswer: a real codex-acp against the fake Responses
// server streams an answer that reaches the Shard side as message_delta,
// message_complete and turn_end with the stop reason and usage.
func TestCodexStreamedAnswer(t *testing.T) {
	bin := codexBinary(t)
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "Hello from the fake model.", Usage: fakellm.Usage{Input: 42, Output: 7}}
	}))
	cwd := t.TempDir()
	h := startHost(t, acp.Options{Command: []string{bin}, Cwd: cwd, Env: codexEnv(t, fake), Stderr: os.Stderr,
		AuthMethod: "openai-api-key", SessionDir: t.TempDir()})
	h.until(t, "sync", typeIs("sync"))
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "hi"})
	evs := h.until(t, "turn_end", typeIs("turn_end"))
	t.Logf("events: %v", types(evs))
	if got := textOf(evs); !strings.HasSuffix(got, "Hello from the fake model.") {
		t.Fatalf("streamed text = %q", got)
	}
	end := evs[len(evs)-1]
	if end["stop_reason"] != "end_turn" {
		t.Fatalf("turn_end = %v", end)
	}
}

// TestCodexRecordTranscript records what codex-acp sends for a tool call
// that asks permission into $SHARD_RECORD_ACP (testdata transcripts come
// from it); without the variable it only runs the exchange.
func TestCodexRecordTranscript(t *testing.T) {
	bin := codexBinary(t)
	var trace io.Writer
	if p := os.Getenv("SHARD_RECORD_ACP"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		trace = f
	}
	fake := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		usage := fakellm.Usage{Input: 42, Output: 7}
		if p.ToolOutput {
			return fakellm.Turn{Text: "done.", Usage: usage}
		}
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "exec_command",
			Args: `{"cmd":"echo tool-ok > out.txt","sandbox_permissions":"require_escalated","justification":"write a file"}`}}, Usage: usage}
	}))
	cwd := t.TempDir()
	h := startHost(t, acp.Options{Command: []string{bin}, Cwd: cwd, Env: codexEnv(t, fake), Stderr: os.Stderr,
		AuthMethod: "openai-api-key", SessionDir: t.TempDir(), Trace: trace})
	h.until(t, "sync", typeIs("sync"))
	h.send(t, map[string]any{"type": "list_modes", "id": "m"})
	h.send(t, map[string]any{"type": "list_models", "id": "mm"})
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "run it"})
	for ev := range h.events {
		if ev["type"] == "permission_request" {
			h.send(t, map[string]any{"type": "permission_response", "request_id": ev["request_id"], "decision": "allow"})
		}
		if ev["type"] == "turn_end" {
			break
		}
	}
	if data, err := os.ReadFile(filepath.Join(cwd, "out.txt")); err != nil || strings.TrimSpace(string(data)) != "tool-ok" {
		t.Fatalf("out.txt = %q, %v", data, err)
	}
}
