package refagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestSpecHappyPath replays the worked example of docs/protocol.md §12.1
// on a direct stdio connection: prompt → accepted → turn_start → text →
// tool_call read → tool_result → text → message_complete → turn_end with
// usage, each event in its §9 shape (no agent_id on a direct connection,
// "type" first).
func TestSpecHappyPath(t *testing.T) {
	h := start(t, nil)
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "config.json"), []byte(`{"debug":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.handshake()
	id := h.prompt("sim: say Reading config...\nsim: tool read {\"path\":\"config.json\"}\nsim: say The config says debug is on.")
	resp, before := h.response(id)
	if !resp.Success || resp.Command != protocol.TypePrompt || len(before) != 0 {
		t.Fatalf("prompt response = %+v (after %v)", resp, types(before))
	}
	evs := h.untilIdle()

	// The §12.1 order, ignoring status and usage events (and the message
	// boundary before the tool call, which §12.1 does not draw).
	var got []string
	for _, e := range evs {
		switch e.typ {
		case protocol.TypeStatus, protocol.TypeUsage:
			continue
		case protocol.TypeMessageDelta:
			if len(got) > 0 && got[len(got)-1] == "message_delta" {
				continue
			}
		}
		got = append(got, e.typ)
	}
	want := []string{"turn_start", "message_delta", "message_complete", "tool_call", "tool_result", "message_delta", "message_complete", "turn_end"}
	if !slices.Equal(got, want) {
		t.Fatalf("event order = %v\nwant %v", got, want)
	}

	for _, e := range evs {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.raw, &obj); err != nil {
			t.Fatal(err)
		}
		if _, ok := obj["agent_id"]; ok {
			t.Errorf("direct connection event carries agent_id: %s", e.raw)
		}
		if string(e.raw[:8]) != `{"type":` {
			t.Errorf("type is not first: %s", e.raw)
		}
	}
	tc := one[*protocol.ToolCall](t, evs)
	if tc.Name != "read" || tc.Args["path"] != "config.json" || tc.ReadOnly == nil || !*tc.ReadOnly || tc.ToolCallID == "" {
		t.Errorf("tool_call = %+v", tc)
	}
	tr := one[*protocol.ToolResult](t, evs)
	if tr.ToolCallID != tc.ToolCallID || tr.IsError || tr.Content.Kind != "text" || tr.Content.Text == "" || tr.DurationMs == nil {
		t.Errorf("tool_result = %+v", tr)
	}
	if got := assistantText(evs); got != "Reading config...The config says debug is on." {
		t.Errorf("assistant text = %q", got)
	}
	end := one[*protocol.TurnEnd](t, evs)
	ts := one[*protocol.TurnStart](t, evs)
	if end.TurnID != ts.TurnID || end.Usage == nil || end.Usage.Input == 0 || end.Usage.Output == 0 {
		t.Errorf("turn_end = %+v (turn_start %s)", end, ts.TurnID)
	}
}
