package agent_test

import (
	"testing"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// TestInfoOfModelFallsBackToTheRuntimes: an agent created without a model
// shows the model its runtime reported (agent views used to show "-"); a
// chosen model wins.
func TestInfoOfModelFallsBackToTheRuntimes(t *testing.T) {
	usage := protocol.Usage{Input: 1, Model: "sim-default"}
	if got := agent.InfoOf(store.Agent{AgentID: "agent-1"}, protocol.StatusIdle, protocol.RuntimeRunning, "", usage); got.Model != "sim-default" {
		t.Errorf("model = %q, want the runtime's", got.Model)
	}
	if got := agent.InfoOf(store.Agent{AgentID: "agent-1", Model: "chosen"}, protocol.StatusIdle, protocol.RuntimeRunning, "", usage); got.Model != "chosen" {
		t.Errorf("model = %q, want the chosen one", got.Model)
	}
}
