package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestWebEnroll(t *testing.T) {
	const url = "http://127.0.0.1:7420/enroll#code=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		if h.Type == protocol.TypeWebEnroll {
			c.respond(h, protocol.WebEnrollData{Code: "AAA", URL: url, ExpiresAt: testNow.Add(300e9).UnixMilli(), PrincipalID: "prn-1"})
		}
	})
	r := runCtl(t, nil, d.path, "", "web", "enroll", "--note", "laptop")
	if r.code != 0 || r.stdout != url+"\n" || !strings.Contains(r.stderr, "within 5m0s") {
		t.Fatalf("web enroll: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	recs := d.records(protocol.TypeWebEnroll)
	if len(recs) != 1 || !strings.Contains(string(recs[0]), `"note":"laptop"`) {
		t.Fatalf("web.enroll records = %q", recs)
	}
	r = runCtl(t, nil, d.path, "", "web", "enroll", "-o", "json")
	var data protocol.WebEnrollData
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &data) != nil || data.URL != url {
		t.Fatalf("web enroll -o json: code %d, stdout %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "web", "enroll", "--note", strings.Repeat("x", protocol.MaxNoteLen+1)); r.code != 2 {
		t.Fatalf("an over-long note: exit %d, want 2 (usage)", r.code)
	}
}

func TestWebSessions(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeWebSessionsList:
			c.respond(h, protocol.WebSessionsListData{Sessions: []protocol.WebSessionInfo{{
				SessionID: "wsn-1", BrowserID: "brw-1", PrincipalID: "prn-1", Note: "laptop", Secure: true,
				CreatedAt: 1_700_000_000_000, ExpiresAt: 1_700_000_500_000, LastUsedAt: 1_700_000_050_000, Connections: 2,
			}}})
		case protocol.TypeWebSessionsRevoke:
			var m protocol.WebSessionsRevoke
			_ = json.Unmarshal(rec, &m)
			if m.SessionID == "wsn-x" {
				c.respondError(h, protocol.CodeNotFound, "web.sessions.revoke: store: not found: web_sessions \"wsn-x\"")
				return
			}
			ids := []string{m.SessionID}
			if m.All {
				ids = []string{"wsn-1", "wsn-2"}
			}
			c.respond(h, protocol.WebSessionsRevokeData{Revoked: ids, ClosedConnections: 1})
		}
	})
	r := runCtl(t, nil, d.path, "", "web", "sessions", "ls")
	want := "SESSION  BROWSER  NOTE    SECURE  CREATED              LAST_USED            EXPIRES              CONNS\n" +
		"wsn-1    brw-1    laptop  true    2023-11-14 22:13:20  2023-11-14 22:14:10  2023-11-14 22:21:40  2\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("web sessions ls: code %d\n%s\nwant\n%s", r.code, r.stdout, want)
	}
	if r := runCtl(t, nil, d.path, "", "web", "sessions", "ls", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"session_id": "wsn-1"`) {
		t.Fatalf("web sessions ls -o json: %d %s", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "web", "sessions", "revoke", "wsn-1"); r.code != 0 || r.stdout != "revoked wsn-1\nclosed 1 connection(s)\n" {
		t.Fatalf("revoke: %d %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "web", "sessions", "revoke", "--all"); r.code != 0 || !strings.Contains(r.stdout, "revoked wsn-2") {
		t.Fatalf("revoke --all: %d %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "web", "sessions", "revoke", "wsn-x"); r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Fatalf("revoke unknown: %d %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"web", "sessions", "revoke"}, {"web", "sessions", "revoke", "--all", "wsn-1"}} {
		if r := runCtl(t, nil, d.path, "", args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)", args, r.code)
		}
	}
}
