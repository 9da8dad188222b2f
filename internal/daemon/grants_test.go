package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

func bashCall(command string) fakellm.ToolCall {
	return fakellm.ToolCall{Name: "bash", Args: string(protocol.MustMarshal(map[string]string{"command": command}))}
}

// askedPermission returns the turn's permission_request, nil when none.
func askedPermission(evs []client.Event) *protocol.PermissionRequest {
	for _, e := range evs {
		if r, ok := e.Msg.(*protocol.PermissionRequest); ok {
			return r
		}
	}
	return nil
}

// TestRefusalReasonAndBashSignatureGrants drives a real model's bash calls
// through the permission gate: a bash request offers the backend-built
// allow_signature choice ("Always allow `go test …` for this agent"); once
// chosen on `go test ./b`, `go test ./a` runs without asking, but `go test
// -run X ./a` (other flags) and `rm` ask, and a refusal's reason reaches
// the model with it. The grant survives a runtime restart; malformed or
// unknown persisted rules grant nothing.
func TestRefusalReasonAndBashSignatureGrants(t *testing.T) {
	script, f := newLLM(t)
	h := startLLM(t, f, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	script.set("b", bashCall("go test ./b"))
	script.set("a", bashCall("go test ./a"))
	script.set("run", bashCall("go test -run X ./a"))
	script.set("rm", bashCall("rm -f nothing"))
	script.set("c", bashCall("go test ./c && go test ./d"))

	// go test ./b: asked, with the signature choice; the person picks it.
	prompt(t, c, id, "b")
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	var sig *protocol.PermissionChoice
	for i, ch := range req.Choices {
		if ch.ID == "allow_signature" {
			sig = &req.Choices[i]
		}
	}
	if sig == nil || sig.Label != "Always allow `go test …` for this agent" || sig.Intent != "persist" ||
		!strings.Contains(sig.Description, "exactly these flags") || sig.Accelerator != "s" {
		t.Fatalf("choices %+v: want allow_signature for go test", req.Choices)
	}
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, "", "allow_signature")); err != nil {
		t.Fatal(err)
	}
	res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
	if res.ChoiceID != "allow_signature" {
		t.Fatalf("permission_resolved %+v", res)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))

	// go test ./a: the same signature, runs without asking.
	if r := askedPermission(runTurn(t, c, id, "a")); r != nil {
		t.Fatalf("go test ./a asked again: %+v", r)
	}

	// Other flags, another executable: asked; refused with a reason the
	// model is told.
	for _, tc := range []struct{ text, choice, decision, reason string }{
		{"run", "deny", "", "no -run filters, run the whole package"},
		{"rm", "", protocol.DecisionDeny, "never delete files here"},
	} {
		prompt(t, c, id, tc.text)
		req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
		resp := permResponse(id, req.RequestID, tc.decision, tc.choice)
		resp.Reason = tc.reason
		if _, err := c.Request(ctx(t), resp); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, isType(protocol.TypeTurnEnd, id))
		if got := lastToolOutput(t, f.Request(t, f.Count())); !strings.Contains(got, "permission denied; the person's reason: "+tc.reason) {
			t.Errorf("%s: the model was told %q", tc.text, got)
		}
	}

	// The grant is persisted. Add rules the matcher must refuse: an
	// unknown kind, an unknown version, an unsorted flag set, a shell.
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isStatusChange(id, protocol.RuntimeStopped))
	dirs, err := os.ReadDir(h.cfg.SessionsDir())
	if err != nil || len(dirs) != 1 {
		t.Fatalf("sessions: %v, %v", dirs, err)
	}
	path := filepath.Join(h.cfg.SessionsDir(), dirs[0].Name(), "grants.jsonl")
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), `"kind":"bash_signature"`) {
		t.Fatalf("grants.jsonl = %s, %v", data, err)
	}
	bad := `{"kind":"bash_any","version":1,"tool":"bash","args":null,"granted_at":1}
{"kind":"bash_signature","version":2,"tool":"bash","args":null,"signatures":[{"exe":"rm","flags":["-f"]}],"granted_at":1}
{"kind":"bash_signature","version":1,"tool":"bash","args":null,"signatures":[{"exe":"rm","flags":["-f","-f"]}],"granted_at":1}
{"kind":"bash_signature","version":1,"tool":"bash","args":null,"signatures":[{"exe":"rm","sub":"nothing","flags":["-f"]}],"granted_at":1}
{"kind":"bash_signature","version":1,"tool":"bash","args":null,"signatures":[{"exe":"sh","flags":["-f"]}],"granted_at":1}
`
	if err := os.WriteFile(path, append(data, bad...), 0o600); err != nil {
		t.Fatal(err)
	}

	attach(t, c, id, "") // a new runtime generation reads the grants
	if r := askedPermission(runTurn(t, c, id, "c")); r != nil {
		t.Fatalf("the persisted go test grant was lost: asked %+v", r)
	}
	prompt(t, c, id, "rm")
	req = waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, protocol.DecisionDeny, "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if got := lastToolOutput(t, f.Request(t, f.Count())); got != "Error: permission denied" {
		t.Errorf("a refusal without a reason: the model was told %q", got)
	}
}
