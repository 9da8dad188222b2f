//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Size of TestReconnectStorm.
const (
	stormClients = 200
	stormCycles  = 3
	stormAgents  = 4
)

// TestReconnectStorm: 200 clients, half on the unix socket and half on the
// WebSocket, each connect, attach to one of a few agents and go away —
// detaching first, closing cleanly or just dropping — again and again, all
// at once. Every attach must succeed; afterwards the connection and
// attachment gauges are back at their baseline, goroutines too, and the
// daemon still serves a prompt end to end.
func TestReconnectStorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 4))
	home := newHome(t)
	// The default ping interval (30 s): a keepalive must end with its
	// connection, not at its next ping.
	d := startDaemon(t, home, daemonOpts{})
	ctl := d.dial()
	events := record(ctl)
	var agents []string
	for range stormAgents {
		id, _ := createAgent(t, ctl)
		agents = append(agents, id)
	}
	base := d.mustMetrics()
	wsURL := d.wsURL()

	var failures atomic.Int64
	var firstErr sync.Once
	fail := func(format string, args ...any) {
		failures.Add(1)
		firstErr.Do(func() { t.Errorf(format, args...) })
	}
	seeds := make([]uint64, stormClients)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	var wg sync.WaitGroup
	began := time.Now()
	for i := range stormClients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seeds[i], uint64(i)))
			ws := i%2 == 1
			for cycle := range stormCycles {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				var c *client.Conn
				var err error
				if ws {
					var tk protocol.WSTicketData
					if err = ctl.Call(ctx, &protocol.WSTicket{Header: hdr(protocol.TypeWSTicket, "")}, &tk); err == nil {
						c, err = client.DialWebSocket(ctx, wsURL, tk.Ticket)
					}
				} else {
					c, err = client.Dial(ctx, d.socket())
				}
				if err != nil {
					cancel()
					fail("client %d cycle %d: connect: %v", i, cycle, err)
					return
				}
				go func() {
					for range c.Events() {
					}
				}()
				agentID := agents[r.IntN(len(agents))]
				if err := c.Call(ctx, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, agentID)}, nil); err != nil {
					fail("client %d cycle %d: attach %s: %v", i, cycle, agentID, err)
				}
				switch r.IntN(3) {
				case 0: // detach, then close
					if err := c.Call(ctx, &protocol.AgentDetach{Header: hdr(protocol.TypeAgentDetach, agentID)}, nil); err != nil {
						fail("client %d cycle %d: detach: %v", i, cycle, err)
					}
					c.Close()
				case 1: // a second attach elsewhere, then close
					other := agents[r.IntN(len(agents))]
					if err := c.Call(ctx, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, other)}, nil); err != nil {
						fail("client %d cycle %d: attach %s: %v", i, cycle, other, err)
					}
					c.Close()
				default: // just go
					c.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("%d connect/attach cycles took %s", stormClients*stormCycles, time.Since(began).Round(time.Millisecond))
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d connect/attach/detach cycles failed", n, stormClients*stormCycles)
	}

	gauges := []string{`shard_connections{transport="unix"}`, `shard_connections{transport="websocket"}`, "shard_attachments"}
	var last map[string]float64
	eventually(t, 2*callTimeout, "connection and attachment gauges back to baseline", func() bool {
		last = d.mustMetrics()

		for _, g := range gauges {
			if last[g] != base[g] {
				return false
			}
		}
		return true
	})
	// Goroutines: each connection's reader, writer, watchdog and keepalive
	// must end. The slack covers the HTTP server's idle connections.
	eventually(t, callTimeout, fmt.Sprintf("goroutines back near %v", base["go_goroutines"]), func() bool {
		last = d.mustMetrics()
		return last["go_goroutines"] <= base["go_goroutines"]+20
	})
	t.Logf("gauges and goroutines settled after %s", time.Since(began).Round(time.Millisecond))
	t.Logf("goroutines: %v before, %v after %d connections", base["go_goroutines"], last["go_goroutines"], stormClients*stormCycles)

	// Still serving: a listing and a whole turn.
	var list protocol.AgentListData
	call(t, ctl, &protocol.AgentList{Header: hdr(protocol.TypeAgentList, "")}, &list)
	if len(list.Agents) != stormAgents {
		t.Fatalf("agent.list: %d agents, want %d", len(list.Agents), stormAgents)
	}
	attach(t, ctl, agents[0])
	prompt(t, ctl, agents[0], "sim: say after the storm")
	events.waitFor(t, callTimeout, "turn_end after the storm", is(protocol.TypeTurnEnd, agents[0]))
}
