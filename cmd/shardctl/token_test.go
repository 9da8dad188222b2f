package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestToken(t *testing.T) {
	const token = "tok-01j0000000000000000000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeTokenCreate:
			var m protocol.TokenCreate
			_ = json.Unmarshal(rec, &m)
			c.respond(h, protocol.TokenCreateData{TokenID: "tok-01j0000000000000000000000", Token: token, Note: m.Note, CreatedAt: 1})
		case protocol.TypeTokenList:
			c.respond(h, protocol.TokenListData{Tokens: []protocol.TokenInfo{
				{TokenID: "tok-a", Note: "ci", CreatedAt: 1_700_000_000_000, LastUsedAt: 1_700_000_050_000, Connections: 1},
				{TokenID: "tok-b", Note: "old", CreatedAt: 1_700_000_000_000, RevokedAt: 1_700_000_060_000},
			}})
		case protocol.TypeTokenRevoke:
			var m protocol.TokenRevoke
			_ = json.Unmarshal(rec, &m)
			c.respond(h, protocol.TokenRevokeData{TokenID: m.TokenID, RevokedAt: 5, ClosedConnections: 1})
		}
	})
	r := runCtl(t, nil, d.path, "", "token", "create", "--note", "ci runner")
	if r.code != 0 || r.stdout != token+"\n" || !strings.Contains(r.stderr, "shown only now") {
		t.Fatalf("token create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if recs := d.records(protocol.TypeTokenCreate); len(recs) != 1 || !strings.Contains(string(recs[0]), `"note":"ci runner"`) {
		t.Fatalf("token.create records = %q", recs)
	}
	if r := runCtl(t, nil, d.path, "", "token", "create"); r.code != 2 || !strings.Contains(r.stderr, "note") {
		t.Fatalf("token create without --note: %d %q, want a usage error", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "token", "ls")
	want := "TOKEN  NOTE  CREATED              LAST_USED            STATE                        CONNS\n" +
		"tok-a  ci    2023-11-14 22:13:20  2023-11-14 22:14:10  live                         1\n" +
		"tok-b  old   2023-11-14 22:13:20  -                    revoked 2023-11-14 22:14:20  0\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("token ls: %d\n%s\nwant\n%s", r.code, r.stdout, want)
	}
	if r := runCtl(t, nil, d.path, "", "token", "ls", "-o", "yaml"); r.code != 0 || !strings.Contains(r.stdout, "token_id: tok-a") {
		t.Fatalf("token ls -o yaml: %d %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "token", "revoke", "tok-a"); r.code != 0 || r.stdout != "revoked tok-a (closed 1 connection(s))\n" {
		t.Fatalf("token revoke: %d %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "token", "revoke"); r.code != 2 {
		t.Fatalf("token revoke without id: exit %d, want 2", r.code)
	}
}
