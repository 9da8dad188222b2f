package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

var update = flag.Bool("update", false, "rewrite the .golden files of the transcript tests")

// replay is an adapter.Backend that plays a recorded transcript of what
// an ACP agent sent (one JSON-RPC message a line, as Options.Trace
// records them) through the Translator: initialize/session results are
// skipped, session/update notifications are translated, a
// session/request_permission is asked through the Host, and the first
// result with a stopReason ends the turn.
type replay struct {
	lines [][]byte
	tr    *Translator
	ev    adapter.Events
	asked []sdk.RequestPermissionResponse
	done  chan struct{}
}

func (r *replay) Start(_ context.Context, ev adapter.Events) (adapter.Offer, error) {
	r.ev, r.tr = ev, NewTranslator(ev)
	return adapter.Offer{Modes: []protocol.ModeDescriptor{{Name: "read-only"}, {Name: "auto"}}, Mode: "read-only"}, nil
}

func (r *replay) Prompt(ctx context.Context, _ string, _ []protocol.Image) (adapter.TurnResult, error) {
	for _, line := range r.lines {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if !json.Valid(line) { // as Backend.filter does
			r.ev.ProtocolError("a line that is not JSON")
			continue
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return adapter.TurnResult{}, err
		}
		switch msg.Method {
		case "session/update":
			var n sdk.SessionNotification
			if err := json.Unmarshal(msg.Params, &n); err != nil {
				return adapter.TurnResult{}, err
			}
			r.tr.Update(n.Update)
		case "session/request_permission":
			var req sdk.RequestPermissionRequest
			if err := json.Unmarshal(msg.Params, &req); err != nil {
				return adapter.TurnResult{}, err
			}
			r.asked = append(r.asked, RequestPermission(ctx, r.tr, r.ev, req))
		case "":
			var res sdk.PromptResponse
			if json.Unmarshal(msg.Result, &res) == nil && res.StopReason != "" {
				out := adapter.TurnResult{StopReason: string(res.StopReason)}
				if u := res.Usage; u != nil {
					out.Usage = &protocol.Usage{Input: int64(u.InputTokens), Output: int64(u.OutputTokens)}
				}
				return out, nil
			}
		}
	}
	return adapter.TurnResult{StopReason: "end_turn"}, nil
}

func (r *replay) Cancel()                                {}
func (r *replay) SetMode(context.Context, string) error  { return nil }
func (r *replay) SetModel(context.Context, string) error { return adapter.ErrUnsupported }
func (r *replay) Done() <-chan struct{}                  { return r.done }
func (r *replay) Err() error                             { return nil }
func (r *replay) Close() error                           { return nil }

// TestTranscripts plays each testdata/*.jsonl transcript through the
// translator and the Host, answers its permission requests with the
// choice named in the test table, and compares the Shard events with
// testdata/<name>.golden (go test -run TestTranscripts -update rewrites
// them). codex-permission.jsonl was recorded from the real codex-acp by
// TestCodexRecordTranscript; synthetic-diff-thinking.jsonl is written by
// hand after the ACP schema (thoughts, a plan, a diff, a failed call, a
// mode change, usage).
func TestTranscripts(t *testing.T) {
	for name, choice := range map[string]string{
		"codex-permission":        "approved",
		"synthetic-diff-thinking": "yes",
	} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			r := &replay{done: make(chan struct{})}
			for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
				r.lines = append(r.lines, l)
			}
			got := runReplay(t, r, choice)
			if len(r.asked) != 1 || r.asked[0].Outcome.Selected == nil || string(r.asked[0].Outcome.Selected.OptionId) != choice {
				t.Fatalf("the agent was answered %+v, want option %s", r.asked, choice)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("events differ from %s:\n%s", golden, got)
			}
		})
	}
}

// runReplay runs the Host over r: a prompt, the permission answered with
// choice, until turn_end. It returns the Shard records, one a line.
func runReplay(t *testing.T, r *replay, choice string) string {
	return runReplayReason(t, r, choice, "")
}

// runReplayReason is runReplay answering with reason as well.
func runReplayReason(t *testing.T, r *replay, choice, reason string) string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	fixed := time.UnixMilli(0)
	done := make(chan error, 1)
	go func() {
		done <- adapter.Run(context.Background(), adapter.Options{Stdin: inR, Stdout: outW, ServerVersion: "test",
			Clock: func() time.Time { return fixed }}, r)
		outW.Close()
	}()
	var out strings.Builder
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	go func() { _, _ = inW.Write([]byte(`{"type":"prompt","id":"p1","message":"go"}` + "\n")) }()
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		var ev map[string]any
		_ = json.Unmarshal([]byte(line), &ev)
		switch ev["type"] {
		case "permission_request":
			resp := map[string]any{"type": "permission_response", "id": "r1", "request_id": ev["request_id"], "choice_id": choice}
			if reason != "" {
				resp["reason"] = reason
			}
			b, _ := json.Marshal(resp)
			go func() { _, _ = inW.Write(append(b, '\n')) }() // never block the reader of the Host's output
		case "turn_end":
			inW.Close()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestPermissionReasonInMeta: a permission_response's reason reaches the
// ACP agent in the answer's _meta (ACP has no field for it).
func TestPermissionReasonInMeta(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "codex-permission.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := &replay{done: make(chan struct{})}
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		r.lines = append(r.lines, l)
	}
	runReplayReason(t, r, "approved", "only this once")
	if len(r.asked) != 1 || r.asked[0].Meta[MetaReason] != "only this once" {
		t.Fatalf("the agent was answered %+v, want the reason in _meta", r.asked)
	}
}

// FuzzUpdate: any session/update the agent sends is translated without
// panicking.
func FuzzUpdate(f *testing.F) {
	data, _ := os.ReadFile(filepath.Join("testdata", "synthetic-diff-thinking.jsonl"))
	for _, l := range bytes.Split(data, []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var msg struct {
			Params sdk.SessionNotification `json:"params"`
		}
		if json.Unmarshal(line, &msg) != nil {
			return
		}
		NewTranslator(nopEvents{}).Update(msg.Params.Update)
	})
}

type nopEvents struct{}

func (nopEvents) UserText(string)          {}
func (nopEvents) UserImage(protocol.Image) {}
func (nopEvents) Text(string)              {}
func (nopEvents) Thinking(string)          {}
func (nopEvents) ToolCall(adapter.Tool)    {}
func (nopEvents) ModeChanged(string)       {}
func (nopEvents) ModelChanged(string)      {}
func (nopEvents) LevelChanged(string)      {}
func (nopEvents) Ask(context.Context, adapter.Ask) adapter.Answer {
	return adapter.Answer{Cancelled: true}
}
func (nopEvents) ProtocolError(string) {}
