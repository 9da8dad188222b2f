package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// allowThroughTurn allows every permission request of agent id until its
// turn ends, and returns the turn's last tool result (nil if none) and the
// tools that asked, in order.
func allowThroughTurn(t *testing.T, c *client.Conn, id string) (result *protocol.ToolResult, asked []string) {
	t.Helper()
	waitFor(t, c, func(e client.Event) bool {
		switch m := e.Msg.(type) {
		case *protocol.PermissionRequest:
			if m.AgentID == id {
				asked = append(asked, m.ToolName)
				if _, err := c.Request(ctx(t), permResponse(id, m.RequestID, protocol.DecisionAllow, "")); err != nil {
					t.Fatal(err)
				}
			}
		case *protocol.ToolResult:
			if m.AgentID == id {
				result = m
			}
		case *protocol.TurnEnd:
			return m.AgentID == id
		}
		return false
	})
	return result, asked
}

func permResponse(id, reqID, decision, choice string) *protocol.PermissionResponse {
	return &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: reqID, Decision: decision, ChoiceID: choice}
}

func agentCwd(t *testing.T, c *client.Conn, id string) string {
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st); err != nil {
		t.Fatal(err)
	}
	return st.Agents[0].Cwd
}

func TestPermissionBroadcastFirstResponseWins(t *testing.T) {
	h := start(t, nil)
	c1, c2 := h.dial(), h.dial()
	id := h.create(c1, nil)
	attach(t, c1, id, "")
	attach(t, c2, id, "")
	prompt(t, c1, id, `sim: tool write {"path":"out.txt","content":"hello"}`)

	req1 := waitFor(t, c1, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	req2 := waitFor(t, c2, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	if req1.RequestID != req2.RequestID || req1.ToolName != "write" {
		t.Fatalf("requests differ: %+v / %+v", req1, req2)
	}

	// An unknown choice id is invalid and leaves the request open.
	if _, err := c1.Request(ctx(t), permResponse(id, req1.RequestID, "", "no-such-choice")); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("unknown choice_id: %v, want INVALID_REQUEST", err)
	}
	// Client 2 wins; client 1's later deny is dropped silently.
	if _, err := c2.Request(ctx(t), permResponse(id, req1.RequestID, "", "allow")); err != nil {
		t.Fatalf("winning response: %v", err)
	}
	if _, err := c1.Request(ctx(t), permResponse(id, req1.RequestID, protocol.DecisionDeny, "")); err != nil {
		t.Fatalf("late response must be dropped silently, got %v", err)
	}
	for _, c := range []*client.Conn{c1, c2} {
		res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
		if res.RequestID != req1.RequestID || res.ChoiceID != "allow" || res.Source != "unix" {
			t.Errorf("permission_resolved = %+v", res)
		}
		tr := waitFor(t, c, isType(protocol.TypeToolResult, id)).Msg.(*protocol.ToolResult)
		if tr.IsError {
			t.Errorf("tool_result is an error after allow: %+v", tr)
		}
		waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	}
	b, err := os.ReadFile(filepath.Join(agentCwd(t, c1, id), "out.txt"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("file after allow = %q, %v", b, err)
	}
}

func TestObserversNeverAnswer(t *testing.T) {
	h := start(t, nil)
	c, obs := h.dial(), h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	attach(t, obs, id, protocol.RoleObserver)
	prompt(t, c, id, `sim: tool write {"path":"a.txt","content":"x"}`)
	req := waitFor(t, obs, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	if _, err := obs.Request(ctx(t), permResponse(id, req.RequestID, protocol.DecisionAllow, "")); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("observer answer: %v, want PERMISSION_DENIED", err)
	}
	if _, err := obs.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: "hi"}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("observer prompt: %v, want PERMISSION_DENIED", err)
	}
	// The interactive client still decides.
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, protocol.DecisionDeny, "")); err != nil {
		t.Fatal(err)
	}
	res := waitFor(t, obs, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
	if res.Decision != protocol.DecisionDeny {
		t.Fatalf("resolved = %+v", res)
	}
}

func TestHeadlessPolicyDeniesWithoutInteractiveResponder(t *testing.T) {
	h := start(t, nil)
	c, obs := h.dial(), h.dial()
	id := h.create(c, nil)
	attach(t, obs, id, protocol.RoleObserver)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: sleep 300\nsim: tool write {\"path\":\"b.txt\",\"content\":\"x\"}\nsim: ask confirm Proceed")
	if _, err := c.Request(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	// Only an observer is left: the headless path answers deny / null.
	res := waitFor(t, obs, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
	if res.Decision != protocol.DecisionDeny || res.Source != "headless" {
		t.Fatalf("permission_resolved = %+v, want deny from headless", res)
	}
	tr := waitFor(t, obs, isType(protocol.TypeToolResult, id)).Msg.(*protocol.ToolResult)
	if !tr.IsError {
		t.Fatalf("denied tool ran: %+v", tr)
	}
	ui := waitFor(t, obs, isType(protocol.TypeUIResolved, id)).Msg.(*protocol.UIResolved)
	if string(ui.Value) != "null" || ui.Source != "headless" {
		t.Fatalf("ui_resolved = %+v, want null from headless", ui)
	}
	waitFor(t, obs, isType(protocol.TypeTurnEnd, id))
	if _, err := os.Stat(filepath.Join(agentCwd(t, c, id), "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("file written despite headless deny: %v", err)
	}
}

func TestPendingRequestSurvivesDisconnect(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, `sim: tool write {"path":"later.txt","content":"kept"}`)
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	c.Close()

	c2 := h.dial()
	sync := attach(t, c2, id, "")
	if sync.Status != protocol.StatusWaitingForPermission {
		t.Errorf("sync status = %q, want waiting_for_permission", sync.Status)
	}
	if len(sync.PendingRequests) != 1 {
		t.Fatalf("sync.pending_requests = %s", sync.PendingRequests)
	}
	var pending protocol.PermissionRequest
	if err := json.Unmarshal(sync.PendingRequests[0], &pending); err != nil {
		t.Fatal(err)
	}
	if pending.RequestID != req.RequestID || pending.AgentID != id || pending.Type != protocol.TypePermissionRequest {
		t.Fatalf("pending = %+v, want %s", pending, req.RequestID)
	}
	// The live window carries the prompt already.
	if len(sync.LiveWindow.Messages) == 0 || sync.LiveWindow.Messages[0].Role != "user" {
		t.Errorf("live window = %+v", sync.LiveWindow.Messages)
	}
	if _, err := c2.Request(ctx(t), permResponse(id, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c2, isType(protocol.TypeTurnEnd, id))
	if b, _ := os.ReadFile(filepath.Join(agentCwd(t, c2, id), "later.txt")); string(b) != "kept" {
		t.Fatalf("file = %q", b)
	}
}

func TestAttachMidStreamSyncThenEachEventOnce(t *testing.T) {
	h := start(t, nil)
	c1 := h.dial()
	id := h.create(c1, nil)
	attach(t, c1, id, "")
	var script strings.Builder
	for i := 0; i < 40; i++ {
		script.WriteString("sim: say chunk\nsim: sleep 5\n")
	}
	prompt(t, c1, id, script.String())
	waitFor(t, c1, isType(protocol.TypeMessageDelta, id))

	c2 := h.dial()
	sync := attach(t, c2, id, "")
	if sync.Status != protocol.StatusStreaming || sync.RuntimeEpoch == nil || *sync.RuntimeEpoch != 0 {
		t.Fatalf("sync = status %q epoch %v", sync.Status, sync.RuntimeEpoch)
	}
	if len(sync.Capabilities) == 0 {
		t.Errorf("sync.capabilities empty; want the runtime's own hello capabilities")
	}
	all := collectUntil(t, c1, isType(protocol.TypeTurnEnd, id))
	tail := collectUntil(t, c2, isType(protocol.TypeTurnEnd, id))
	var seen []string
	for _, e := range tail {
		if e.Msg.Head().AgentID == id {
			seen = append(seen, string(e.Raw))
		}
	}
	var full []string
	for _, e := range all {
		if e.Msg.Head().AgentID == id {
			full = append(full, string(e.Raw))
		}
	}
	if len(seen) == 0 || len(seen) > len(full) {
		t.Fatalf("late client saw %d events, early client %d (after its first delta)", len(seen), len(full))
	}
	// The late client's stream is exactly a suffix of the early client's:
	// nothing duplicated, nothing skipped after its sync.
	suffix := full[len(full)-len(seen):]
	if strings.Join(suffix, "\n") != strings.Join(seen, "\n") {
		t.Fatalf("late stream is not a suffix:\nlate: %v\nfull tail: %v", seen, suffix)
	}
}
