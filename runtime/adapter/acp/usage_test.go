package acp

import (
	"encoding/json"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
)

// TestTakeUsage: a turn's usage_update gives the context's tokens, the
// window's size and the turn's cost (the difference of ACP's cumulative
// costs; the first taken whole; another currency not counted); without
// one there is nothing.
func TestTakeUsage(t *testing.T) {
	tr := NewTranslator(nopEvents{})
	if _, _, _, ok := tr.TakeUsage(); ok {
		t.Fatal("usage without a usage_update")
	}
	update := func(used int, cost *sdk.Cost) {
		tr.Update(sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{SessionUpdate: "usage_update", Used: used, Size: 1000, Cost: cost}})
	}
	update(10, &sdk.Cost{Amount: 0.5, Currency: "USD"})
	update(20, &sdk.Cost{Amount: 1.5, Currency: "USD"}) // the last of the turn counts
	if used, size, cost, ok := tr.TakeUsage(); !ok || used != 20 || size != 1000 || cost != 1.5 {
		t.Fatalf("first turn: %d %d %v %v", used, size, cost, ok)
	}
	update(30, &sdk.Cost{Amount: 2, Currency: "USD"})
	if _, _, cost, _ := tr.TakeUsage(); cost != 0.5 {
		t.Fatalf("second turn's cost %v, want 0.5", cost)
	}
	update(40, &sdk.Cost{Amount: 9, Currency: "EUR"})
	if used, _, cost, ok := tr.TakeUsage(); !ok || used != 40 || cost != 0 {
		t.Fatalf("a EUR cost: %d %v %v", used, cost, ok)
	}
	if _, _, _, ok := tr.TakeUsage(); ok {
		t.Fatal("the same usage_update taken twice")
	}
}

// TestUsageOfPromptAnswer: the answer's usage wins; without it Gemini's
// _meta.quota is read.
func TestUsageOfPromptAnswer(t *testing.T) {
	var resp sdk.PromptResponse
	raw := `{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":42,"output_tokens":7},"model_usage":[{"model":"gemini-2.5-flash","token_count":{"input_tokens":42,"output_tokens":7}}]}}}`
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(resp); u == nil || *u != (protocol.Usage{Input: 42, Output: 7, Model: "gemini-2.5-flash"}) {
		t.Fatalf("quota usage %+v", u)
	}
	resp.Usage = &sdk.Usage{InputTokens: 1, OutputTokens: 2}
	if u := usageOf(resp); u == nil || u.Input != 1 || u.Output != 2 || u.Model != "" {
		t.Fatalf("answer usage %+v", u)
	}
	if u := usageOf(sdk.PromptResponse{StopReason: "end_turn"}); u != nil {
		t.Fatalf("no usage: %+v", u)
	}
}

// FuzzQuotaUsage: any _meta.quota decodes or is nil, never negative.
func FuzzQuotaUsage(f *testing.F) {
	f.Add(`{"token_count":{"input_tokens":42,"output_tokens":7},"model_usage":[{"model":"m"}]}`)
	f.Add(`{"token_count":{"input_tokens":-1}}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, raw string) {
		if u := quotaUsage([]byte(raw)); u != nil && (u.Input < 0 || u.Output < 0) {
			t.Fatalf("negative usage %+v", u)
		}
	})
}

// TestOfferFromConfigOptions: config options of category mode, model and
// thought_level (grouped choices flattened) replace the older modes and
// models; other options map to nothing.
func TestOfferFromConfigOptions(t *testing.T) {
	raw := `[
	 {"type":"select","id":"m","name":"Mode","category":"mode","currentValue":"code","options":[{"value":"ask","name":"Ask"},{"value":"code","name":"Code","description":"Writes code"}]},
	 {"type":"select","id":"x","name":"Model","category":"model","currentValue":"b","options":[{"group":"g1","name":"One","options":[{"value":"a","name":"A"}]},{"group":"g2","name":"Two","options":[{"value":"b","name":"B"}]}]},
	 {"type":"select","id":"t","name":"Think","category":"thought_level","currentValue":"hi","options":[{"value":"lo","name":"Low"},{"value":"hi","name":"High"}]},
	 {"type":"boolean","id":"beta","name":"Beta","currentValue":true},
	 {"type":"select","id":"o","name":"Other","currentValue":"z","options":[{"value":"z","name":"Z"}]}
	]`
	var opts []sdk.SessionConfigOption
	if err := json.Unmarshal([]byte(raw), &opts); err != nil {
		t.Fatal(err)
	}
	modes := &sdk.SessionModeState{CurrentModeId: "old", AvailableModes: []sdk.SessionMode{{Id: "old", Name: "Old"}}}
	o := offerFrom(modes, nil, opts)
	got, _ := json.Marshal(map[string]any{"modes": o.Modes, "mode": o.Mode, "models": o.Models, "model": o.Model, "levels": o.Levels, "level": o.Level})
	want := `{"level":"hi","levels":[{"id":"lo","label":"Low"},{"id":"hi","label":"High"}],"mode":"code",` +
		`"model":"b","models":[{"id":"a","provider":"acp","model":"A"},{"id":"b","provider":"acp","model":"B"}],` +
		`"modes":[{"name":"ask","description":"Ask"},{"name":"code","description":"Writes code"}]}`
	if string(got) != want {
		t.Fatalf("offer\n got %s\nwant %s", got, want)
	}
	if ids := idsOf(opts); ids != (configIDs{mode: "m", model: "x", thought: "t"}) {
		t.Fatalf("ids %+v", ids)
	}
	if o := offerFrom(modes, nil, nil); o.Mode != "old" || len(o.Modes) != 1 || o.Levels != nil {
		t.Fatalf("without config options: %+v", o)
	}
}
