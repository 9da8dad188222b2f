package refagent

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// TestSetModelAcrossProvidersMidTurn runs a runtime on two providers (an
// OpenAI-compatible server and Anthropic, fakes of their real wire
// formats) and the sim: list_models offers all their models; a set_model
// to the other provider while the first call streams applies at the next
// provider call of the same turn, which goes to the other service with
// its own key, and is priced with its own prices.
func TestSetModelAcrossProvidersMidTurn(t *testing.T) {
	release := make(chan struct{})
	local := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "listing"}, nil))
		fakellm.Hold(r, release)
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_1", "ls", `{}`), nil))
		s.Event("", fakellm.ChatChunk(map[string]any{}, "tool_calls"))
		s.Event("", "[DONE]")
	})
	claude := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "done", Usage: fakellm.Usage{Input: 1_000_000, Output: 0}}
	}))
	h := start(t, func(o *Options) {
		o.Providers = []ProviderSpec{
			{Name: "sim", Kind: providerSim},
			{Name: "local", Kind: "openai", BaseURL: local.URL + "/v1", Models: []string{"qwen3"}, APIKey: "k-local", APIKeyEnv: "LOCAL_KEY"},
			{Name: "claude", Kind: "anthropic", BaseURL: claude.URL, Models: []string{"claude-x", "claude-y"}, APIKey: "k-claude", APIKeyEnv: "CLAUDE_KEY",
				Prices: map[string]Price{"claude-x": {Input: 3}}},
		}
		o.ModelProvider = "local"
	})
	h.handshake()

	h.send(protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, ID: "lm"}})
	r, _ := h.response("lm")
	var lm listModelsData
	if err := json.Unmarshal(r.Data, &lm); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range lm.Models {
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, []string{"sim/sim", "sim/sim-think", "local/qwen3", "claude/claude-x", "claude/claude-y"}) || lm.Active.ID != "local/qwen3" {
		t.Fatalf("list_models %s", r.Data)
	}

	h.prompt("list files")
	h.until(protocol.TypeMessageDelta)
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "sm"}, Model: "claude/claude-x"})
	r, before := h.response("sm")
	mustResponse(t, r, protocol.TypeSetModel)
	if ch := one[*protocol.ModelChanged](t, before); ch.Previous.ID != "local/qwen3" || ch.Active.Provider != "claude" {
		t.Fatalf("model_changed %+v", ch)
	}
	close(release)
	evs := h.untilIdle()
	if n := len(of[*protocol.ToolResult](evs)); n != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if local.Count() != 1 || claude.Count() != 1 {
		t.Fatalf("requests: local %d, claude %d; want one each", local.Count(), claude.Count())
	}
	if got := local.Request(t, 1).Header.Get("Authorization"); got != "Bearer k-local" {
		t.Fatalf("local got key %q", got)
	}
	// The SDK sends the key as a bearer token (older versions: X-Api-Key).
	if hd := claude.Request(t, 1).Header; hd.Get("Authorization") != "Bearer k-claude" && hd.Get("X-Api-Key") != "k-claude" {
		t.Fatalf("claude got key %q / %q", hd.Get("Authorization"), hd.Get("X-Api-Key"))
	}
	if m := claude.Request(t, 1).Body["model"]; m != "claude-x" {
		t.Fatalf("claude asked for %v", m)
	}
	us := of[*protocol.UsageEvent](evs)
	if len(us) != 2 || us[1].Model != fakellm.Model && us[1].Model != "claude-x" || us[1].Cost != 3 {
		t.Fatalf("usage %+v: want the claude call priced by claude's prices", us)
	}

	// set_model refuses what no provider offers; bash runs without any
	// provider's key.
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "bad"}, Model: "local/claude-x"})
	r, _ = h.response("bad")
	mustErrorResponse(t, r, protocol.CodeNotFound, "local/claude-x")
	env := bashEnviron([]string{"LOCAL_KEY=k-local", "CLAUDE_KEY=k-claude", "PATH=/bin"}, keyVars(h.opts)...)
	if !slices.Equal(env, []string{"PATH=/bin"}) {
		t.Fatalf("bash environment %q keeps a key", env)
	}
}
