package daemon_test

import (
	"slices"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// TestTeamToolIsOfferedUnderTheDaemon: a real model's agent under the
// daemon is offered the team tool by default, and agent.create accepts it
// in tools (docs/protocol.md §10.1), which then limit the model to it.
func TestTeamToolIsOfferedUnderTheDaemon(t *testing.T) {
	h, log := startModel(t, func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{Text: "ok"} })
	c := h.dial()

	all := h.create(c, nil)
	attach(t, c, all, "")
	runTurn(t, c, all, "everything")
	limited := h.create(c, func(m *protocol.AgentCreate) { m.Tools = []string{"read", "team"} })
	attach(t, c, limited, "")
	runTurn(t, c, limited, "read and team")

	for _, tc := range []struct {
		prompt string
		check  func([]string) bool
	}{
		{"everything", func(tools []string) bool { return slices.Contains(tools, "team") && slices.Contains(tools, "subagent") }},
		{"read and team", func(tools []string) bool { return slices.Equal(tools, []string{"read", "team"}) }},
	} {
		got := log.find(func(p fakellm.Prompt) bool { return p.LastUser == tc.prompt })
		if len(got) != 1 || !tc.check(got[0].Tools) {
			t.Fatalf("%q: the model was offered %v", tc.prompt, got)
		}
	}
}
