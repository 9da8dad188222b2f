package pi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

// recorder is an adapter.Events that writes one line per event.
type recorder struct {
	mu  sync.Mutex
	out strings.Builder
	// answer, when set, answers Ask (nil: cancelled).
	answer func(adapter.Ask) adapter.Answer
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}

func (r *recorder) UserText(s string)           { r.log("user %q", s) }
func (r *recorder) UserImage(im protocol.Image) { r.log("user image %s", im.MimeType) }
func (r *recorder) Text(s string)               { r.log("text %q", s) }
func (r *recorder) Thinking(s string)           { r.log("thinking %q", s) }
func (r *recorder) ModeChanged(m string)        { r.log("mode %s", m) }
func (r *recorder) ModelChanged(m string)       { r.log("model %s", m) }
func (r *recorder) LevelChanged(l string)       { r.log("level %s", l) }
func (r *recorder) ProtocolError(d string)      { r.log("protocol_error %s", d) }
func (r *recorder) ToolCall(t adapter.Tool) {
	r.log("tool %s %s %s read_only=%v args=%v output=%q", t.ID, t.Name, t.Status, t.ReadOnly, t.Args, t.Output)
}
func (r *recorder) Ask(_ context.Context, a adapter.Ask) adapter.Answer {
	r.log("ask %s %s %s args=%v", a.Tool.ID, a.Tool.Name, a.Tool.Status, a.Tool.Args)
	if r.answer == nil {
		return adapter.Answer{Cancelled: true}
	}
	return r.answer(a)
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
	want := `tool call_1 bash pending read_only=false args=map[command:echo tool-ok] output=""
tool call_1 bash completed read_only=false args=map[command:echo tool-ok] output="tool-ok\n"
text "done."
protocol_error a 16-byte line that is not a pi RPC record
`
	if got := rec.out.String(); got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
}

// piBin is the installed pi; without it the test skips (fails in strict
// mode: testhost.Missing).
func piBin(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "agents", "node_modules", ".bin", "pi")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "pi", err.Error())
	}
	return bin
}

// startPi starts the real pi in RPC mode in cwd against a fake model that
// answers the first model call with a bash call of command and the one
// after the tool's output with "done.".
func startPi(t *testing.T, cwd, command string, rec *recorder, trace io.Writer) (*Backend, *fakellm.Server) {
	t.Helper()
	bin := piBin(t)
	args, _ := json.Marshal(map[string]string{"command": command})
	usage := fakellm.Usage{Input: 42, Output: 7}
	fake := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		if p.ToolOutput {
			return fakellm.Turn{Text: "done.", Usage: usage}
		}
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "bash", Args: string(args)}}, Usage: usage}
	}))
	dir := t.TempDir()
	models := `{"providers":{"fakellm":{"baseUrl":"` + fake.URL + `/v1","api":"openai-completions","apiKey":"k",
"compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},
"models":[{"id":"fake-model","name":"Fake","reasoning":false,"input":["text"],"contextWindow":32000,"maxTokens":4096,
"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0}}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	b := New(Options{Command: []string{bin, "--mode", "rpc", "--no-session", "--offline", "--provider", "fakellm", "--model", "fake-model",
		"--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files"},
		Cwd: cwd, Env: append(os.Environ(), "PI_CODING_AGENT_DIR="+dir, "PI_OFFLINE=1", "HOME="+dir), Stderr: os.Stderr, Trace: trace})
	if _, err := b.Start(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, fake
}

// TestPiRecordTranscript runs the real pi (skipped when not installed) on
// a tool-calling prompt through the backend alone, the gate allowing the
// call, and with $SHARD_RECORD_PI set records what pi wrote there.
func TestPiRecordTranscript(t *testing.T) {
	var trace bytes.Buffer
	var tmu sync.Mutex
	rec := &recorder{answer: func(adapter.Ask) adapter.Answer { return adapter.Answer{OptionID: "allow"} }}
	b, _ := startPi(t, t.TempDir(), "echo tool-ok", rec,
		writerFunc(func(p []byte) (int, error) { tmu.Lock(); defer tmu.Unlock(); return trace.Write(p) }))
	res, err := b.Prompt(context.Background(), "use a tool", nil)
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

// TestPiGateAsksBeforeEachTool runs the real pi with the adapter's gate
// extension: its bash call becomes an Ask (the call's id, name and args,
// allow/deny options) before it runs; deny blocks it (the file it would
// create is not there, the call fails), allow runs it (the file is there,
// the call is in progress only once allowed, then completes).
func TestPiGateAsksBeforeEachTool(t *testing.T) {
	for _, tc := range []struct {
		answer, reason string
		created        bool
	}{{"deny", "", false}, {"deny", "use go vet instead", false}, {"allow", "", true}, {"", "", false}} {
		t.Run("answer="+tc.answer+"/"+tc.reason, func(t *testing.T) {
			cwd := t.TempDir()
			var asked adapter.Ask
			rec := &recorder{answer: func(a adapter.Ask) adapter.Answer {
				asked = a
				if tc.answer == "" {
					return adapter.Answer{Cancelled: true}
				}
				return adapter.Answer{OptionID: tc.answer, Reason: tc.reason}
			}}
			b, fake := startPi(t, cwd, "touch made.txt", rec, nil)
			res, err := b.Prompt(context.Background(), "make a file", nil)
			if err != nil || res.StopReason != adapter.StopEndTurn {
				t.Fatalf("prompt: %+v, %v", res, err)
			}
			rec.mu.Lock()
			out := rec.out.String()
			rec.mu.Unlock()
			if asked.Tool.Name != "bash" || asked.Tool.ID == "" || asked.Tool.Args["command"] != "touch made.txt" || len(asked.Options) != 2 ||
				asked.Options[0].Kind != adapter.AllowOnce || asked.Options[1].Kind != adapter.RejectOnce {
				t.Fatalf("ask = %+v\nevents:\n%s", asked, out)
			}
			_, err = os.Stat(filepath.Join(cwd, "made.txt"))
			if created := err == nil; created != tc.created {
				t.Fatalf("made.txt created = %v, want %v\nevents:\n%s", created, tc.created, out)
			}
			ask := strings.Index(out, "ask ")
			running := strings.Index(out, " bash in_progress ")
			if tc.created {
				if ask < 0 || running < ask || !strings.Contains(out, " bash completed ") {
					t.Fatalf("events:\n%s", out)
				}
			} else if running >= 0 || !strings.Contains(out, " bash failed ") {
				t.Fatalf("a refused call ran or did not fail:\n%s", out)
			}
			// The reason reaches the model with the refusal: the tool
			// message of its next request.
			last := string(fake.Request(t, fake.Count()).Raw)
			if tc.reason != "" && !strings.Contains(last, "the person's reason: "+tc.reason) {
				t.Fatalf("the model was not told the reason: %s", last)
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// FuzzHandle: any line pi might write (records, extension UI requests the
// gate's or not, garbage) is translated or reported, never a panic.
func FuzzHandle(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "pi-tool.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"extension_ui_request","id":"u1","method":"select","title":"shard-permission {\"toolCallId\":\"c\",\"toolName\":\"bash\",\"input\":{}}","options":["allow","deny"]}`))
	f.Add([]byte(`{"type":"extension_ui_request","id":"u2","method":"confirm","title":"shard-permission nope"}`))
	f.Add([]byte(`{"type":"extension_ui_request","id":"u3","method":"notify","message":"hi"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		b := New(Options{})
		b.ev, b.stdin = &recorder{}, nopWriteCloser{}
		b.handle(line)
		_ = b.Close() // waits for a gate question's goroutine
	})
}

// waitingEvents is a recorder whose Ask waits for its context: a gate
// question nobody answers.
type waitingEvents struct {
	recorder
	asked chan struct{} // closed when Ask is waiting
	ended chan error    // Ask's context's error, once it ended
}

func (w *waitingEvents) Ask(ctx context.Context, _ adapter.Ask) adapter.Answer {
	close(w.asked)
	<-ctx.Done()
	w.ended <- ctx.Err()
	return adapter.Answer{Cancelled: true}
}

// TestGateQuestionEndsWithClose: a gate question waiting for an answer
// belongs to the backend: Close cancels it and waits for it.
func TestGateQuestionEndsWithClose(t *testing.T) {
	ev := &waitingEvents{asked: make(chan struct{}), ended: make(chan error, 1)}
	b := New(Options{})
	b.ev, b.stdin = ev, nopWriteCloser{}
	b.handle([]byte(`{"type":"extension_ui_request","id":"u1","method":"select","title":"shard-permission {\"toolCallId\":\"c\",\"toolName\":\"bash\",\"input\":{}}","options":["allow","deny"]}`))
	<-ev.asked
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ev.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the question's context ended with %v", err)
		}
	default:
		t.Fatal("Close returned while the gate question was still waiting")
	}
}
