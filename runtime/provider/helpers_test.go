package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// testKey is the API key of every test provider. No error may contain it.
const testKey = "sk-test-0123456789-secret"

// testProvider returns a provider of the given name talking to the fake
// service without retries. baseSuffix is appended to the server URL ("/v1"
// for OpenAI-compatible servers).
func testProvider(t *testing.T, f *fakellm.Server, name, baseSuffix string) Provider {
	t.Helper()
	p, err := New(Config{
		Name:       name,
		BaseURL:    f.URL + baseSuffix,
		Model:      "test-model",
		APIKey:     testKey,
		HTTPClient: f.Client(),
		MaxRetries: 0,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// answer is a stream's events folded together, for assertions.
type answer struct {
	Text     map[int]string
	Thinking map[int]string
	Sigs     map[int]string
	Calls    map[int]*call
	Usage    *protocol.Usage
	Stop     string
	Events   []Event
}

// call is one tool call of an answer.
type call struct {
	ID, Name, Args string
	Deltas         int
}

// readAll reads s until io.EOF or an error, checking the event-order rules
// of the Stream contract on the way. It fails the test if the stream takes
// longer than 10 s.
func readAll(t *testing.T, s Stream) (*answer, error) {
	t.Helper()
	a := &answer{Text: map[int]string{}, Thinking: map[int]string{}, Sigs: map[int]string{}, Calls: map[int]*call{}}
	deadline := time.Now().Add(10 * time.Second)
	stopped := false
	for {
		if time.Now().After(deadline) {
			t.Fatal("stream did not end within 10s")
		}
		ev, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && !stopped {
				t.Fatal("io.EOF before EventStop")
			}
			if errors.Is(err, io.EOF) {
				return a, nil
			}
			return a, err
		}
		if stopped {
			t.Fatalf("event %v after EventStop", ev.Kind)
		}
		a.Events = append(a.Events, ev)
		switch ev.Kind {
		case EventText:
			a.Text[ev.Index] += ev.Text
		case EventThinking:
			a.Thinking[ev.Index] += ev.Text
			a.Sigs[ev.Index] += ev.Signature
		case EventToolCallStart:
			if a.Calls[ev.Index] != nil {
				t.Fatalf("second EventToolCallStart for block %d", ev.Index)
			}
			a.Calls[ev.Index] = &call{ID: ev.ToolCallID, Name: ev.ToolName}
		case EventToolCallArgs:
			c := a.Calls[ev.Index]
			if c == nil {
				t.Fatalf("EventToolCallArgs before EventToolCallStart for block %d", ev.Index)
			}
			c.Args += ev.ArgsDelta
			c.Deltas++
		case EventUsage:
			if a.Usage != nil {
				t.Fatal("second EventUsage")
			}
			a.Usage = ev.Usage
		case EventStop:
			a.Stop = ev.StopReason
			stopped = true
		default:
			t.Fatalf("unknown event kind %v", ev.Kind)
		}
	}
}

// mustRead reads s to its end and fails the test on an error.
func mustRead(t *testing.T, s Stream) *answer {
	t.Helper()
	a, err := readAll(t, s)
	if err != nil {
		t.Fatalf("stream failed: %v", err)
	}
	// The end is sticky.
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after the end = %v, want io.EOF", err)
	}
	return a
}

// assertProviderError checks that err is a PROVIDER_ERROR whose message
// contains every want and never the API key.
func assertProviderError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want PROVIDER_ERROR")
	}
	if code := protocol.CodeOf(err); code != protocol.CodeProviderError {
		t.Fatalf("code = %s (err %v), want PROVIDER_ERROR", code, err)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("errors.As(*protocol.Error) failed for %v", err)
	}
	wire := protocol.AsError(err)
	for _, text := range []string{err.Error(), pe.Message, wire.Message, fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", wire)} {
		if strings.Contains(text, testKey) {
			t.Fatalf("error text contains the API key: %q", text)
		}
	}
	for _, w := range want {
		if !strings.Contains(pe.Message, w) {
			t.Errorf("error message %q does not contain %q", pe.Message, w)
		}
	}
}

// has reports whether the JSON object m has key.
func has(m any, key string) bool {
	obj, ok := m.(map[string]any)
	if !ok {
		return false
	}
	_, ok = obj[key]
	return ok
}

// asJSON re-encodes a decoded JSON value canonically, for comparisons.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// canonical re-encodes a JSON text canonically.
func canonical(t *testing.T, text string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", text, err)
	}
	return asJSON(t, v)
}

// within runs f and fails the test if it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if el := time.Since(start); el > d {
		t.Fatalf("%s took %v, want under %v", what, el, d)
	}
}

// background is the context of the tests that do not cancel.
func background(t *testing.T) context.Context {
	return t.Context()
}

// splitEvery splits s into pieces of n bytes (the last may be shorter),
// never inside a UTF-8 sequence.
func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		cut := min(n, len(s))
		for cut < len(s) && cut > 0 && (s[cut]&0xC0) == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// conversation is a request exercising every block kind: a user prompt, an
// assistant answer with thinking, text and two tool calls, the tool results
// (one failed) plus a steer, as the runtime would send it.
func conversation() Request {
	return Request{
		System: "You are a coding agent.",
		Messages: []protocol.Message{
			{ID: "m1", Role: "user", Content: []protocol.ContentBlock{{Type: "text", Text: "list the files"}}},
			{ID: "m2", Role: "assistant", Content: []protocol.ContentBlock{
				{Type: "thinking", Text: "I should call ls."},
				{Type: "text", Text: "Let me look."},
				{Type: "tool_call", ID: "call_1", Name: "ls", Args: map[string]any{"path": "."}},
				{Type: "tool_call", ID: "call_2", Name: "read", Args: map[string]any{"path": "go.mod", "limit": float64(10)}},
			}},
			{ID: "m3", Role: "user", Content: []protocol.ContentBlock{
				{Type: "tool_result", ToolCallID: "call_1", Content: &protocol.ToolResultContent{Kind: "text", Text: "a.go\nb.go"}},
				{Type: "tool_result", ToolCallID: "call_2", IsError: true, Content: &protocol.ToolResultContent{Kind: "error", Message: "no such file"}},
				{Type: "text", Text: "also check c.go"},
			}},
		},
		Tools: []ToolSpec{
			{Name: "ls", Description: "List a directory.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "noargs", Description: "No arguments."},
		},
		Signatures: map[BlockRef]Signature{{MessageID: "m2", Index: 0}: {Value: "sig-abc"}},
	}
}
