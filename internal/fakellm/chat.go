package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Chat is a fake OpenAI-compatible chat completions server (POST
// /v1/chat/completions with stream:true, server-sent events ending in
// [DONE]), which pi's openai-completions provider speaks. Script is as for
// Responses; a tool step's Tool is the function name as sent.
type Chat struct {
	URL    string
	Script func(lastUser string, hasToolOutput bool) Step
	// Started is signalled (non-blocking, buffered 16) when a response
	// began streaming.
	Started chan struct{}
	srv     *http.Server
}

// NewChat listens on 127.0.0.1 and serves until Close.
func NewChat(script func(lastUser string, hasToolOutput bool) Step) (*Chat, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Chat{URL: "http://" + ln.Addr().String() + "/v1", Script: script, Started: make(chan struct{}, 16)}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// Close stops the server.
func (c *Chat) Close() { _ = c.srv.Close() }

func (c *Chat) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
		return
	}
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/chat/completions") {
		http.NotFound(w, req)
		return
	}
	var in struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(body, &in)
	lastUser, hasOutput := "", false
	for _, m := range in.Messages {
		switch m.Role {
		case "user":
			lastUser, hasOutput = contentText(m.Content), false
		case "tool":
			hasOutput = true
		}
	}
	step := c.Script(lastUser, hasOutput)
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	signal := func() {
		select {
		case c.Started <- struct{}{}:
		default:
		}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	finish := "stop"
	if step.Tool != "" {
		finish = "tool_calls"
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": step.Tool, "arguments": step.Args}}}}, nil))
		signal()
	} else {
		for i, word := range strings.SplitAfter(step.Text, " ") {
			send(chunk(map[string]any{"content": word}, nil))
			if i == 0 {
				signal()
				if step.Hold != nil {
					select {
					case <-step.Hold:
					case <-req.Context().Done():
						return
					}
				}
			}
		}
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}})
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
