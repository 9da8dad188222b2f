package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// childAsk attaches cc to the child agent of a run whose task starts with
// `sim: ask`, and returns the id of that ui_request. The parent is
// attached on c first, so that a request the child raised before cc
// attached waits (delegated to the parent) instead of being answered by
// the headless policy; cc then sees it in its sync or as an event.
func childAsk(t *testing.T, cc *client.Conn, child string) string {
	t.Helper()
	sync := attach(t, cc, child, "")
	for _, raw := range sync.PendingRequests {
		var req protocol.UIRequest
		if json.Unmarshal(raw, &req) == nil && req.Type == protocol.TypeUIRequest {
			return req.RequestID
		}
	}
	ev := waitFor(t, cc, func(e client.Event) bool {
		r, ok := e.Msg.(*protocol.UIRequest)
		return ok && r.AgentID == child
	})
	return ev.Msg.(*protocol.UIRequest).RequestID
}

// responseTo waits on c for the response to the command sent with id.
func responseTo(t *testing.T, c *client.Conn, id string) *protocol.Response {
	t.Helper()
	ev := waitFor(t, c, func(e client.Event) bool {
		r, ok := e.Msg.(*protocol.Response)
		return ok && r.ID == id
	})
	return ev.Msg.(*protocol.Response)
}

// runSteers returns the steers recorded against run (subagent.status).
func runSteers(t *testing.T, c *client.Conn, parent, run string) []protocol.RunSteer {
	t.Helper()
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent,
		Targets: []string{run}}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Agents) != 1 || st.Agents[0].Run == nil {
		t.Fatalf("status of %s = %+v", run, st)
	}
	return st.Agents[0].Run.Steers
}

// TestStrictSteerConflictsWhenTurnFails: a person's steer of a leased child
// waiting in the run's turn is answered CONFLICT when the turn fails before
// the next provider call, is recorded against the run, and never runs as a
// turn of its own (docs/protocol.md §10.3).
func TestStrictSteerConflictsWhenTurnFails(t *testing.T) {
	h := start(t, nil)
	c, cc := h.dial(), h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "f",
		Task: "sim: ask confirm Go on\nsim: fail upstream broke"})
	run := job.Runs[0]
	reqID := childAsk(t, cc, run.AgentID)

	// One connection, one order: the steer reaches the runtime before the
	// answer that lets the failing call go on.
	if err := cc.Send(&protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "hs", AgentID: run.AgentID},
		Message: "sim: say ghost"}); err != nil {
		t.Fatal(err)
	}
	if err := cc.Send(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, ID: "ans", AgentID: run.AgentID},
		RequestID: reqID, Value: json.RawMessage(`"true"`)}); err != nil {
		t.Fatal(err)
	}
	resp := responseTo(t, cc, "hs")
	if resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodeConflict {
		t.Fatalf("steer into a turn that failed = %+v, want CONFLICT", resp)
	}
	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunFailed {
		t.Fatalf("run = %+v, want failed", res.Runs[0])
	}
	steers := runSteers(t, c, parent, run.RunID)
	if len(steers) != 1 || steers[0].Source != protocol.SteerSourceClient || steers[0].Status != protocol.SteerConflict ||
		steers[0].CorrelationID == "" || steers[0].At == 0 {
		t.Fatalf("steers recorded = %+v", steers)
	}

	// Never a future prompt: the child's next run shows no trace of it.
	var rl protocol.SubagentRelaunchData
	if err := c.Call(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent,
		Target: run.AgentID, Task: "sim: say again"}, &rl); err != nil {
		t.Fatal(err)
	}
	res = waitRuns(t, c, parent, []string{rl.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted || res.Runs[0].FinalText != "again" {
		t.Fatalf("relaunched run = %+v", res.Runs[0])
	}
	assertNotInWindow(t, h, run.AgentID, "ghost")
}

// TestStrictSteerConflictsOnAbort: a steer waiting in the run's turn is
// answered CONFLICT when a person aborts the turn, and is dropped.
func TestStrictSteerConflictsOnAbort(t *testing.T) {
	h := start(t, nil)
	c, cc := h.dial(), h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "a", Task: "sim: ask confirm Go on\nsim: say base"})
	run := job.Runs[0]
	childAsk(t, cc, run.AgentID)
	if err := cc.Send(&protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "hs", AgentID: run.AgentID},
		Message: "sim: say ghost"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: run.AgentID}}); err != nil {
		t.Fatal(err)
	}
	resp := responseTo(t, cc, "hs")
	if resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodeConflict {
		t.Fatalf("steer into an aborted turn = %+v, want CONFLICT", resp)
	}
	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCancelled {
		t.Fatalf("run = %+v, want cancelled", res.Runs[0])
	}
	if s := runSteers(t, c, parent, run.RunID); len(s) != 1 || s[0].Status != protocol.SteerConflict || s[0].Source != protocol.SteerSourceClient {
		t.Fatalf("steers recorded = %+v", s)
	}
	// The parent's steer of the run now ended: conflict, recorded too.
	var st protocol.SubagentSteerData
	if err := c.Call(ctx(t), &protocol.SubagentSteer{Header: hdr(protocol.TypeSubagentSteer), ParentAgentID: parent,
		Target: run.Alias, Message: "late"}, &st); protocol.CodeOf(err) != protocol.CodeConflict && (err != nil || st.Status != protocol.SteerConflict) {
		t.Fatalf("steer of an ended run = %+v, %v", st, err)
	}
	assertNotInWindow(t, h, run.AgentID, "ghost")
}

// TestStrictSteerInjectedRecorded: the parent's and a person's steers
// that reach the model are answered injected with the run's turn and
// recorded against the run.
func TestStrictSteerInjectedRecorded(t *testing.T) {
	h := start(t, nil)
	c, cc := h.dial(), h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "i", Task: "sim: ask confirm Go on\nsim: say base"})
	run := job.Runs[0]
	reqID := childAsk(t, cc, run.AgentID)
	if err := cc.Send(&protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "hs", AgentID: run.AgentID},
		Message: "sim: say human"}); err != nil {
		t.Fatal(err)
	}
	if err := cc.Send(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, ID: "ans", AgentID: run.AgentID},
		RequestID: reqID, Value: json.RawMessage(`"true"`)}); err != nil {
		t.Fatal(err)
	}
	resp := responseTo(t, cc, "hs")
	var data protocol.SteerData
	if !resp.Success || resp.AgentID != run.AgentID || json.Unmarshal(resp.Data, &data) != nil || data.TurnID == "" {
		t.Fatalf("human steer = %+v", resp)
	}
	// Recorded before it was answered: the run shows it at once.
	if s := runSteers(t, c, parent, run.RunID); len(s) != 1 || s[0].TurnID != data.TurnID {
		t.Fatalf("steers recorded when the steer was answered = %+v", s)
	}
	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted || !strings.Contains(res.Runs[0].FinalText, "human") {
		t.Fatalf("run = %+v", res.Runs[0])
	}
	s := runSteers(t, c, parent, run.RunID)
	if len(s) != 1 || s[0].Status != protocol.SteerInjected || s[0].TurnID != data.TurnID || s[0].Source != protocol.SteerSourceClient {
		t.Fatalf("steers recorded = %+v", s)
	}
}

// assertNotInWindow fails when any message of the agent's live window
// holds text.
func assertNotInWindow(t *testing.T, h *harness, agentID, text string) {
	t.Helper()
	c := h.dial()
	sync := attach(t, c, agentID, protocol.RoleObserver)
	b, err := json.Marshal(sync.LiveWindow)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), text) {
		t.Fatalf("a refused steer reached the conversation: %s", b)
	}
}
