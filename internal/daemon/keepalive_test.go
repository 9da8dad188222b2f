package daemon_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
)

// TestWebSocketKeepaliveEndsWithItsConnection: a WebSocket connection's
// keepalive goroutine ends when the connection does, not at its next ping
// (gateway.ping_interval, 30 s by default): a reconnect storm must not
// leave a goroutine per closed connection behind. (Found by the fault
// suite's reconnect storm, package faults.)
func TestWebSocketKeepaliveEndsWithItsConnection(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Gateway.PingInterval = time.Hour })
	unix := h.dial()
	for range 5 {
		ws, err := client.DialWebSocket(ctx(t), wsURL(h), mintTicket(t, unix).Ticket)
		if err != nil {
			t.Fatal(err)
		}
		ws.Close()
	}
	eventually(t, "closed websocket connections forgotten", func() bool { return connections(t, unix) == 1 })
	eventually(t, "no keepalive left for a closed connection", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "gateway.(*Gateway).keepalive")
	})
}
