package fakellm

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Turn is what the fake model answers to one request. In the stream the
// thinking comes first, then the text, then the tool calls; text and
// thinking are streamed a word per event. A Turn with tool calls stops for
// tool use, one without ends the turn.
type Turn struct {
	// Thinking is the model's reasoning: reasoning_content deltas in chat
	// completions, a reasoning summary in Responses, a thinking block in
	// Messages.
	Thinking string
	// Signature signs the thinking block of a Messages answer (clients
	// send it back with the block); when empty a fixed one is sent, as the
	// service always signs.
	Signature string
	Text      string
	Calls     []ToolCall
	Usage     Usage

	// Status, when set, answers with that HTTP status and the service's
	// error object carrying Error instead of a stream.
	Status int
	Error  string

	// Hold, when set, is waited on after the first streamed event; a test
	// closes it to let the answer go on, or never does (abort and crash
	// tests). The answer ends early when the client goes away.
	Hold <-chan struct{}
}

// NamespaceSep joins a Responses namespace and the name of one of its
// tools in Prompt.Tools and ToolCall.Name: "mcp__shard.subagent_create".
// A call so named is sent as a function_call with that namespace and the
// tool's own name, as the API has a model call a namespaced tool. Tool
// names never hold a dot in any of the formats, so the join is
// unambiguous.
const NamespaceSep = "."

// ToolCall is one tool call of a Turn.
type ToolCall struct {
	// ID is the call's id; when empty one is made up.
	ID string
	// Name is matched against the tools the request offers: the first
	// offered name equal to it, else the first containing it, else Name as
	// it is. So a script can say "exec" whatever prefix an agent gives.
	Name string
	// Args is the JSON text of the arguments, "{}" when empty.
	Args string
}

// Usage is the token usage a Turn reports, sent as it is (zero included).
type Usage struct {
	Input, Output int
	// CacheRead is the part of Input read from the prompt cache.
	CacheRead int
}

// Prompt is what a scripted model was asked, read from the request.
type Prompt struct {
	// N is the request's 1-based number on its Server (0 in Reply).
	N int
	// LastUser is the text of the last user message.
	LastUser string
	// Images are the images of the last user message, in its order.
	Images []Image
	// ToolOutput is set when tool results came after that user message:
	// the model is called back after running its tools.
	ToolOutput bool
	// ToolResults are the texts of those tool results, in order (chat
	// completions' tool messages, Messages' tool_result blocks, the
	// Responses API's *_call_output items' output; empty for Gemini), so a
	// script can go on from what its tools answered.
	ToolResults []string
	// Tools are the names of the tools the request offers; a tool of a
	// Responses namespace is "<namespace>.<tool>" (NamespaceSep).
	Tools []string
	// Model is the model the request asks for.
	Model string
	// System is the system prompt: the system (or developer) messages of
	// chat completions, the instructions of Responses, the system of
	// Messages (its text blocks joined).
	System string
}

// Image is one image of a user message as the request carried it: URL
// for chat completions' image_url part and the Responses API's
// input_image (a data: URL for an inline image), MediaType and Data for a
// Messages image block with a base64 source.
type Image struct {
	URL       string
	MediaType string
	Data      string
}

// Script is a Handler that answers each model request with the Turn that
// answer returns, in the format its path names; a GET of .../models lists
// Model; a HEAD of / answers 200 (Claude Code checks that its base URL is
// reachable before it sends anything). Other requests get 404. answer is called from the Server's
// goroutines, concurrently when the client sends requests in parallel.
func Script(answer func(Prompt) Turn) Handler {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodHead && r.URL.Path == "/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+Model+`","object":"model","type":"model","owned_by":"fakellm"}],"models":[],"has_more":false}`)
			return
		}
		if serveGemini(w, r, n, answer) {
			return
		}
		wire, p, ok := readPrompt(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		p.N = n
		reply(w, r, wire, p, answer(p))
	}
}

// Reply answers r with t in the format r's path names (chat completions,
// Responses, Messages or the Gemini API), for a hand-written Handler that scripts only some
// of its requests. A path of none of them gets 404.
func Reply(w http.ResponseWriter, r *http.Request, t Turn) {
	if serveGemini(w, r, 0, func(Prompt) Turn { return t }) {
		return
	}
	wire, p, ok := readPrompt(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	reply(w, r, wire, p, t)
}

// wire is one of the three formats.
type wire int

const (
	wireChat wire = iota
	wireResponses
	wireMessages
)

func reply(w http.ResponseWriter, r *http.Request, wf wire, p Prompt, t Turn) {
	if t.Status != 0 {
		serviceError(w, wf, t.Status, t.Error)
		return
	}
	prefix := "call_"
	if wf == wireMessages {
		prefix = "toolu_"
	}
	calls := make([]ToolCall, len(t.Calls))
	for i, c := range t.Calls {
		calls[i] = c
		calls[i].Name = offered(p.Tools, c.Name)
		if c.ID == "" {
			calls[i].ID = id(prefix)
		}
		if c.Args == "" {
			calls[i].Args = "{}"
		}
	}
	t.Calls = calls
	a := &answer{Turn: t, events: SSE(w), r: r}
	switch wf {
	case wireChat:
		replyChat(a)
	case wireResponses:
		replyResponses(a)
	case wireMessages:
		replyMessages(a)
	}
}

// answer is a Turn being streamed.
type answer struct {
	Turn
	events *Events
	r      *http.Request
	paced  bool
}

// pace is called after each streamed event: after the first it waits on
// Hold. It reports whether to go on (false: the client has gone).
func (a *answer) pace() bool {
	if a.paced || a.Hold == nil {
		return a.r.Context().Err() == nil
	}
	a.paced = true
	return Hold(a.r, a.Hold)
}

// id makes up an id with prefix.
func id(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:16])
}

// words splits text into the pieces a service streams: each word with the
// space after it.
func words(text string) []string {
	if text == "" {
		return nil
	}
	return strings.SplitAfter(text, " ")
}

// offered is the tool name a call of name uses given the offered tools.
func offered(tools []string, name string) string {
	for _, t := range tools {
		if t == name {
			return t
		}
	}
	for _, t := range tools {
		if strings.Contains(t, name) {
			return t
		}
	}
	return name
}

// serviceError answers status with the error object of the format.
func serviceError(w http.ResponseWriter, wf wire, status int, message string) {
	var body any
	if wf == wireMessages {
		kind := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}[status]
		if kind == "" {
			kind = "api_error"
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": message}}
	} else {
		kind := "invalid_request_error"
		if status >= 500 {
			kind = "server_error"
		}
		body = map[string]any{"error": map[string]any{"message": message, "type": kind, "param": nil, "code": nil}}
	}
	raw, _ := json.Marshal(body)
	JSONError(w, status, string(raw))
}

// readPrompt reads what r asks of the model and which format it speaks.
func readPrompt(r *http.Request) (wire, Prompt, bool) {
	var wf wire
	switch path := r.URL.Path; {
	case r.Method != http.MethodPost:
		return 0, Prompt{}, false
	case strings.HasSuffix(path, "/chat/completions"):
		wf = wireChat
	case strings.HasSuffix(path, "/responses"):
		wf = wireResponses
	case strings.HasSuffix(path, "/messages"):
		wf = wireMessages
	default:
		return 0, Prompt{}, false
	}
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input        json.RawMessage `json:"input"`
		System       json.RawMessage `json:"system"`
		Instructions string          `json:"instructions"`
		Tools        []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			// Tools are a Responses namespace's (Codex offers each MCP
			// server's tools as the namespace mcp__<server>).
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &in)
	p := Prompt{Model: in.Model}
	for _, t := range in.Tools {
		if t.Type == "namespace" {
			for _, nt := range t.Tools {
				p.Tools = append(p.Tools, t.Name+NamespaceSep+nt.Name)
			}
			continue
		}
		p.Tools = append(p.Tools, t.Name+t.Function.Name)
	}
	switch wf {
	case wireChat:
		for _, m := range in.Messages {
			switch m.Role {
			case "system", "developer":
				p.System += contentText(m.Content)
			case "user":
				p.LastUser, p.ToolOutput, p.ToolResults = contentText(m.Content), false, nil
				p.Images = contentImages(m.Content)
			case "tool":
				p.ToolOutput = true
				p.ToolResults = append(p.ToolResults, contentText(m.Content))
			}
		}
	case wireMessages:
		p.System = contentText(in.System)
		for _, m := range in.Messages {
			if m.Role != "user" {
				continue
			}
			if results, ok := toolResults(m.Content); ok {
				p.ToolOutput = true
				p.ToolResults = append(p.ToolResults, results...)
				continue
			}
			p.LastUser, p.ToolOutput, p.ToolResults = contentText(m.Content), false, nil
			p.Images = contentImages(m.Content)
		}
	case wireResponses:
		p.System = in.Instructions
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		if json.Unmarshal(in.Input, &items) != nil {
			// The input may be a bare string: one user message.
			var s string
			_ = json.Unmarshal(in.Input, &s)
			p.LastUser = s
		}
		for _, it := range items {
			switch {
			case strings.HasSuffix(it.Type, "_call_output"):
				p.ToolOutput = true
				p.ToolResults = append(p.ToolResults, contentText(it.Output))
			case it.Role == "user":
				p.LastUser, p.ToolOutput, p.ToolResults = contentText(it.Content), false, nil
				p.Images = contentImages(it.Content)
			}
		}
	}
	return wf, p, true
}

// contentText is the text of a message content: a string, or the text of
// its list of parts.
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

// contentImages are the images among a message content's parts, in any of
// the three formats (see Image).
func contentImages(raw json.RawMessage) []Image {
	var parts []struct {
		Type     string          `json:"type"`
		ImageURL json.RawMessage `json:"image_url"`
		Source   struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []Image
	for _, p := range parts {
		switch p.Type {
		case "image_url": // chat completions: {"url": …}
			var u struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(p.ImageURL, &u)
			out = append(out, Image{URL: u.URL})
		case "input_image": // Responses: a string
			var u string
			_ = json.Unmarshal(p.ImageURL, &u)
			out = append(out, Image{URL: u})
		case "image": // Messages
			out = append(out, Image{MediaType: p.Source.MediaType, Data: p.Source.Data})
		}
	}
	return out
}

// toolResults returns the texts of a Messages content's tool_result
// blocks, and whether it has any.
func toolResults(raw json.RawMessage) ([]string, bool) {
	var parts []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	found := false
	for _, p := range parts {
		if p.Type == "tool_result" {
			found = true
			out = append(out, contentText(p.Content))
		}
	}
	return out, found
}
