package fakellm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shard-dev/shard/internal/fakellm"
)

// turn is the answer the SDK tests stream: every part a Turn has, with a
// tool name the script shortens.
var turn = fakellm.Turn{
	Thinking:  "Look first.",
	Signature: "SIG-1",
	Text:      "Two calls, wörld.",
	Calls: []fakellm.ToolCall{
		{ID: "call_a", Name: "exec", Args: `{"cmd":"ls"}`},
		{Name: "read"},
	},
	Usage: fakellm.Usage{Input: 100, Output: 20, CacheRead: 30},
}

// recorder is a script that answers turn and keeps the prompts it saw.
type recorder struct {
	mu      sync.Mutex
	prompts []fakellm.Prompt
}

func (r *recorder) answer(p fakellm.Prompt) fakellm.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prompts = append(r.prompts, p)
	return turn
}

func (r *recorder) last(t *testing.T) fakellm.Prompt {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.prompts) == 0 {
		t.Fatal("the script was not called")
	}
	return r.prompts[len(r.prompts)-1]
}

func openaiClient(f *fakellm.Server, retries int) openai.Client {
	return openai.NewClient(option.WithBaseURL(f.URL+"/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(f.Client()), option.WithMaxRetries(retries))
}

func anthropicClient(f *fakellm.Server) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey("k"),
		aoption.WithHTTPClient(f.Client()), aoption.WithMaxRetries(0))
}

// TestChatCompletionsSDK: the official OpenAI SDK reads a scripted chat
// completions stream whole: reasoning, text, both tool calls (the short
// name resolved against the offered tools, a missing id made up, missing
// arguments sent as {}), the finish reason and the usage.
func TestChatCompletionsSDK(t *testing.T) {
	rec := &recorder{}
	f := fakellm.Start(t, fakellm.Script(rec.answer))
	client := openaiClient(f, 0)
	fn := func(name string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name})
	}
	st := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "gpt-4.1",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		Tools:         []openai.ChatCompletionToolUnionParam{fn("exec_command"), fn("read")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer st.Close()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	for st.Next() {
		chunk := st.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused chunk %s", chunk.RawJSON())
		}
		if len(chunk.Choices) > 0 {
			if r, ok := chunk.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
				reasoning.WriteString(strings.Trim(r.Raw(), `"`))
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != turn.Thinking {
		t.Errorf("reasoning = %q", reasoning.String())
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("choices = %+v", acc.Choices)
	}
	ch := acc.Choices[0]
	if ch.Message.Content != turn.Text || ch.FinishReason != "tool_calls" {
		t.Errorf("content %q, finish %q", ch.Message.Content, ch.FinishReason)
	}
	calls := ch.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("tool calls = %+v", calls)
	}
	if c := calls[0]; c.ID != "call_a" || c.Function.Name != "exec_command" || c.Function.Arguments != `{"cmd":"ls"}` {
		t.Errorf("call 0 = %+v", c)
	}
	if c := calls[1]; !strings.HasPrefix(c.ID, "call_") || c.Function.Name != "read" || c.Function.Arguments != "{}" {
		t.Errorf("call 1 = %+v", c)
	}
	if u := acc.Usage; u.PromptTokens != 100 || u.CompletionTokens != 20 || u.PromptTokensDetails.CachedTokens != 30 {
		t.Errorf("usage = %+v", u)
	}
	if acc.Model != fakellm.Model {
		t.Errorf("model = %q", acc.Model)
	}
	p := rec.last(t)
	if p.N != 1 || p.Model != "gpt-4.1" || p.LastUser != "hello" || p.ToolOutput || strings.Join(p.Tools, ",") != "exec_command,read" {
		t.Errorf("prompt = %+v", p)
	}
	if req := f.Only(t); req.Path != "/v1/chat/completions" || fakellm.Get(t, req.Body, "stream") != true {
		t.Errorf("request %s %s", req.Path, req.Raw)
	}
}

// TestResponsesSDK: the official OpenAI SDK reads a scripted Responses
// stream: every event decodes, deltas add up to what the completed
// response carries, and the output items come in order (reasoning,
// message, function calls) with the usage.
func TestResponsesSDK(t *testing.T) {
	rec := &recorder{}
	f := fakellm.Start(t, fakellm.Script(rec.answer))
	client := openaiClient(f, 0)
	fn := func(name string) responses.ToolUnionParam {
		return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Parameters: map[string]any{"type": "object"}}}
	}
	st := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{fn("exec_command"), fn("read")},
	})
	defer st.Close()
	var text, summary, args strings.Builder
	var completed *responses.Response
	seq := int64(0)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			completed = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != turn.Text || summary.String() != turn.Thinking || args.String() != `{"cmd":"ls"}{}` {
		t.Errorf("deltas: text %q, summary %q, args %q", text.String(), summary.String(), args.String())
	}
	if completed == nil {
		t.Fatal("no response.completed")
	}
	var kinds []string
	for _, item := range completed.Output {
		kinds = append(kinds, item.Type)
	}
	if strings.Join(kinds, ",") != "reasoning,message,function_call,function_call" {
		t.Fatalf("output items %v", kinds)
	}
	if s := completed.Output[0].AsReasoning().Summary; len(s) != 1 || s[0].Text != turn.Thinking {
		t.Errorf("reasoning summary %+v", s)
	}
	if got := completed.OutputText(); got != turn.Text {
		t.Errorf("output text %q", got)
	}
	if c := completed.Output[2].AsFunctionCall(); c.CallID != "call_a" || c.Name != "exec_command" || c.Arguments != `{"cmd":"ls"}` {
		t.Errorf("call 0 = %+v", c)
	}
	if c := completed.Output[3].AsFunctionCall(); c.CallID == "" || c.Name != "read" || c.Arguments != "{}" {
		t.Errorf("call 1 = %+v", c)
	}
	if u := completed.Usage; u.InputTokens != 100 || u.OutputTokens != 20 || u.InputTokensDetails.CachedTokens != 30 || completed.Model != fakellm.Model {
		t.Errorf("usage %+v model %q", u, completed.Model)
	}
	if p := rec.last(t); p.Model != "gpt-5" || p.LastUser != "hello" || strings.Join(p.Tools, ",") != "exec_command,read" {
		t.Errorf("prompt = %+v", p)
	}
}

// TestMessagesSDK: the official Anthropic SDK accumulates a scripted
// Messages stream into the message the turn describes.
func TestMessagesSDK(t *testing.T) {
	rec := &recorder{}
	f := fakellm.Start(t, fakellm.Script(rec.answer))
	client := anthropicClient(f)
	tool := func(name string) anthropic.ToolUnionParam {
		return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{}}}
	}
	st := client.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1000,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		Tools:     []anthropic.ToolUnionParam{tool("exec_command"), tool("read")},
	})
	defer st.Close()
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	c := msg.Content
	if len(c) != 4 {
		t.Fatalf("content %+v", c)
	}
	if c[0].Type != "thinking" || c[0].Thinking != turn.Thinking || c[0].Signature != "SIG-1" {
		t.Errorf("thinking block %+v", c[0])
	}
	if c[1].Type != "text" || c[1].Text != turn.Text {
		t.Errorf("text block %+v", c[1])
	}
	if c[2].Type != "tool_use" || c[2].ID != "call_a" || c[2].Name != "exec_command" || string(c[2].Input) != `{"cmd":"ls"}` {
		t.Errorf("tool block 2 %+v (input %s)", c[2], c[2].Input)
	}
	if c[3].Type != "tool_use" || !strings.HasPrefix(c[3].ID, "toolu_") || c[3].Name != "read" || string(c[3].Input) != `{}` {
		t.Errorf("tool block 3 %+v (input %s)", c[3], c[3].Input)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Model != fakellm.Model {
		t.Errorf("stop %q model %q", msg.StopReason, msg.Model)
	}
	// Anthropic counts cache reads beside the input, not in it.
	if u := msg.Usage; u.InputTokens != 70 || u.CacheReadInputTokens != 30 || u.OutputTokens != 20 {
		t.Errorf("usage %+v", u)
	}
	if req := f.Only(t); req.Path != "/v1/messages" {
		t.Errorf("path %q", req.Path)
	}
}

// TestServiceErrors: a Turn with a status is the service's own error
// object, which each SDK decodes into its error type.
func TestServiceErrors(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Status: http.StatusTooManyRequests, Error: "slow down"}
	}))
	oc := openaiClient(f, 0)
	st := oc.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for st.Next() {
	}
	var oerr *openai.Error
	if err := st.Err(); !errors.As(err, &oerr) || oerr.StatusCode != 429 || oerr.Message != "slow down" || oerr.Type != "invalid_request_error" {
		t.Errorf("chat error = %v (%+v)", err, oerr)
	}
	st.Close()
	_, err := oc.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &oerr) || oerr.StatusCode != 429 || oerr.Message != "slow down" {
		t.Errorf("responses error = %v", err)
	}
	ac := anthropicClient(f)
	ast := ac.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	for ast.Next() {
	}
	var aerr *anthropic.Error
	if err := ast.Err(); !errors.As(err, &aerr) || aerr.StatusCode != 429 || aerr.Message != "slow down" || aerr.Type() != "rate_limit_error" {
		t.Errorf("messages error = %v", err)
	}
	ast.Close()
	if n := f.Count(); n != 3 {
		t.Errorf("requests = %d, want 3 (no retries)", n)
	}
}

// TestPrompt: what a script is told about each format's conversation: the
// last user text, whether tool output came after it, the offered tools.
func TestPrompt(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		want             fakellm.Prompt
	}{
		{"chat after a tool", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"run "},{"type":"text","text":"it"}]},
			 {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],
			 "tools":[{"type":"function","function":{"name":"bash"}}]}`,
			fakellm.Prompt{LastUser: "run it", ToolOutput: true, ToolResults: []string{"ok"}, Tools: []string{"bash"}, Model: "m", System: "sys"}},
		{"chat new user message", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"a"},{"role":"tool","content":"x"},{"role":"user","content":"b"}]}`,
			fakellm.Prompt{LastUser: "b"}},
		{"responses after a tool", "/v1/responses",
			`{"model":"gpt-5","instructions":"be brief","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"write"}]},
			 {"type":"function_call","call_id":"c","name":"exec","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],
			 "tools":[{"type":"function","name":"exec"}]}`,
			fakellm.Prompt{LastUser: "write", ToolOutput: true, ToolResults: []string{"ok"}, Tools: []string{"exec"}, Model: "gpt-5", System: "be brief"}},
		{"responses custom tool output", "/v1/responses",
			`{"input":[{"role":"user","content":"x"},{"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}`,
			fakellm.Prompt{LastUser: "x", ToolOutput: true, ToolResults: []string{"ok"}}},
		{"responses output parts", "/v1/responses",
			`{"input":[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
			 {"type":"function_call_output","call_id":"d","output":"c"}]}`,
			fakellm.Prompt{LastUser: "x", ToolOutput: true, ToolResults: []string{"ab", "c"}}},
		{"responses tool results end at a user message", "/v1/responses",
			`{"input":[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c","output":"ok"},{"role":"user","content":"y"}]}`,
			fakellm.Prompt{LastUser: "y"}},
		{"responses namespace tools", "/v1/responses",
			`{"input":"x","tools":[{"type":"function","name":"exec"},{"type":"namespace","name":"mcp__shard","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}]}`,
			fakellm.Prompt{LastUser: "x", Tools: []string{"exec", "mcp__shard.a", "mcp__shard.b"}}},
		{"responses string input", "/v1/responses", `{"input":"just this"}`, fakellm.Prompt{LastUser: "just this"}},
		{"messages after a tool", "/v1/messages",
			`{"model":"claude","system":[{"type":"text","text":"you "},{"type":"text","text":"code"}],"messages":[{"role":"user","content":"read"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"read","input":{}}]},
			 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"},{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"y"}]}]}],"tools":[{"name":"read"}]}`,
			fakellm.Prompt{LastUser: "read", ToolOutput: true, ToolResults: []string{"x", "y"}, Tools: []string{"read"}, Model: "claude", System: "you code"}},
		{"messages blocks", "/v1/messages",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, fakellm.Prompt{LastUser: "hi"}},
		{"chat image", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"text","text":"see"}]}]}`,
			fakellm.Prompt{LastUser: "see", Images: []fakellm.Image{{URL: "data:image/png;base64,iVBO"}}}},
		{"responses image", "/v1/responses",
			`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/gif;base64,R0lG"}]}]}`,
			fakellm.Prompt{Images: []fakellm.Image{{URL: "data:image/gif;base64,R0lG"}}}},
		{"messages image", "/v1/messages",
			`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]}]}`,
			fakellm.Prompt{Images: []fakellm.Image{{MediaType: "image/jpeg", Data: "/9j/"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			f := fakellm.Start(t, fakellm.Script(rec.answer))
			resp, err := f.Client().Post(f.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got, want := rec.last(t), tc.want
			want.N = 1
			if got.N != want.N || got.LastUser != want.LastUser || got.ToolOutput != want.ToolOutput ||
				strings.Join(got.Tools, ",") != strings.Join(want.Tools, ",") || got.Model != want.Model ||
				fmt.Sprint(got.Images) != fmt.Sprint(want.Images) || strings.Join(got.ToolResults, "|") != strings.Join(want.ToolResults, "|") {
				t.Errorf("prompt = %+v, want %+v", got, want)
			}
		})
	}
}

// TestResponsesNamespacedCall: a call of a namespace's tool (Codex offers
// an MCP server's tools as a namespace) is streamed as a function_call
// with the namespace and the tool's own name, in the added and done items
// and in the completed response.
func TestResponsesNamespacedCall(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "wait", Args: `{"h":1}`}}}
	}))
	body := `{"input":"x","tools":[{"type":"namespace","name":"mcp__shard","tools":[{"type":"function","name":"subagent_wait"}]}]}`
	resp, err := f.Client().Post(f.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	for line := range strings.Lines(string(raw)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string                            `json:"type"`
			Item     map[string]any                    `json:"item"`
			Response struct{ Output []map[string]any } `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch ev.Type {
		case "response.output_item.added", "response.output_item.done":
			items = append(items, ev.Item)
		case "response.completed":
			items = append(items, ev.Response.Output...)
		}
	}
	if len(items) != 3 {
		t.Fatalf("function_call items %v, want added, done and completed", items)
	}
	for _, it := range items {
		if it["type"] != "function_call" || it["namespace"] != "mcp__shard" || it["name"] != "subagent_wait" {
			t.Errorf("item %v, want subagent_wait of the namespace mcp__shard", it)
		}
	}
	if items[2]["arguments"] != `{"h":1}` {
		t.Errorf("arguments %v", items[2]["arguments"])
	}
}

// TestHold: a held answer stops after its first event until released, and
// ends when the client goes away instead, so closing the Server never waits
// on a hold nobody releases.
func TestHold(t *testing.T) {
	release := make(chan struct{})
	f := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		if p.LastUser == "never" {
			return fakellm.Turn{Text: "stuck here", Hold: make(chan struct{})}
		}
		return fakellm.Turn{Text: "one two three", Hold: release}
	}))
	post := func(ctx context.Context, user string) (*http.Response, *bufio.Reader) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"`+user+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := f.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, bufio.NewReader(resp.Body)
	}
	// data reads the stream up to the next data line.
	data := func(br *bufio.Reader) string {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				return d
			}
		}
	}

	resp, br := post(t.Context(), "go")
	defer resp.Body.Close()
	data(br) // the role chunk
	if d := data(br); !strings.Contains(d, `"content":"one "`) {
		t.Fatalf("first word: %s", d)
	}
	close(release)
	var rest []string
	for d := data(br); d != "[DONE]"; d = data(br) {
		rest = append(rest, d)
	}
	if len(rest) != 4 || !strings.Contains(rest[0], `"two "`) || !strings.Contains(rest[1], `"three"`) {
		t.Fatalf("after the release: %v", rest)
	}

	ctx, cancel := context.WithCancel(t.Context())
	stuck, sbr := post(ctx, "never")
	data(sbr)
	data(sbr)
	cancel()
	stuck.Body.Close()
	f.Close() // returns: the held handler saw its client go
}

// TestRecording: every request is kept, a GET of the models is answered,
// a body that is not JSON is refused before the handler, and the handler
// can read the body again.
func TestRecording(t *testing.T) {
	var mu sync.Mutex // protects seen
	var seen []string
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, string(raw))
		mu.Unlock()
		fakellm.Script(func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{} })(w, r, n)
	})
	c := f.Client()
	resp, err := c.Get(f.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"`+fakellm.Model+`"`) {
		t.Fatalf("models: %d %s", resp.StatusCode, body)
	}
	resp, err = c.Post(f.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{not json`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad JSON: status %d", resp.StatusCode)
	}
	resp, err = c.Post(f.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	reqs := f.Requests()
	if len(reqs) != 2 || f.Count() != 2 || reqs[0].Method != http.MethodGet || reqs[0].Body != nil {
		t.Fatalf("requests %+v", reqs)
	}
	if got := f.Request(t, 2); fakellm.Get(t, got.Body, "messages", 0, "content") != "x" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request 2 %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1] != string(reqs[1].Raw) {
		t.Fatalf("the handler read %q", seen)
	}
}

// TestClaudeCodeRequests: what Claude Code sends before and for a turn
// reaches the script: a HEAD of the root (its reachability check) is 200,
// and a Messages POST with the beta query (?beta=true) streams the turn.
func TestClaudeCodeRequests(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{Text: "hi there"} }))
	head, err := http.NewRequestWithContext(t.Context(), http.MethodHead, f.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.Client().Do(head)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD / = %d", resp.StatusCode)
	}
	resp, err = f.Client().Post(f.URL+"/v1/messages?beta=true", "application/json",
		strings.NewReader(`{"model":"claude-sonnet-4-6","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"text":"there"`) || !strings.Contains(string(body), "message_stop") {
		t.Fatalf("POST /v1/messages?beta=true = %d\n%s", resp.StatusCode, body)
	}
}
