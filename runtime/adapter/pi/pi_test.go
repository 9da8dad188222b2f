package pi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/runtime/adapter"
)

// recorder is an adapter.Events that writes one line per event.
type recorder struct {
	mu  sync.Mutex
	out strings.Builder
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}

func (r *recorder) UserText(s string)      { r.log("user %q", s) }
func (r *recorder) Text(s string)          { r.log("text %q", s) }
func (r *recorder) Thinking(s string)      { r.log("thinking %q", s) }
func (r *recorder) ModeChanged(m string)   { r.log("mode %s", m) }
func (r *recorder) ProtocolError(d string) { r.log("protocol_error %s", d) }
func (r *recorder) ToolCall(t adapter.Tool) {
	r.log("tool %s %s %s read_only=%v args=%v output=%q", t.ID, t.Name, t.Status, t.ReadOnly, t.Args, t.Output)
}
func (r *recorder) Ask(context.Context, adapter.Ask) adapter.Answer {
	r.log("ask")
	return adapter.Answer{Cancelled: true}
}

// TestPiTranscript feeds testdata/pi-tool.jsonl, recorded from the real pi
// 0.73.1 by TestPiRecordTranscript (a prompt whose answer calls bash),
// through the translator: deltas become text, tool executions tool calls,
// agent_end the turn's end with pi's stop reason and summed usage.
func TestPiTranscript(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pi-tool.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b := New(Options{})
	b.ev = rec
	turn := make(chan adapter.TurnResult, 1)
	b.turn = turn
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			b.handle(l)
		}
	}
	b.handle([]byte("not a pi record\n"))
	res := <-turn
	if res.StopReason != adapter.StopEndTurn || res.Usage == nil || res.Usage.Input != 84 || res.Usage.Output != 14 {
		t.Fatalf("turn result = %+v (usage %+v)", res, res.Usage)
	}
	want := `tool call_1 bash in_progress read_only=false args=map[command:echo tool-ok] output=""
tool call_1 bash completed read_only=false args=map[] output="tool-ok\n"
text "done."
protocol_error a 16-byte line that is not a pi RPC record
`
	if got := rec.out.String(); got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
}

// TestPiRecordTranscript runs the real pi (skipped when not installed) on
// a tool-calling prompt through the backend alone, and with
// $SHARD_RECORD_PI set records what pi wrote there.
func TestPiRecordTranscript(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "agents", "node_modules", ".bin", "pi")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("pi is not installed (run scripts/install-agents.sh): %v", err)
	}
	fake, err := fakellm.NewChat(func(_ string, out bool) fakellm.Step {
		if out {
			return fakellm.Step{Text: "done."}
		}
		return fakellm.Step{Tool: "bash", Args: `{"command":"echo tool-ok"}`}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dir := t.TempDir()
	models := `{"providers":{"fakellm":{"baseUrl":"` + fake.URL + `","api":"openai-completions","apiKey":"k",
"compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},
"models":[{"id":"fake-model","name":"Fake","reasoning":false,"input":["text"],"contextWindow":32000,"maxTokens":4096,
"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0}}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	var trace bytes.Buffer
	var tmu sync.Mutex
	b := New(Options{Command: []string{bin, "--mode", "rpc", "--no-session", "--offline", "--provider", "fakellm", "--model", "fake-model",
		"--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files"},
		Cwd: t.TempDir(), Env: append(os.Environ(), "PI_CODING_AGENT_DIR="+dir, "PI_OFFLINE=1", "HOME="+dir), Stderr: os.Stderr,
		Trace: writerFunc(func(p []byte) (int, error) { tmu.Lock(); defer tmu.Unlock(); return trace.Write(p) })})
	rec := &recorder{}
	if _, err := b.Start(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Prompt(context.Background(), "use a tool")
	if err != nil || res.StopReason != adapter.StopEndTurn {
		t.Fatalf("prompt: %+v, %v", res, err)
	}
	if !strings.Contains(rec.out.String(), `output="tool-ok\n"`) {
		t.Fatalf("events:\n%s", rec.out.String())
	}
	if p := os.Getenv("SHARD_RECORD_PI"); p != "" {
		tmu.Lock()
		defer tmu.Unlock()
		if err := os.WriteFile(p, trace.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
