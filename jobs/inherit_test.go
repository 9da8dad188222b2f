package jobs

import (
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// TestChildInheritsWhatTheParentRunsNow: the registry forwards a
// subagent.create with the parent's live AgentInfo, which a model_changed
// has updated before the store has (the agent saves it off its mailbox);
// a child naming no provider or model runs on what the parent runs now,
// not on the stored manifest's older selection.
func TestChildInheritsWhatTheParentRunsNow(t *testing.T) {
	st := openStoreAt(t, filepath.Join(t.TempDir(), "shard.db"), store.Options{})
	if err := st.CreateAgent(store.Agent{AgentID: "agent-p1", SessionID: "sess-p1", Cwd: "/w", Provider: "sim", Model: "sim"}); err != nil {
		t.Fatal(err)
	}
	h := startCoordinator(t, st)
	m := &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate, ID: "c1"}, ParentAgentID: "agent-p1", Name: "kid", Task: taskMarker}
	h.sys.Root.Send(h.coord, &registry.Command{Client: h.client, Header: m.Header, Cmd: m,
		Parent: protocol.AgentInfo{AgentID: "agent-p1", Provider: "local", Model: "qwen3"}})
	data := createdOf(t, h.responses("c1")["c1"])
	child, err := st.GetAgent(data.Runs[0].AgentID)
	if err != nil {
		t.Fatal(err)
	}
	if child.Provider != "local" || child.Model != "qwen3" {
		t.Fatalf("child runs %s/%s, want local/qwen3 (what its parent runs now)", child.Provider, child.Model)
	}
}
