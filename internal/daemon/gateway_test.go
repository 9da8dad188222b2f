package daemon_test

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

func mintTicket(t *testing.T, c *client.Conn) protocol.WSTicketData {
	t.Helper()
	var tk protocol.WSTicketData
	if err := c.Call(ctx(t), &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &tk); err != nil {
		t.Fatalf("ws.ticket: %v", err)
	}
	return tk
}

func wsURL(h *harness) string { return "ws" + strings.TrimPrefix(h.d.WebURL(), "http") + "/ws" }

// dialStatus attempts an upgrade and returns the HTTP status of a refusal
// (0 when the upgrade succeeded).
func dialStatus(t *testing.T, url string, protocols ...string) int {
	t.Helper()
	c, resp, err := websocket.Dial(ctx(t), url, &websocket.DialOptions{Subprotocols: protocols})
	if err == nil {
		c.CloseNow()
		return 0
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode
}

func TestWebSocketNeedsASingleUseTicket(t *testing.T) {
	cfg := newConfig(t)
	cfg.Gateway.TicketTTL = 300 * time.Millisecond
	// The gateway's clock is a manual one: the expired-ticket case moves it
	// past the TTL instead of sleeping.
	clk := clock.NewManual(time.Now())
	h := startOpts(t, cfg, func(o *daemon.Options) { o.GatewayClock = clk })
	unix := h.dial()
	url := wsURL(h)

	if got := dialStatus(t, url, "shard.v1"); got != http.StatusUnauthorized {
		t.Errorf("no ticket: %d, want 401", got)
	}
	if got := dialStatus(t, url, "shard.v1", "ticket.forged"); got != http.StatusUnauthorized {
		t.Errorf("forged ticket: %d, want 401", got)
	}
	resp, err := http.Get(h.d.WebURL() + "/ws")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("plain GET /ws: %v %v, want 401", resp.StatusCode, err)
	}

	tk := mintTicket(t, unix)
	if !strings.HasSuffix(tk.URL, "/ws") || tk.ExpiresAt <= time.Now().UnixMilli() {
		t.Errorf("ticket data = %+v", tk)
	}
	ws, err := client.DialWebSocket(ctx(t), url, tk.Ticket)
	if err != nil {
		t.Fatalf("dial with ticket: %v", err)
	}
	defer ws.Close()
	if ws.Hello().ProtocolVersion != protocol.Version {
		t.Errorf("ws hello = %+v", ws.Hello())
	}
	// Replay → 401.
	if got := dialStatus(t, url, "shard.v1", "ticket."+tk.Ticket); got != http.StatusUnauthorized {
		t.Errorf("replayed ticket: %d, want 401", got)
	}
	// Expired → 401.
	old := mintTicket(t, unix)
	clk.Advance(cfg.Gateway.TicketTTL + time.Millisecond)
	if got := dialStatus(t, url, "shard.v1", "ticket."+old.Ticket); got != http.StatusUnauthorized {
		t.Errorf("expired ticket: %d, want 401", got)
	}
	// Tickets are minted on the unix socket only (local trust).
	if _, err := ws.Request(ctx(t), &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Errorf("ws.ticket over WebSocket: %v, want PERMISSION_DENIED", err)
	}

	// A WebSocket client and a unix client see the same stream.
	id := h.create(unix, nil)
	attach(t, unix, id, "")
	attach(t, ws, id, "")
	prompt(t, ws, id, "sim: say over both transports")
	a := turnText(collectUntil(t, unix, isType(protocol.TypeTurnEnd, id)))
	b := turnText(collectUntil(t, ws, isType(protocol.TypeTurnEnd, id)))
	if a != "over both transports" || a != b {
		t.Fatalf("unix saw %q, websocket saw %q", a, b)
	}
	if strings.Contains(h.log.String(), tk.Ticket) {
		t.Fatal("a ticket was logged")
	}
}

func connections(t *testing.T, c *client.Conn) int {
	var st protocol.DaemonStatusData
	if err := c.Call(ctx(t), &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &st); err != nil {
		t.Fatal(err)
	}
	return st.Connections
}

func TestWebSocketPeerThatStopsAnsweringPingsIsDropped(t *testing.T) {
	h := start(t, func(c *config.Config) {
		c.Gateway.PingInterval = 100 * time.Millisecond
		c.Gateway.PingTimeout = 100 * time.Millisecond
	})
	unix := h.dial()
	tk := mintTicket(t, unix)
	// A raw client that never reads never answers pings.
	conn, _, err := websocket.Dial(ctx(t), wsURL(h), &websocket.DialOptions{Subprotocols: []string{"shard.v1", "ticket." + tk.Ticket}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	eventually(t, "websocket peer registered", func() bool { return connections(t, unix) == 2 })
	eventually(t, "silent websocket peer dropped", func() bool { return connections(t, unix) == 1 })
}

func TestSlowConsumerIsDroppedOthersUnaffected(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Gateway.OutboundMaxBytes = 1 << 20 })
	ctl := h.dial()
	id := h.create(ctl, nil)

	// attachRaw attaches a raw unix connection and reads up to its sync.
	attachRaw := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("unix", h.cfg.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.Write([]byte(`{"type":"agent.attach","id":"a","agent_id":"` + id + `"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReaderSize(conn, 1<<20)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(line), `"type":"sync"`) {
				return conn, rd
			}
		}
	}
	slow, slowRd := attachRaw() // never reads again
	fast, fastRd := attachRaw() // reads raw lines, no decoding: it keeps up
	fast.SetReadDeadline(time.Now().Add(60 * time.Second))

	// 3 MiB of deltas: far more than the socket buffers plus the 1 MiB cap.
	var script strings.Builder
	for i := 0; i < 30; i++ {
		script.WriteString("sim: flood 100 1024\nsim: sleep 10\n")
	}
	if _, err := fast.Write([]byte(`{"type":"prompt","id":"p","agent_id":"` + id + `","message":` + strconv.Quote(script.String()) + `}` + "\n")); err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for {
		line, err := fastRd.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // a long record: skip the rest of it
				_, err = fastRd.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			t.Fatalf("fast client: %v after %d deltas", err, deltas)
		}
		if strings.Contains(string(line), `"type":"message_delta"`) {
			deltas++
		}
		if strings.HasPrefix(string(line), `{"type":"turn_end"`) {
			break
		}
	}
	if deltas != 3000 {
		t.Fatalf("fast client saw %d deltas, want 3000", deltas)
	}
	eventually(t, "slow consumer dropped", func() bool { return connections(t, ctl) == 2 })

	// The daemon closed the slow client's socket: what it can still read
	// ends in EOF, not in our read deadline.
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for err == nil {
		_, err = slowRd.ReadBytes('\n')
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("slow client's connection was not closed: %v", err)
	}
}
