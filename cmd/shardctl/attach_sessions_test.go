package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestAttachReasoningCompactFork: /reasoning lists the levels and sets one
// for the model the listing names; /compact sends keep_recent_tokens and
// says when there was nothing to cut; /sessions lists; /fork forks at the
// session's last entry (or the one given) and creates the agent that
// adopts the fork, in the attached agent's cwd, model and mode.
func TestAttachReasoningCompactFork(t *testing.T) {
	h := func(typ string) protocol.Header { return ev(typ, agentA) }
	sessions := map[string]any{"sessions": []map[string]any{
		{"session_id": "sess-src", "kind": "session", "current": true, "entries": 4, "head_entry_id": "msg-last"},
		{"session_id": "sess-old", "kind": "fork", "current": false, "entries": 2, "fork_id": "fork-old", "source_entry_id": "msg-1"},
	}}
	forks := 0
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA, Cwd: "/work/proj", Model: "sim-think", Mode: "plan", Runtime: "shard"}})
			c.send(protocol.Sync{Header: h(protocol.TypeSync), Status: protocol.StatusIdle, Mode: "plan"})
		case protocol.TypeListReasoningLevels:
			c.respond(hd, map[string]any{"model": protocol.ModelDescriptor{ID: "sim/sim-think", Provider: "sim", Model: "sim-think"},
				"levels": []map[string]string{{"id": "off", "label": "Off"}, {"id": "high", "label": "High", "description": "Think hard."}},
				"active": "off", "effective": "next_provider_call"})
		case protocol.TypeSetReasoningLevel:
			c.respond(hd, map[string]any{"previous": "off", "active": "high"})
			c.send(protocol.ReasoningLevelChanged{Header: h(protocol.TypeReasoningLevelChanged), Previous: "off", Active: "high", Effective: "next_provider_call"})
		case protocol.TypeSessionOp:
			var op protocol.SessionOp
			mustUnmarshal(t, rec, &op)
			switch op.Op {
			case protocol.SessionOpCompact:
				c.respond(hd, map[string]any{"compacted": false, "reason": "no_safe_cut"})
			case protocol.SessionOpList:
				c.respond(hd, sessions)
			case protocol.SessionOpFork:
				forks++
				c.respond(hd, map[string]any{"fork_id": "fork-new", "session_id": "sess-fork" + string(rune('0'+forks)), "head_entry_id": "msg-x"})
			}
		case protocol.TypeAgentCreate:
			var m protocol.AgentCreate
			mustUnmarshal(t, rec, &m)
			c.respond(hd, protocol.AgentCreateData{AgentID: "agent-for-" + m.SessionID})
		default:
			c.respond(hd, nil)
		}
	})
	r := runCtl(t, nil, d.path, "/reasoning\n/reasoning high\n/compact 1000\n/sessions\n/fork\n/fork msg-1\n", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"* off", "  high — Think hard.", "reasoning: off → high",
		"(nothing to compact: no_safe_cut)",
		"session sess-src (4 entries, current)", "fork sess-old (2 entries, fork fork-old at msg-1)",
		"the fork is agent agent-for-sess-fork1", "the fork is agent agent-for-sess-fork2",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	sets := d.records(protocol.TypeSetReasoningLevel)
	if len(sets) != 1 {
		t.Fatalf("set_reasoning_level sent %d times", len(sets))
	}
	var set protocol.SetReasoningLevel
	mustUnmarshal(t, sets[0], &set)
	if set.Model != "sim/sim-think" || set.Effort != "high" || set.AgentID != agentA {
		t.Errorf("set_reasoning_level = %+v", set)
	}
	var ops []protocol.SessionOp
	for _, rec := range d.records(protocol.TypeSessionOp) {
		var op protocol.SessionOp
		mustUnmarshal(t, rec, &op)
		ops = append(ops, op)
	}
	var got []string
	for _, op := range ops {
		s := op.Op
		if op.Args != nil && op.Args.KeepRecentTokens != nil {
			s += " keep=" + strings.TrimSpace(string(mustJSON(t, *op.Args.KeepRecentTokens)))
		}
		if op.Args != nil && op.Args.FromEntryID != "" {
			s += " from=" + op.Args.FromEntryID
		}
		got = append(got, s)
	}
	if want := "compact keep=1000|list|list|fork from=msg-last|fork from=msg-1"; strings.Join(got, "|") != want {
		t.Errorf("session_ops = %q, want %q", strings.Join(got, "|"), want)
	}
	creates := d.records(protocol.TypeAgentCreate)
	if len(creates) != 2 {
		t.Fatalf("agent.create sent %d times, want one per fork", len(creates))
	}
	var create protocol.AgentCreate
	mustUnmarshal(t, creates[0], &create)
	if create.Cwd != "/work/proj" || create.SessionID != "sess-fork1" || create.AgentID != "" ||
		create.Model != "sim-think" || create.Mode != "plan" || create.Runtime != "" {
		t.Errorf("agent.create = %+v", create)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgentsRename: agents rename sends agent.update with the title (an
// empty one clears it) and says what the agent is titled now.
func TestAgentsRename(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentUpdate:
			var m protocol.AgentUpdate
			mustUnmarshal(t, rec, &m)
			c.respond(hd, protocol.AgentUpdateData{Info: protocol.AgentInfo{AgentID: m.AgentID, Title: *m.Title}})
		default:
			c.respond(hd, nil)
		}
	})
	r := runCtl(t, nil, d.path, "", "agents", "rename", agentA, "Release notes")
	if r.code != 0 || !strings.Contains(r.stdout, `is now titled "Release notes"`) {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "agents", "title", agentA, "")
	if r.code != 0 || !strings.Contains(r.stdout, "has no title") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	recs := d.records(protocol.TypeAgentUpdate)
	if len(recs) != 2 {
		t.Fatalf("agent.update sent %d times", len(recs))
	}
	var first protocol.AgentUpdate
	mustUnmarshal(t, recs[0], &first)
	if first.AgentID != agentA || first.Title == nil || *first.Title != "Release notes" {
		t.Fatalf("agent.update = %+v", first)
	}
}

// TestTitlesShowWhereNamesDo: an agent with only a title shows it in
// agents ls and agents show, and the title resolves to the agent.
func TestTitlesShowWhereNamesDo(t *testing.T) {
	titled := protocol.AgentInfo{AgentID: "agent-01m8thnkf942045d00000000aa", Title: "Fix the flaky test", Status: protocol.StatusIdle,
		RuntimeState: protocol.RuntimeStopped, Cwd: "/w"}
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentList, protocol.TypeAgentStatus:
			c.respond(hd, protocol.AgentListData{Agents: []protocol.AgentInfo{titled}})
		case protocol.TypeJobsList:
			c.respond(hd, protocol.JobsListData{})
		default:
			c.respond(hd, nil)
		}
	})
	if r := runCtl(t, nil, d.path, "", "agents", "ls"); r.code != 0 || !strings.Contains(r.stdout, "Fix the flaky test") {
		t.Fatalf("agents ls: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "agents", "show", "fix the flaky test"); r.code != 0 || !strings.Contains(r.stdout, "Fix the flaky test") ||
		!strings.Contains(r.stdout, titled.AgentID) {
		t.Fatalf("agents show by title: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
