package fakellm

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// The Gemini API (generativelanguage, v1beta), as Gemini CLI speaks it:
// POST /v1beta/models/<model>:streamGenerateContent?alt=sse streams
// GenerateContentResponse objects as unnamed SSE events, each with one
// candidate whose content parts carry text (thought: true for thinking)
// or a functionCall, the last with finishReason, usageMetadata on each;
// POST …:generateContent answers one JSON object (Gemini CLI's router and
// its other side calls, which ask for JSON text); POST …:countTokens a
// token count. The API key comes in x-goog-api-key.

// geminiAction is the method a Gemini API path names (generateContent,
// streamGenerateContent, countTokens) and the model, or "" when the path
// is not the Gemini API's.
func geminiAction(r *http.Request) (action, model string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if !ok || r.Method != http.MethodPost {
		return "", ""
	}
	model, action, ok = strings.Cut(rest, ":")
	if !ok {
		return "", ""
	}
	return action, model
}

// GeminiRouterText is the text a non-streamed generateContent answers:
// JSON that satisfies the side calls Gemini CLI makes with a JSON schema
// (the model router's complexity score, the next-speaker check), so a
// scripted turn is never replaced by a fallback model's guess.
const GeminiRouterText = `{"complexity_reasoning":"a simple request","complexity_score":1,"reasoning":"the model answered","next_speaker":"user"}`

// serveGemini answers r when its path is the Gemini API's and reports
// whether it did: a streamed call with answer's Turn, the other calls as
// GeminiRouterText and a token count.
func serveGemini(w http.ResponseWriter, r *http.Request, n int, answer func(Prompt) Turn) bool {
	action, model := geminiAction(r)
	switch action {
	case "":
		return false
	case "streamGenerateContent":
		p := readGemini(r, model)
		p.N = n
		replyGemini(w, r, p, answer(p))
	case "generateContent":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(geminiChunk([]any{map[string]any{"text": GeminiRouterText}}, "STOP", Usage{Input: 10, Output: 10}))
	case "countTokens":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"totalTokens":10}`)
	default:
		http.NotFound(w, r)
	}
	return true
}

// readGemini reads a GenerateContentRequest: the last user turn's text
// (a user turn of functionResponse parts is tool output), the system
// instruction and the offered function declarations.
func readGemini(r *http.Request, model string) Prompt {
	var in struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string          `json:"text"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
				InlineData       *struct {
					MimeType string `json:"mimeType"`
					Data     string `json:"data"`
				} `json:"inlineData"`
			} `json:"parts"`
		} `json:"contents"`
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &in)
	p := Prompt{Model: model}
	for _, s := range in.SystemInstruction.Parts {
		p.System += s.Text
	}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			p.Tools = append(p.Tools, f.Name)
		}
	}
	for _, c := range in.Contents {
		if c.Role != "user" {
			continue
		}
		var text strings.Builder
		var images []Image
		tool := false
		for _, part := range c.Parts {
			switch {
			case part.FunctionResponse != nil:
				tool = true
			case part.InlineData != nil:
				images = append(images, Image{MediaType: part.InlineData.MimeType, Data: part.InlineData.Data})
			default:
				text.WriteString(part.Text)
			}
		}
		if tool {
			p.ToolOutput = true
			continue
		}
		p.LastUser, p.Images, p.ToolOutput = text.String(), images, false
	}
	return p
}

// geminiChunk is one GenerateContentResponse with parts from the model;
// finish is its finishReason ("" leaves it out, as on every chunk but the
// last).
func geminiChunk(parts []any, finish string, u Usage) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return map[string]any{
		"candidates": []any{cand},
		"usageMetadata": map[string]any{
			"promptTokenCount": u.Input, "candidatesTokenCount": u.Output,
			"totalTokenCount": u.Input + u.Output, "cachedContentTokenCount": u.CacheRead,
		},
		"modelVersion": Model,
		"responseId":   "fakellm-response",
	}
}

// replyGemini streams t as Gemini SSE: thinking and text a word per chunk,
// then one chunk per function call, then an empty-text chunk with
// finishReason STOP (Gemini ends tool calls with STOP too) and the usage.
func replyGemini(w http.ResponseWriter, r *http.Request, p Prompt, t Turn) {
	if t.Status != 0 {
		status := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
			404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[t.Status]
		if status == "" {
			status = "INTERNAL"
		}
		raw, _ := json.Marshal(map[string]any{"error": map[string]any{"code": t.Status, "message": t.Error, "status": status}})
		JSONError(w, t.Status, string(raw))
		return
	}
	a := &answer{Turn: t, events: SSE(w), r: r}
	partial := Usage{Input: t.Usage.Input, CacheRead: t.Usage.CacheRead}
	for _, wd := range words(t.Thinking) {
		a.events.Event("", geminiChunk([]any{map[string]any{"text": wd, "thought": true}}, "", partial))
		if !a.pace() {
			return
		}
	}
	for _, wd := range words(t.Text) {
		a.events.Event("", geminiChunk([]any{map[string]any{"text": wd}}, "", partial))
		if !a.pace() {
			return
		}
	}
	for _, c := range t.Calls {
		args := map[string]any{}
		if c.Args != "" {
			_ = json.Unmarshal([]byte(c.Args), &args)
		}
		call := map[string]any{"name": offered(p.Tools, c.Name), "args": args}
		if c.ID != "" {
			call["id"] = c.ID
		}
		a.events.Event("", geminiChunk([]any{map[string]any{"functionCall": call}}, "", partial))
		if !a.pace() {
			return
		}
	}
	a.events.Event("", geminiChunk([]any{map[string]any{"text": ""}}, "STOP", t.Usage))
}
