// Package fakellm is a scripted fake of a model provider's streaming API
// on 127.0.0.1, speaking the provider's real wire format, for tests that
// run real third-party agents offline. Responses speaks the
// OpenAI Responses API (POST /v1/responses, server-sent events), which
// codex uses.
package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Step is what the fake model answers to one request: text (streamed in
// words), or a function call of the named tool with its JSON arguments.
// Hold, when set, is waited on after the first chunk (abort and crash
// tests close it, or never do).
type Step struct {
	Text string
	// Tool, when set, makes the answer a function call: Tool is matched
	// against the request's tool names (the first one containing it).
	Tool string
	Args string
	Hold <-chan struct{}
}

// Responses is the fake server. Script picks the step for a request from
// the text of the request's last user input.
type Responses struct {
	URL    string
	Script func(lastUser string, hasToolOutput bool) Step

	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	// Requests counts the model calls.
	requests int
	tools    []string // of the last request: type:name
	// Started is signalled (non-blocking, buffered 16) when a response
	// began streaming.
	Started chan struct{}
}

// NewResponses listens on 127.0.0.1 and serves until Close.
func NewResponses(script func(lastUser string, hasToolOutput bool) Step) (*Responses, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Responses{URL: "http://" + ln.Addr().String() + "/v1", Script: script, ln: ln, Started: make(chan struct{}, 16)}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the server.
func (r *Responses) Close() { _ = r.srv.Close() }

// Requests returns how many model calls were made.
func (r *Responses) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Tools returns the tools (type:name) the last request offered.
func (r *Responses) Tools() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tools...)
}

type request struct {
	Input []json.RawMessage `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

func (r *Responses) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"gpt-5","object":"model"}],"models":[]}`)
		return
	}
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/responses") {
		http.NotFound(w, req)
		return
	}
	body, _ := io.ReadAll(req.Body)
	var in request
	_ = json.Unmarshal(body, &in)
	lastUser, hasOutput := "", false
	for _, raw := range in.Input {
		var item struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content json.RawMessage
		}
		_ = json.Unmarshal(raw, &item)
		switch {
		case item.Type == "function_call_output" || item.Type == "custom_tool_call_output":
			hasOutput = true
		case item.Role == "user":
			lastUser, hasOutput = contentText(item.Content), false
		}
	}
	r.mu.Lock()
	r.requests++
	n := r.requests
	r.tools = r.tools[:0]
	for _, t := range in.Tools {
		r.tools = append(r.tools, t.Type+":"+t.Name)
	}
	r.mu.Unlock()
	step := r.Script(lastUser, hasOutput)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	respID := fmt.Sprintf("resp_%d", n)
	send("response.created", map[string]any{"type": "response.created", "response": map[string]any{
		"id": respID, "object": "response", "created_at": 0, "status": "in_progress", "model": "gpt-5", "output": []any{}}})
	var item map[string]any
	if step.Tool != "" {
		name := step.Tool
		for _, t := range in.Tools {
			if strings.Contains(t.Name, step.Tool) {
				name = t.Name
				break
			}
		}
		callID := fmt.Sprintf("call_%d", n)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": callID, "name": name,
			"arguments": step.Args, "status": "completed"}
		send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "function_call", "id": item["id"], "call_id": callID, "name": name, "arguments": "", "status": "in_progress"}})
		send("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta",
			"item_id": item["id"], "output_index": 0, "delta": step.Args})
		send("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done",
			"item_id": item["id"], "output_index": 0, "arguments": step.Args})
		r.signal()
		if step.Hold != nil {
			<-waitOrGone(step.Hold, req)
		}
	} else {
		msgID := fmt.Sprintf("msg_%d", n)
		send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}})
		send("response.content_part.added", map[string]any{"type": "response.content_part.added", "item_id": msgID, "output_index": 0,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		words := strings.SplitAfter(step.Text, " ")
		for i, word := range words {
			send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": msgID,
				"output_index": 0, "content_index": 0, "delta": word})
			if i == 0 {
				r.signal()
				if step.Hold != nil {
					select {
					case <-step.Hold:
					case <-req.Context().Done():
						return
					}
				}
			}
		}
		send("response.output_text.done", map[string]any{"type": "response.output_text.done", "item_id": msgID,
			"output_index": 0, "content_index": 0, "text": step.Text})
		item = map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": step.Text, "annotations": []any{}}}}
	}
	send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	send("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "object": "response", "created_at": 0, "status": "completed", "model": "gpt-5", "output": []any{item},
		"usage": map[string]any{"input_tokens": 42, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 7, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 49}}})
}

func (r *Responses) signal() {
	select {
	case r.Started <- struct{}{}:
	default:
	}
}

// waitOrGone is closed when hold is or the client went away.
func waitOrGone(hold <-chan struct{}, req *http.Request) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-hold:
		case <-req.Context().Done():
		}
		close(out)
	}()
	return out
}

// contentText is the text of a Responses input content (a string or a
// list of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
