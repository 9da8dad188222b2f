package fakellm

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzGeminiRequest: any body on a Gemini API path is read without a
// panic, as the model the path names.
func FuzzGeminiRequest(f *testing.F) {
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	f.Add(`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"x"}}]}],"tools":[{"functionDeclarations":[{"name":"a"}]}]}`)
	f.Add(`{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}],"systemInstruction":{"parts":[{"text":"s"}]}}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1beta/models/m:streamGenerateContent?alt=sse", strings.NewReader(body))
		if action, model := geminiAction(r); action != "streamGenerateContent" || model != "m" {
			t.Fatalf("action %q model %q", action, model)
		}
		if p := readGemini(r, "m"); p.Model != "m" {
			t.Fatalf("model %q", p.Model)
		}
	})
}
