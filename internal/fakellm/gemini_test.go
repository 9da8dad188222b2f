package fakellm_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
)

// geminiPost sends body to the Gemini API path of f, the key in
// x-goog-api-key as Gemini clients send it.
func geminiPost(t *testing.T, f *fakellm.Server, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", "k")
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// geminiChunk is the part of a GenerateContentResponse the test reads.
type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
	} `json:"usageMetadata"`
}

// TestGeminiStream: a streamGenerateContent request is read into the
// Prompt (last user text, tool output, system instruction, offered
// functions, the model of the path) and answered as Gemini's SSE: thought
// and text parts a word per chunk, the function call with the offered
// name and decoded args, finishReason only on the last chunk with the
// usage; the router's generateContent gets JSON text with a complexity
// score, and an error Turn the API's error object.
func TestGeminiStream(t *testing.T) {
	rec := &recorder{}
	f := fakellm.Start(t, fakellm.Script(rec.answer))
	body := `{"contents":[{"role":"user","parts":[{"text":"first"}]},{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"output":"x"}}}]},{"role":"user","parts":[{"text":"again "},{"text":"now"}]}],` +
		`"systemInstruction":{"role":"user","parts":[{"text":"be brief"}]},"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"run_shell_exec"}]}]}`
	resp := geminiPost(t, f, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var chunks []geminiChunk
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c geminiChunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		chunks = append(chunks, c)
	}
	p := rec.last(t)
	if p.LastUser != "again now" || p.ToolOutput || p.System != "be brief" || p.Model != "gemini-2.5-flash" ||
		strings.Join(p.Tools, ",") != "read_file,run_shell_exec" {
		t.Fatalf("prompt = %+v", p)
	}
	var thought, text strings.Builder
	var calls []string
	for i, c := range chunks {
		if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		if last := i == len(chunks)-1; (c.Candidates[0].FinishReason == "STOP") != last {
			t.Fatalf("chunk %d of %d has finishReason %q", i, len(chunks), c.Candidates[0].FinishReason)
		}
		for _, part := range c.Candidates[0].Content.Parts {
			switch {
			case part.FunctionCall != nil:
				raw, _ := json.Marshal(part.FunctionCall.Args)
				calls = append(calls, part.FunctionCall.Name+string(raw))
			case part.Thought:
				thought.WriteString(part.Text)
			default:
				text.WriteString(part.Text)
			}
		}
	}
	if thought.String() != turn.Thinking || text.String() != turn.Text {
		t.Fatalf("thought %q text %q", thought.String(), text.String())
	}
	if strings.Join(calls, " ") != `run_shell_exec{"cmd":"ls"} read_file{}` {
		t.Fatalf("calls = %v", calls)
	}
	if u := chunks[len(chunks)-1].UsageMetadata; u.PromptTokenCount != 100 || u.CandidatesTokenCount != 20 {
		t.Fatalf("usage = %+v", u)
	}

	// A tool result as the last user turn is tool output.
	geminiPost(t, f, "/v1beta/models/m:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"user","parts":[{"functionResponse":{"name":"x","response":{}}}]}]}`)
	if p := rec.last(t); !p.ToolOutput || p.LastUser != "go" {
		t.Fatalf("after a function response: %+v", p)
	}

	// The router: generateContent answers JSON text with a complexity score.
	resp = geminiPost(t, f, "/v1beta/models/gemini-2.5-flash-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route"}]}]}`)
	var router geminiChunk
	if err := json.NewDecoder(resp.Body).Decode(&router); err != nil {
		t.Fatal(err)
	}
	var score struct {
		ComplexityScore int `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(router.Candidates[0].Content.Parts[0].Text), &score); err != nil || score.ComplexityScore < 1 {
		t.Fatalf("router answer %+v: %v", router, err)
	}

	// An error Turn is the API's error object.
	f2 := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Status: 429, Error: "slow down"}
	}))
	resp = geminiPost(t, f2, "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[]}`)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || !strings.Contains(string(raw), `"status":"RESOURCE_EXHAUSTED"`) || !strings.Contains(string(raw), "slow down") {
		t.Fatalf("error answer %d %s", resp.StatusCode, raw)
	}
	if got := f.Request(t, 1).Header.Get("x-goog-api-key"); got != "k" {
		t.Fatalf("recorded key header %q", got)
	}
}

// TestGeminiReply: Reply answers a Gemini API request in its format.
func TestGeminiReply(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		fakellm.Reply(w, r, fakellm.Turn{Text: "by hand"})
	})
	raw, _ := io.ReadAll(geminiPost(t, f, "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[]}`).Body)
	if !strings.Contains(string(raw), `"text":"by "`) || !strings.Contains(string(raw), `"finishReason":"STOP"`) {
		t.Fatalf("stream %s", raw)
	}
}
