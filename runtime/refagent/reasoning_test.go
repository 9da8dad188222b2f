package refagent

import (
	"encoding/json"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// level asks list_reasoning_levels for the active level.
func (h *harness) level() string {
	h.t.Helper()
	id := h.id("l")
	h.send(protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, ID: id}})
	r, _ := h.response(id)
	mustResponse(h.t, r, protocol.TypeListReasoningLevels)
	var d struct {
		Active string `json:"active"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		h.t.Fatal(err)
	}
	return d.Active
}

func (h *harness) command(v any, id string) *protocol.Response {
	h.t.Helper()
	h.send(v)
	r, _ := h.response(id)
	return r
}

// A reasoning level is kept with the session: a runtime started again on
// it runs with the level set before, and a level a set_model dropped stays
// dropped.
func TestReasoningLevelIsKeptWithTheSession(t *testing.T) {
	dir := sessionDir(t)
	think := func(o *Options) { o.Model = "sim-think" }
	h, _ := inSession(t, dir, think)
	mustResponse(t, h.command(protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "r1"},
		Model: "sim/sim-think", Effort: "high"}, "r1"), protocol.TypeSetReasoningLevel)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	h, _ = inSession(t, dir, think)
	if got := h.level(); got != "high" {
		t.Fatalf("level after a restart = %q, want high", got)
	}
	// To a model without levels and back: the level was dropped.
	mustResponse(t, h.command(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "m1"}, Model: "sim"}, "m1"), protocol.TypeSetModel)
	mustResponse(t, h.command(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "m2"}, Model: "sim-think"}, "m2"), protocol.TypeSetModel)
	if got := h.level(); got != "off" {
		t.Fatalf("level after switching models = %q, want the default off", got)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h, _ = inSession(t, dir, think)
	if got := h.level(); got != "off" {
		t.Fatalf("level after a restart = %q, want the dropped level to stay dropped", got)
	}

	// A runtime without the level's model starts at its default.
	mustResponse(t, h.command(protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "r2"},
		Model: "sim-think", Effort: "low"}, "r2"), protocol.TypeSetReasoningLevel)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h, _ = inSession(t, dir, nil)
	mustErrorResponse(t, h.command(protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, ID: "l9"}}, "l9"),
		protocol.CodeNotFound, "no reasoning levels")
}
