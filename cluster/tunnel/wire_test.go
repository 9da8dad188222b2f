package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// fakeGateway speaks the wire protocol's JSONL framing (docs/protocol.md
// §2.1) on every connection ln accepts: hello first, then for each
// agent.list a turn_start event and the response with agents agents.
func fakeGateway(t *testing.T, ln *Listener, agents int) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	hello := protocol.MustMarshal(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   "fake-over-nats",
	})
	list := protocol.AgentListData{}
	for i := range agents {
		list.Agents = append(list.Agents, protocol.AgentInfo{AgentID: fmt.Sprintf("agent-%06d", i), Cwd: "/srv/work"})
	}
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		if _, err := c.Write(append(hello, '\n')); err != nil {
			t.Errorf("gateway: hello: %v", err)
			return
		}
		r := protocol.NewReader(c, 0)
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Errorf("gateway: read: %v", err)
				return
			}
			h, err := protocol.DecodeHeader(rec)
			if err != nil || h.Type != protocol.TypeAgentList {
				t.Errorf("gateway: unexpected record %q (%v)", rec, err)
				return
			}
			ev := protocol.MustMarshal(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart, AgentID: "agent-000000"}, TurnID: "turn-1"})
			resp := protocol.NewResponse(h.ID, h.Type, list)
			if _, err := c.Write(append(append(append(ev, '\n'), resp...), '\n')); err != nil {
				t.Errorf("gateway: write: %v", err)
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go serve(c)
		}
	}()
}

// unixProxy listens on a unix socket and carries each connection to the
// tunnel listener on subject: the way a client of one node reaches another
// node's gateway, with package client unchanged on the unix side.
func unixProxy(t *testing.T, dial func() (*Conn, error)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	ul, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ul.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			u, err := ul.Accept()
			if err != nil {
				return
			}
			tc, err := dial()
			if err != nil {
				t.Errorf("proxy dial: %v", err)
				u.Close()
				continue
			}
			wg.Add(2)
			go func() { // client → gateway
				defer wg.Done()
				_, _ = io.Copy(tc, u)
				_ = tc.CloseWrite()
			}()
			go func() { // gateway → client
				defer wg.Done()
				_, _ = io.Copy(u, tc)
				_ = u.Close()
				_ = tc.Close()
			}()
		}
	}()
	return path
}

// TestWireProtocol runs package client against a gateway that speaks the
// wire protocol across a two-server cluster: hello, a response after an
// event, a response of many frames, and a clean end.
func TestWireProtocol(t *testing.T) {
	a, b := startCluster(t)
	ln := listen(t, connect(t, b), testOptions())
	const agents = 3000 // a response of several 64 KiB frames
	fakeGateway(t, ln, agents)
	dnc := connect(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	sock := unixProxy(t, func() (*Conn, error) { return dialRetry(ctx, dnc, ln.subject, testOptions()) })

	conn, err := client.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Hello().ServerVersion; got != "fake-over-nats" {
		t.Fatalf("hello from %q", got)
	}
	for range 3 {
		var list protocol.AgentListData
		if err := conn.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Agents) != agents || list.Agents[agents-1].AgentID != fmt.Sprintf("agent-%06d", agents-1) {
			t.Fatalf("agent.list: %d agents", len(list.Agents))
		}
		select {
		case ev := <-conn.Events():
			if ts, ok := ev.Msg.(*protocol.TurnStart); !ok || ts.TurnID != "turn-1" {
				t.Fatalf("event %s", ev.Raw)
			}
		case <-ctx.Done():
			t.Fatal("no event before the response")
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}
