package telemetry

import (
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestClusterLoad: Load counts the agents of every runtime state, the
// live runtimes among them and the runs jobs.max_active caps.
func TestClusterLoad(t *testing.T) {
	m := New("test")
	m.AgentsAdd(protocol.RuntimeStopped, 3)
	m.AgentState("", protocol.RuntimeStarting)
	m.AgentState("", protocol.RuntimeRunning)
	m.AgentState(protocol.RuntimeStarting, protocol.RuntimeRunning)
	m.RunState("", protocol.RunQueued)
	m.RunState("", protocol.RunStarting)
	m.RunTransition(protocol.RunStarting, protocol.RunActive)
	m.RunState("", protocol.RunStarting)
	m.RunState("", protocol.RunCompleted)
	agents, runtimes, runs := m.Load()
	if agents != 5 || runtimes != 2 || runs != 2 {
		t.Fatalf("Load() = %d agents, %d runtimes, %d runs; want 5, 2, 2", agents, runtimes, runs)
	}
	var none *Metrics
	if a, r, n := none.Load(); a != 0 || r != 0 || n != 0 {
		t.Fatal("nil Metrics has load")
	}
}
