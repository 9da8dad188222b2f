package gateway

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/outbox"
)

// FuzzWSHandshake drives the web listener's /ws route — the guard (Host,
// forwarded headers), the cap, and the upgrade's ticket, token and Origin
// parsing (wsAuth) — with arbitrary header values. Without a credential store
// no token is valid, and a fuzzed ticket is never a minted one, so every
// request must be refused, with a JSON body, before the upgrade; with a real
// ticket (minted is true) the answer may be anything but a panic or a 101
// from a recorder that cannot be hijacked.
func FuzzWSHandshake(f *testing.F) {
	f.Add("127.0.0.1:7420", "", "shard.v1, ticket.abc", "", false)
	f.Add("127.0.0.1:7420", "http://127.0.0.1:7420", "shard.v1", "", true)
	f.Add("127.0.0.1:7420", "", "shard.v1", "Bearer abc.def", false)
	f.Add("127.0.0.1:7420", "", "shard.v1", "", true)
	f.Add("localhost:7420", "null", "ticket.a, ticket.b", "Basic x", false)
	f.Add("127.0.0.1:7420", "http://evil.test", "shard.v1,ticket.", "Bearer", true)
	f.Add("127.0.0.1:7420", "http://127.0.0.1:7420\x00", "shard.v1 ticket.x", "bearer  t=", false)

	g := New(Config{TicketTTL: 30 * time.Second, MaxConnections: 1}, nil, nil, outbox.NewHub(), discardLog())
	gd, err := newGuard(withDefaults(WebPolicy{}), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420})
	if err != nil {
		f.Fatal(err)
	}
	g.guard = gd
	h := g.webHandler()

	f.Fuzz(func(t *testing.T, host, origin, protocols, authz string, minted bool) {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7420/ws", nil)
		r.Host = host
		r.RemoteAddr = "127.0.0.1:5555"
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for _, p := range strings.Split(protocols, "\n") {
			r.Header.Add("Sec-WebSocket-Protocol", p)
		}
		if minted {
			ticket, _ := g.Tickets().Mint()
			r.Header.Add("Sec-WebSocket-Protocol", "ticket."+ticket)
		}
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusSwitchingProtocols {
			t.Fatalf("upgraded through a recorder: %+v", r.Header)
		}
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		if open != 0 {
			t.Fatalf("%d connection slots held after the request", open)
		}
		if minted {
			return
		}
		switch w.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		default:
			t.Fatalf("status %d for an unauthenticated upgrade (host %q origin %q protocols %q authz %q)",
				w.Code, host, origin, protocols, authz)
		}
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body["error"] == "" {
			t.Fatalf("refusal body %q is not {\"error\":…}", w.Body.String())
		}
	})
}
