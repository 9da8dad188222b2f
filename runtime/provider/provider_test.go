package provider

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// Compile-time checks of the implementations.
var (
	_ Provider = (*openaiProvider)(nil)
	_ Provider = (*anthropicProvider)(nil)
	_ Stream   = (*stream)(nil)
	_ pump     = (*openaiPump)(nil)
	_ pump     = (*anthropicPump)(nil)
)

func TestNew(t *testing.T) {
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		p, err := New(Config{Name: name})
		if err != nil {
			t.Fatalf("New(%s): %v", name, err)
		}
		if p.Name() != name {
			t.Errorf("Name() = %q, want %q", p.Name(), name)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{Name: "sim"}, ErrUnknownProvider},
		{Config{Name: ""}, ErrUnknownProvider},
		{Config{Name: NameOpenAI, MaxRetries: -1}, ErrInvalidConfig},
		{Config{Name: NameAnthropic, ContextWindow: -5}, ErrInvalidConfig},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("New(%+v) = %v, want %v", tc.cfg, err, tc.want)
		}
	}
}

func TestModels(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want protocol.ModelDescriptor
	}{
		{Config{Name: NameOpenAI},
			protocol.ModelDescriptor{ID: "openai/gpt-4.1", Provider: "openai", Model: "gpt-4.1", ContextWindow: 1_047_576}},
		{Config{Name: NameAnthropic},
			protocol.ModelDescriptor{ID: "anthropic/claude-sonnet-4-5", Provider: "anthropic", Model: "claude-sonnet-4-5", ContextWindow: 200_000}},
		{Config{Name: NameOpenAI, Model: "qwen2.5-coder:7b"},
			protocol.ModelDescriptor{ID: "openai/qwen2.5-coder:7b", Provider: "openai", Model: "qwen2.5-coder:7b"}},
		{Config{Name: NameOpenAI, Model: "qwen2.5-coder:7b", ContextWindow: 32768},
			protocol.ModelDescriptor{ID: "openai/qwen2.5-coder:7b", Provider: "openai", Model: "qwen2.5-coder:7b", ContextWindow: 32768}},
	} {
		p, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Models()
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("Models() for %+v = %+v, want first %+v", tc.cfg, got, tc.want)
		}
	}
}

func TestReasoningLevels(t *testing.T) {
	ids := func(levels []Level) string {
		var out []string
		for _, l := range levels {
			if l.Label == "" {
				t.Errorf("level %q has no label", l.ID)
			}
			out = append(out, l.ID)
		}
		return strings.Join(out, ",")
	}
	openai, _ := New(Config{Name: NameOpenAI})
	anthropic, _ := New(Config{Name: NameAnthropic})
	for _, tc := range []struct {
		p     Provider
		model string
		want  string
	}{
		{openai, "gpt-4o", ""},
		{openai, "gpt-4.1-mini", ""},
		{openai, "llama3.1:8b", ""},
		{openai, "o3-mini", "low,medium,high"},
		{openai, "o4-mini", "low,medium,high"},
		{openai, "gpt-5", "minimal,low,medium,high"},
		{openai, "gpt-5-chat-latest", ""},
		{openai, "gpt-oss-20b", "low,medium,high"},
		{anthropic, "claude-3-5-sonnet-20241022", ""},
		{anthropic, "claude-3-haiku-20240307", ""},
		{anthropic, "claude-3-7-sonnet-20250219", "off,low,medium,high"},
		{anthropic, "claude-sonnet-4-20250514", "off,low,medium,high"},
		{anthropic, "claude-opus-4-1", "off,low,medium,high"},
		{anthropic, "claude-haiku-4-5", "off,low,medium,high"},
		{anthropic, "claude-opus-4-6", "off,low,medium,high"},
		{anthropic, "some-compatible-model", "off,low,medium,high"},
	} {
		got := tc.p.ReasoningLevels(tc.model)
		if ids(got) != tc.want {
			t.Errorf("%s ReasoningLevels(%q) = %q, want %q", tc.p.Name(), tc.model, ids(got), tc.want)
		}
		if tc.want == "" && got != nil {
			t.Errorf("%s ReasoningLevels(%q) = %#v, want nil", tc.p.Name(), tc.model, got)
		}
	}
}

func TestAnthropicThinkingModes(t *testing.T) {
	for model, want := range map[string]thinkingMode{
		"claude-3-opus-20240229":     thinkingNone,
		"claude-3-5-haiku-latest":    thinkingNone,
		"claude-3-7-sonnet-latest":   thinkingBudget,
		"claude-sonnet-4-5-20250929": thinkingBudget,
		"claude-opus-4-5":            thinkingBudget,
		"claude-opus-4-6":            thinkingAdaptive,
		"claude-sonnet-4-6":          thinkingAdaptive,
		"claude-opus-5":              thinkingAdaptive,
		"claude-mythos-preview":      thinkingAdaptive,
		"glm-4.6":                    thinkingBudget,
	} {
		if got := anthropicThinking(model); got != want {
			t.Errorf("anthropicThinking(%q) = %d, want %d", model, got, want)
		}
	}
	for model, want := range map[string]int{
		"claude-3-haiku-20240307":    claude3OutputTokens,
		"claude-3-5-sonnet-20241022": claude35OutputTokens,
		"claude-3-7-sonnet-20250219": anthropicAnswerTokens,
		"claude-sonnet-4-5":          anthropicAnswerTokens,
	} {
		if got := anthropicDefaultMaxTokens(model); got != want {
			t.Errorf("anthropicDefaultMaxTokens(%q) = %d, want %d", model, got, want)
		}
	}
}

// TestCloseWhileNextBlocks: Close from another goroutine ends a Next that is
// waiting for the service, and later calls report the closed stream.
func TestCloseWhileNextBlocks(t *testing.T) {
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		t.Run(name, func(t *testing.T) {
			released := make(chan struct{})
			f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
				fakellm.SSE(w)
				select {
				case <-r.Context().Done():
				case <-released:
				}
			})
			defer close(released)
			st, err := testProvider(t, f, name, "/v1").Stream(background(t), Request{})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := st.Next()
				done <- err
			}()
			time.Sleep(50 * time.Millisecond) // let Next block on the wire
			within(t, 2*time.Second, "Close", func() {
				if err := st.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			select {
			case err = <-done:
			case <-time.After(2 * time.Second):
				t.Fatal("Next still blocked 2s after Close")
			}
			assertProviderError(t, err, name+": stream closed")
			if !errors.Is(err, ErrStreamClosed) {
				t.Errorf("errors.Is(err, ErrStreamClosed) = false for %v", err)
			}
			if _, err := st.Next(); !errors.Is(err, ErrStreamClosed) {
				t.Errorf("Next after Close = %v", err)
			}
			if err := st.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestHTTPErrors: an HTTP error status is a PROVIDER_ERROR carrying the
// status and the service's message (never the key), without a retry.
func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{NameOpenAI, 429, `{"error":{"message":"Rate limit reached for key ` + testKey + `","type":"requests","code":"rate_limit_exceeded"}}`,
			[]string{"openai: rate limited (429)", "Rate limit reached", "[redacted]"}},
		{NameOpenAI, 500, `{"error":{"message":"The server had an error","type":"server_error"}}`,
			[]string{"openai: HTTP 500 Internal Server Error", "server_error: The server had an error"}},
		{NameOpenAI, 502, `<html>bad gateway</html>`, []string{"HTTP 502 Bad Gateway"}},
		{NameOpenAI, 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error"}}`,
			[]string{"authentication failed (401)"}},
		{NameAnthropic, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your rate limit (key ` + testKey + `)"},"request_id":"req_1"}`,
			[]string{"anthropic: rate limited (429)", "rate_limit_error: Number of request tokens", "[redacted]"}},
		{NameAnthropic, 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			[]string{"anthropic: HTTP 500 Internal Server Error", "api_error: Internal server error"}},
		{NameAnthropic, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			[]string{"anthropic: overloaded (529)", "overloaded_error: Overloaded"}},
	} {
		t.Run(tc.name+" "+strconv.Itoa(tc.status), func(t *testing.T) {
			f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
				fakellm.JSONError(w, tc.status, tc.body)
			})
			st, err := testProvider(t, f, tc.name, "/v1").Stream(background(t), Request{})
			if st != nil {
				t.Fatal("got a stream for a failed request")
			}
			assertProviderError(t, err, tc.want...)
			if got := HTTPStatus(err); got != tc.status {
				t.Errorf("HTTPStatus = %d, want %d", got, tc.status)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("requests = %d, want 1 (MaxRetries 0: no retry)", n)
			}
		})
	}
}

// TestCancelMidStream: cancelling the context ends a Next that waits on a
// stalled stream, with the cancellation as the cause.
func TestCancelMidStream(t *testing.T) {
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		t.Run(name, func(t *testing.T) {
			released := make(chan struct{})
			// The stream stalls after its first word until the client goes away.
			f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
				return fakellm.Turn{Text: "thinking hard", Hold: released}
			}))
			defer close(released)
			ctx, cancel := context.WithCancel(background(t))
			defer cancel()
			st, err := testProvider(t, f, name, "/v1").Stream(ctx, Request{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if ev, err := st.Next(); err != nil || ev.Text != "thinking " {
				t.Fatalf("first event = %+v, %v", ev, err)
			}
			time.AfterFunc(50*time.Millisecond, cancel)
			within(t, 2*time.Second, "Next after cancel", func() {
				_, err = st.Next()
			})
			assertProviderError(t, err, name+": request cancelled")
			if !errors.Is(err, context.Canceled) {
				t.Errorf("errors.Is(err, context.Canceled) = false for %v", err)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {})
	url := f.URL
	f.Close() // nothing listens there any more
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		p, err := New(Config{Name: name, BaseURL: url, APIKey: testKey})
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stream(background(t), Request{})
		if st != nil {
			t.Fatal("got a stream")
		}
		assertProviderError(t, err, name+": request failed:")
		if HTTPStatus(err) != 0 {
			t.Errorf("HTTPStatus = %d", HTTPStatus(err))
		}
	}
}

func TestInvalidToolSchema(t *testing.T) {
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		p, _ := New(Config{Name: name})
		for _, schema := range []string{`[1,2]`, `"x"`, `{`} {
			_, err := p.Stream(background(t), Request{Tools: []ToolSpec{{Name: "bad", Schema: []byte(schema)}}})
			assertProviderError(t, err, "invalid request", `tool "bad"`)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("%s schema %s: errors.Is(ErrInvalidRequest) = false for %v", name, schema, err)
			}
		}
	}
}

func TestToolResultText(t *testing.T) {
	for _, tc := range []struct {
		block      protocol.ContentBlock
		plain, flg string
	}{
		{protocol.ContentBlock{Content: &protocol.ToolResultContent{Kind: "text", Text: "out"}}, "out", "out"},
		{protocol.ContentBlock{IsError: true, Content: &protocol.ToolResultContent{Kind: "text", Text: "boom"}}, "boom", "Error: boom"},
		{protocol.ContentBlock{IsError: true, Content: &protocol.ToolResultContent{Kind: "error", Message: "denied"}}, "denied", "Error: denied"},
		{protocol.ContentBlock{Content: &protocol.ToolResultContent{Kind: "json", Value: map[string]any{"n": 1}}}, `{"n":1}`, `{"n":1}`},
		{protocol.ContentBlock{}, "", ""},
	} {
		if got := toolResultText(tc.block, false); got != tc.plain {
			t.Errorf("toolResultText(%+v, false) = %q, want %q", tc.block, got, tc.plain)
		}
		if got := toolResultText(tc.block, true); got != tc.flg {
			t.Errorf("toolResultText(%+v, true) = %q, want %q", tc.block, got, tc.flg)
		}
	}
}

func TestRedactAndTruncate(t *testing.T) {
	if got := redact("key "+testKey+" and "+testKey, testKey); strings.Contains(got, testKey) {
		t.Errorf("redact left the key: %q", got)
	}
	if got := redact("a short key x", "x"); got != "a short key x" {
		t.Errorf("short keys must not mangle text: %q", got)
	}
	s := strings.Repeat("é", 400) // 800 bytes
	got := truncate(s, maxServerMessage)
	if len(got) > maxServerMessage+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
		t.Errorf("truncate = %d bytes %q", len(got), got[len(got)-8:])
	}
}

func TestEventKindString(t *testing.T) {
	var names []string
	for k := EventText; k <= EventStop; k++ {
		names = append(names, k.String())
	}
	want := []string{"text", "thinking", "tool_call_start", "tool_call_args", "usage", "stop"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	if got := EventKind(99).String(); got != "EventKind(99)" {
		t.Errorf("unknown kind = %q", got)
	}
}

func TestDefaultAPIKeyEnv(t *testing.T) {
	if DefaultAPIKeyEnv(NameOpenAI) != "OPENAI_API_KEY" || DefaultAPIKeyEnv(NameAnthropic) != "ANTHROPIC_API_KEY" || DefaultAPIKeyEnv("sim") != "" {
		t.Error("wrong default key variables")
	}
}

// TestEnvironmentIsIgnored: the SDKs' environment variables never override
// the configuration (a stray OPENAI_BASE_URL would send the key elsewhere).
func TestEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-env-openai")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env-anthropic")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{Text: "ok"} }))
	for _, name := range []string{NameOpenAI, NameAnthropic} {
		st, err := testProvider(t, f, name, "/v1").Stream(background(t), Request{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a := mustRead(t, st); a.Text[0] != "ok" {
			t.Errorf("%s: text = %v", name, a.Text)
		}
		st.Close()
	}
	for _, req := range f.Requests() {
		for k, v := range req.Header {
			if strings.Contains(strings.Join(v, " "), "from-env") || strings.Contains(strings.Join(v, " "), "org-env") {
				t.Errorf("%s: header %s = %v comes from the environment", req.Path, k, v)
			}
		}
	}
}
