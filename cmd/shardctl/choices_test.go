package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// choiceRequest is a bash permission request with the reference runtime's
// backend-built choices (docs/protocol.md §9.5).
func choiceRequest(id string) protocol.PermissionRequest {
	return protocol.PermissionRequest{
		Header: ev(protocol.TypePermissionRequest, agentA), RequestID: id, ToolName: "bash",
		Input:   map[string]any{"command": "go test ./b"},
		Options: []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny},
		Choices: []protocol.PermissionChoice{
			{ID: "allow", Label: "Allow once", Intent: "allow"},
			{ID: "allow_always", Label: "Always allow this exact request", Intent: "persist"},
			{ID: "allow_signature", Label: "Always allow `go test …` for this agent", Intent: "persist"},
			{ID: "deny", Label: "Deny", Intent: "deny"},
		},
	}
}

// choiceTurn asks choiceRequest and ends the turn once it is answered.
func choiceTurn() agentScript {
	return agentScript{
		onPrompt: func(c *daemonConn, _ protocol.Prompt) {
			c.send(turnStart("t1"))
			c.send(choiceRequest("req-c"))
		},
		onPermission: func(c *daemonConn, m protocol.PermissionResponse) {
			c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, agentA), RequestID: m.RequestID, ChoiceID: m.ChoiceID, Decision: m.Decision})
			c.send(turnEnd("t1"))
		},
	}
}

// TestPromptAnswersStructuredChoices: a request that offers choices is
// answered with a choice_id (never the legacy decision): by number, by
// y/n/a mapped through the choices' intents (a is the exact allow_always),
// by id; a reason typed after the answer goes with it; end of input picks
// the deny choice.
func TestPromptAnswersStructuredChoices(t *testing.T) {
	for _, tc := range []struct {
		name, stdin, choice, reason string
	}{
		{"number", "3\n", "allow_signature", ""},
		{"yes", "y\n", "allow", ""},
		{"always", "a\n", "allow_always", ""},
		{"id", "allow_signature\n", "allow_signature", ""},
		{"no with reason", "n use make instead\n", "deny", "use make instead"},
		{"colon reason", "deny: not on main\n", "deny", "not on main"},
		{"retry after nonsense", "9\nmaybe\n4\n", "deny", ""},
		{"end of input", "", "deny", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := choiceTurn().daemon(t)
			r := runCtl(t, nil, d.path, tc.stdin, "prompt", agentA, "go")
			if r.code != 0 {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			recs := d.records(protocol.TypePermissionResponse)
			if len(recs) != 1 {
				t.Fatalf("permission responses = %d", len(recs))
			}
			var pr protocol.PermissionResponse
			mustUnmarshal(t, recs[0], &pr)
			if pr.ChoiceID != tc.choice || pr.Decision != "" || pr.Reason != tc.reason {
				t.Fatalf("permission_response = %s, want choice %q reason %q", recs[0], tc.choice, tc.reason)
			}
			for _, want := range []string{"  3) Always allow `go test …` for this agent\n", "1-4/[y]es/[n]o/[a]lways: ", "a reason for the agent may follow"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}

// TestPromptLegacyDecisionCarriesReason: without choices the legacy
// decision is sent, with the reason.
func TestPromptLegacyDecisionCarriesReason(t *testing.T) {
	d := permissionTurn().daemon(t)
	r := runCtl(t, nil, d.path, "n: the notes are final\n", "prompt", agentA, "go")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var pr protocol.PermissionResponse
	mustUnmarshal(t, d.records(protocol.TypePermissionResponse)[0], &pr)
	if pr.Decision != protocol.DecisionDeny || pr.ChoiceID != "" || pr.Reason != "the notes are final" {
		t.Fatalf("permission_response = %+v", pr)
	}
}

// TestPromptAnswersEveryAskKind: select, multi-select (a list), confirm
// ("true"/"false"), input and editor, and a dismissed multi-select.
func TestPromptAnswersEveryAskKind(t *testing.T) {
	reqs := []protocol.UIRequest{
		{RequestID: "u1", Kind: protocol.UISelect, Title: "One", Options: []string{"red", "green"}},
		{RequestID: "u2", Kind: protocol.UISelect, Title: "Several", Options: []string{"a", "b c", "d"}, Multiple: true},
		{RequestID: "u3", Kind: protocol.UISelect, Title: "Texts", Options: []string{"a", "b c", "d"}, Multiple: true},
		{RequestID: "u4", Kind: protocol.UIConfirm, Title: "Sure?"},
		{RequestID: "u5", Kind: protocol.UIConfirm, Title: "Really?"},
		{RequestID: "u6", Kind: protocol.UIInput, Title: "Name", Prefill: "Ada"},
		{RequestID: "u7", Kind: protocol.UIEditor, Title: "Notes"},
		{RequestID: "u8", Kind: protocol.UISelect, Title: "None", Options: []string{"x"}, Multiple: true},
	}
	next := 0
	send := func(c *daemonConn) {
		r := reqs[next]
		r.Header = ev(protocol.TypeUIRequest, agentA)
		next++
		c.send(r)
	}
	s := agentScript{
		onPrompt: func(c *daemonConn, _ protocol.Prompt) {
			c.send(turnStart("t1"))
			send(c)
		},
		onUI: func(c *daemonConn, m protocol.UIResponse) {
			c.send(protocol.UIResolved{Header: ev(protocol.TypeUIResolved, agentA), RequestID: m.RequestID, Value: m.Value})
			if next < len(reqs) {
				send(c)
				return
			}
			c.send(turnEnd("t1"))
		},
	}
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "2\n1, 3\nb c,a\nyes\nn\n\nfirst line\n", "prompt", agentA, "go")
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "Choose [1-3, several: 1,3]: ") {
		t.Errorf("stderr lacks the multi-select prompt:\n%s", r.stderr)
	}
	want := map[string]string{"u1": `"green"`, "u2": `["a","d"]`, "u3": `["b c","a"]`, "u4": `"true"`, "u5": `"false"`,
		"u6": `"Ada"`, "u7": `"first line"`, "u8": `null`}
	recs := d.records(protocol.TypeUIResponse)
	if len(recs) != len(want) {
		t.Fatalf("ui responses = %d:\n%s", len(recs), r.stderr)
	}
	for _, rec := range recs {
		var m protocol.UIResponse
		mustUnmarshal(t, rec, &m)
		if got := string(json.RawMessage(m.Value)); got != want[m.RequestID] {
			t.Errorf("%s: value %s, want %s", m.RequestID, got, want[m.RequestID])
		}
	}
}

// TestQuestionsAnswerChoiceWithReason: questions answer sends the offered
// choice (by number or id) as choice_id, with --reason; a multi-select
// takes several.
func TestQuestionsAnswerChoiceWithReason(t *testing.T) {
	perm := choiceRequest("req-p")
	ui := protocol.UIRequest{Header: ev(protocol.TypeUIRequest, agentA), RequestID: "req-u", Kind: protocol.UISelect, Title: "Which", Options: []string{"x", "y", "z"}, Multiple: true}
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: agentA, Name: "boss", Status: protocol.StatusWaitingForPermission}}})
		case protocol.TypeAgentAttach:
			c.respond(h, protocol.AgentAttachData{})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), PendingRequests: []json.RawMessage{protocol.MustMarshal(perm), protocol.MustMarshal(ui)}})
		default:
			c.respond(h, nil)
		}
	})
	r := runCtl(t, nil, d.path, "", "questions", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "allow_signature") || !strings.Contains(r.stdout, "x|y|z|N,M…") {
		t.Fatalf("questions ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-p", "4", "--reason", "not today"); r.code != 0 {
		t.Fatalf("answer: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-p", "allow_signature"); r.code != 0 {
		t.Fatalf("answer: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-u", "3,1"); r.code != 0 {
		t.Fatalf("answer: exit %d stderr %q", r.code, r.stderr)
	}
	recs := d.records(protocol.TypePermissionResponse)
	if len(recs) != 2 {
		t.Fatalf("permission responses = %d", len(recs))
	}
	var p1, p2 protocol.PermissionResponse
	mustUnmarshal(t, recs[0], &p1)
	mustUnmarshal(t, recs[1], &p2)
	if p1.ChoiceID != "deny" || p1.Decision != "" || p1.Reason != "not today" || p2.ChoiceID != "allow_signature" || p2.Reason != "" {
		t.Errorf("permission_responses %s / %s", recs[0], recs[1])
	}
	var u protocol.UIResponse
	mustUnmarshal(t, d.records(protocol.TypeUIResponse)[0], &u)
	if string(u.Value) != `["z","x"]` {
		t.Errorf("ui_response %s", u.Value)
	}
}

// TestAttachAnswersChoiceWithReason: attach lists the request's choices,
// sends the one picked by number as choice_id with the reason typed after
// it, and answers a multi-select with a list.
func TestAttachAnswersChoiceWithReason(t *testing.T) {
	s := agentScript{
		onPrompt: func(c *daemonConn, _ protocol.Prompt) {
			c.send(turnStart("t1"))
			c.send(choiceRequest("req-c"))
		},
		onPermission: func(c *daemonConn, m protocol.PermissionResponse) {
			c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, agentA), RequestID: m.RequestID, ChoiceID: m.ChoiceID})
			c.send(protocol.UIRequest{Header: ev(protocol.TypeUIRequest, agentA), RequestID: "u1", Kind: protocol.UISelect, Title: "Which", Options: []string{"x", "y", "z"}, Multiple: true})
		},
		onUI: func(c *daemonConn, m protocol.UIResponse) {
			c.send(protocol.UIResolved{Header: ev(protocol.TypeUIResolved, agentA), RequestID: m.RequestID, Value: m.Value})
			c.send(turnEnd("t1"))
		},
	}
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "go\n4 not this way\n2,3\n", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var pr protocol.PermissionResponse
	mustUnmarshal(t, d.records(protocol.TypePermissionResponse)[0], &pr)
	if pr.ChoiceID != "deny" || pr.Decision != "" || pr.Reason != "not this way" {
		t.Errorf("permission_response %+v", pr)
	}
	var u protocol.UIResponse
	mustUnmarshal(t, d.records(protocol.TypeUIResponse)[0], &u)
	if string(u.Value) != `["y","z"]` {
		t.Errorf("ui_response %s", u.Value)
	}
	if !strings.Contains(r.stdout, "  3) Always allow `go test …` for this agent") {
		t.Errorf("stdout lacks the choices:\n%s", r.stdout)
	}
}
