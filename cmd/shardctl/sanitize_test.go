package main

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestSafeEscapesControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain name":          "plain name",
		"héllo · ü":           "héllo · ü",
		"a\nb\rc\td":          `a\nb\rc\td`,
		"\x1b[2J\x1b]0;t\x07": `\x1b[2J\x1b]0;t\x07`,
		"nul\x00del\x7f":      `nul\x00del\x7f`,
		"c1\u0085csi\u009b":   `c1\u0085csi\u009b`,
		"bidi\u202eevil":      `bidi\u202eevil`,
		"line\u2028sep":       `line\u2028sep`,
		"bad\xffutf8\xc3":     `bad\xffutf8\xc3`,
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := safeText("para\n\tcode\x1b[31m\r"); got != "para\n\tcode\\x1b[31m\\r" {
		t.Errorf("safeText = %q", got)
	}
}

func TestSafeAllReachesEveryString(t *testing.T) {
	m := &protocol.ToolCall{Header: protocol.Header{Type: "tool_call", AgentID: "a\x1b"}, Name: "n\n",
		Args: map[string]any{"k\r": []any{"v\x1b", map[string]any{"deep": "\x07"}}, "n": 1.0}}
	var typed protocol.Typed = m
	safeAll(&typed)
	if m.AgentID != `a\x1b` || m.Name != `n\n` {
		t.Fatalf("fields = %q %q", m.AgentID, m.Name)
	}
	args := m.Args
	list, ok := args[`k\r`].([]any)
	if !ok || list[0] != `v\x1b` || list[1].(map[string]any)["deep"] != `\x07` || args["n"] != 1.0 {
		t.Fatalf("args = %#v", args)
	}
}

// forgedName is what a model may name a subagent to forge a table row and
// clear the screen.
const forgedName = "evil\nagent-99  root  -  idle\r\x1b[2J\x1b[31mred\xff"

// TestTablesEscapeForgedNames: a name with a newline, a carriage return,
// ESC sequences and invalid UTF-8 stays one escaped cell of one row in a
// table and in a detail view (14.8).
func TestTablesEscapeForgedNames(t *testing.T) {
	agents := []protocol.AgentInfo{{AgentID: "agent-01", Name: forgedName, Cwd: "/src\x1b]0;title\x07", Status: protocol.StatusIdle}}
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: agents})
		default:
			c.respondError(h, protocol.CodeNotFound, "no")
		}
	})
	// (JSON decoding already replaced the invalid byte with U+FFFD.)
	escaped := `evil\nagent-99  root  -  idle\r\x1b[2J\x1b[31mred` + "\ufffd"
	r := runCtl(t, nil, d.path, "", "agents", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], escaped) || !strings.Contains(lines[1], `/src\x1b]0;title\x07`) {
		t.Fatalf("agents ls:\n%s", r.stdout)
	}
	if strings.ContainsAny(r.stdout, "\r\x1b\x07") {
		t.Fatalf("raw control characters in %q", r.stdout)
	}
	// JSON keeps the name as it is.
	r = runCtl(t, nil, d.path, "", "agents", "ls", "-o", "json")
	if !strings.Contains(r.stdout, `evil\nagent-99`) || !strings.Contains(r.stdout, `\u001b[2J`) {
		t.Fatalf("json:\n%s", r.stdout)
	}
}

// TestTableAlignsColoredCells: colored cells take the width they show, so
// a colored column does not push the header and later columns out of line
// (tabwriter counted the escape codes).
func TestTableAlignsColoredCells(t *testing.T) {
	var b strings.Builder
	p := palette{enabled: true}
	tw := newTable(&b)
	tw.Write([]byte("ID\tSTATUS\tNAME\n"))
	tw.Write([]byte("agent-01\t" + p.status(protocol.StatusIdle) + "\tbuilder\n"))
	tw.Write([]byte("agent-02\t" + p.status(protocol.StatusWaitingForPermission) + "\tscout\n"))
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	col := func(l, word string) int { return visibleWidth(l[:strings.Index(l, word)]) }
	if h, r1, r2 := col(lines[0], "NAME"), col(lines[1], "builder"), col(lines[2], "scout"); h != r1 || r1 != r2 {
		t.Fatalf("NAME column at %d, %d, %d:\n%s", h, r1, r2, b.String())
	}
	var nh strings.Builder
	tw = newTableNoHeader(&nh, true)
	tw.Write([]byte("ID\tNAME\nagent-01\tx\n"))
	tw.Flush()
	if nh.String() != "agent-01  x\n" {
		t.Fatalf("no headers: %q", nh.String())
	}
}
