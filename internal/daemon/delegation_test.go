package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// TestChildPermissionDelegatesToInteractiveAncestor: a child with no
// interactive client of its own surfaces its permission request through the
// nearest ancestor that has one, keeping the child's agent_id
// (docs/protocol.md §6.3); the answer resolves the child's request, also
// after the ancestor's client reconnects, and a late one is success.
func TestChildPermissionDelegatesToInteractiveAncestor(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	cwd := agentCwd(t, c, parent)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "writer",
		Task: `sim: tool write {"path":"delegated.txt","content":"from child"}`})
	child := job.Runs[0].AgentID

	req := waitFor(t, c, isType(protocol.TypePermissionRequest, child)).Msg.(*protocol.PermissionRequest)
	if req.ToolName != "write" {
		t.Fatalf("delegated request = %+v", req)
	}
	// The ancestor's client drops and comes back: the request is in its sync.
	c.Close()
	c2 := h.dial()
	sync := attach(t, c2, parent, "")
	found := false
	for _, p := range sync.PendingRequests {
		var pr protocol.PermissionRequest
		if json.Unmarshal(p, &pr) == nil && pr.RequestID == req.RequestID && pr.AgentID == child {
			found = true
		}
	}
	if !found {
		t.Fatalf("parent's sync lacks the delegated request: %s", sync.PendingRequests)
	}
	// An observer of the parent may not answer; the interactive client may,
	// though it is not attached to the child.
	obs := h.dial()
	attach(t, obs, parent, protocol.RoleObserver)
	if _, err := obs.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionAllow, "")); protocol.CodeOf(err) != protocol.CodeNotAttached {
		t.Fatalf("observer answer: %v, want NOT_ATTACHED", err)
	}
	if _, err := c2.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatalf("ancestor client's answer: %v", err)
	}
	res := waitFor(t, c2, isType(protocol.TypePermissionResolved, child)).Msg.(*protocol.PermissionResolved)
	if res.RequestID != req.RequestID || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolved = %+v", res)
	}
	// A late answer of the ancestor's client is discarded silently
	// (docs/protocol.md §6.3), not refused NOT_ATTACHED.
	if _, err := c2.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionDeny, "")); err != nil {
		t.Fatalf("ancestor client's late answer: %v, want success", err)
	}
	wr := waitRuns(t, c2, parent, []string{job.JobID}, "", nil)
	if wr.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", wr.Runs[0])
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "delegated.txt")); err != nil || string(b) != "from child" {
		t.Fatalf("file = %q, %v", b, err)
	}
}

func TestChildPermissionWithNoResponderAnywhereIsDenied(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil) // nobody attached anywhere
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "writer",
		Task: `sim: tool write {"path":"nope.txt","content":"x"}`})
	res := waitRuns(t, c, parent, []string{job.JobID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", res.Runs[0])
	}
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: parent}}, &st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.Agents[0].Cwd, "nope.txt")); !os.IsNotExist(err) {
		t.Fatalf("headless deny did not hold: %v", err)
	}
	_ = client.Event{}
}
