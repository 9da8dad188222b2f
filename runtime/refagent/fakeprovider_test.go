package refagent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fake model services for the runtime's provider tests: local HTTP servers
// on 127.0.0.1 speaking the OpenAI chat-completions and Anthropic Messages
// streaming (SSE) formats, scripted per request. Adapted from
// runtime/provider's own fakes (test files are not shared across packages).

// testAPIKey is the key every fake-provider runtime gets. It must never
// appear on stdout or stderr.
const testAPIKey = "sk-shard-test-0123456789-secret"

// fakeService records the requests it answers with handler; n is the
// 1-based number of the request.
type fakeService struct {
	srv *httptest.Server

	mu   sync.Mutex // protects reqs
	reqs []seenRequest
}

// seenRequest is one request the fake service received.
type seenRequest struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

func newFakeService(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, n int)) *fakeService {
	t.Helper()
	f := &fakeService{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, seenRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
		n := len(f.reqs)
		f.mu.Unlock()
		handler(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// request returns the n-th request (1-based).
func (f *fakeService) request(t *testing.T, n int) seenRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) < n {
		t.Fatalf("service received %d requests, want at least %d", len(f.reqs), n)
	}
	return f.reqs[n-1]
}

func (f *fakeService) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// sseWriter writes server-sent events, flushing each one.
type sseWriter struct{ w http.ResponseWriter }

func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return &sseWriter{w: w}
}

// event writes one event: an "event:" line when name is set, then data,
// JSON-encoded unless it is a string.
func (s *sseWriter) event(name string, data any) {
	payload, ok := data.(string)
	if !ok {
		raw, err := json.Marshal(data)
		if err != nil {
			panic(fmt.Sprintf("marshal event: %v", err))
		}
		payload = string(raw)
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + payload + "\n\n")
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return // the client went away
	}
	s.w.(http.Flusher).Flush()
}

// jsonError answers with an HTTP error status and a JSON body.
func jsonError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// ---- OpenAI chat.completion.chunk ----

func oaChunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "served-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
}

func oaUsage(prompt, completion int) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "served-model",
		"choices": []any{},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	}
}

// oaToolDelta is one tool-call fragment; empty id/name are left out, as
// servers do after the first fragment.
func oaToolDelta(index int, id, name, args string) map[string]any {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	tc := map[string]any{"index": index, "function": fn}
	if id != "" {
		tc["id"] = id
		tc["type"] = "function"
	}
	return map[string]any{"tool_calls": []any{tc}}
}

// oaText streams a whole text answer in parts.
func oaText(w http.ResponseWriter, prompt, completion int, parts ...string) {
	s := startSSE(w)
	for _, p := range parts {
		s.event("", oaChunk(map[string]any{"content": p}, nil))
	}
	s.event("", oaChunk(map[string]any{}, "stop"))
	s.event("", oaUsage(prompt, completion))
	s.event("", "[DONE]")
}

// ---- Anthropic Messages events ----

type msgStream struct{ *sseWriter }

func startMessages(w http.ResponseWriter, input int) msgStream {
	s := msgStream{startSSE(w)}
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_01", "type": "message", "role": "assistant", "content": []any{},
		"model": "claude-served", "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": input, "output_tokens": 1},
	}})
	return s
}

func (s msgStream) blockStart(index int, block map[string]any) {
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
}

func (s msgStream) delta(index int, delta map[string]any) {
	s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": delta})
}

func (s msgStream) blockStop(index int) {
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}

func (s msgStream) end(stop string, output int) {
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

func (s msgStream) textBlock(index int, parts ...string) {
	s.blockStart(index, map[string]any{"type": "text", "text": ""})
	for _, p := range parts {
		s.delta(index, map[string]any{"type": "text_delta", "text": p})
	}
	s.blockStop(index)
}

// ---- helpers ----

// startWithProvider starts a runtime talking to the fake service f as the
// named provider.
func startWithProvider(t *testing.T, f *fakeService, name, model string, mod func(*Options)) *harness {
	t.Helper()
	base := f.srv.URL
	if name == "openai" {
		base += "/v1"
	}
	h := start(t, func(o *Options) {
		o.Provider = name
		o.BaseURL = base
		o.ProviderModel = model
		o.APIKey = testAPIKey
		if mod != nil {
			mod(o)
		}
	})
	h.handshake()
	return h
}

// jget walks a decoded JSON value: keys for objects, ints for arrays.
func jget(t *testing.T, v any, path ...any) any {
	t.Helper()
	cur := v
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("path %v: element %d is %T, not an object", path, i, cur)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("path %v: no key %q in %v", path, k, m)
			}
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("path %v: element %d is %T, not an array with index %d", path, i, cur, k)
			}
			cur = a[k]
		}
	}
	return cur
}

// hold blocks a fake handler until release is closed or the client left.
func hold(r *http.Request, release <-chan struct{}) {
	select {
	case <-release:
	case <-r.Context().Done():
	case <-time.After(waitTimeout):
	}
}
