package main

import (
	"context"
	"fmt"
	"io"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// listWatch is "ls --watch": print the list, then print it again after
// every change the daemon reports (agent status, spawn/exit and update
// events; run changes, which reach a connection once it asked
// subagent.status of the run's parent, docs/protocol.md §10.3), until
// Ctrl-C. A burst of events is one
// redraw: the events already queued are taken before the list is asked
// again. On a terminal the screen is cleared before each list; elsewhere
// the lists are separated by a blank line. The connection's loss exits 1.
func (g *globalOptions) listWatch(ctx context.Context, w io.Writer, render func(ctx context.Context, conn *client.Conn) (parents []string, err error)) error {
	conn, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tty := isTerminal(w)
	subscribed := map[string]bool{}
	for first := true; ; first = false {
		switch {
		case tty:
			io.WriteString(w, "\x1b[H\x1b[2J")
		case !first:
			fmt.Fprintln(w)
		}
		parents, err := render(ctx, conn)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, p := range parents {
			if p == "" || subscribed[p] {
				continue
			}
			subscribed[p] = true
			_ = conn.Call(ctx, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: p}, nil)
		}
		if err := awaitChange(ctx, conn); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// awaitChange waits for an event that changes a list, then takes the
// events already queued behind it.
func awaitChange(ctx context.Context, conn *client.Conn) error {
	changes := func(m protocol.Typed) bool {
		switch m.(type) {
		case *protocol.AgentStatusChanged, *protocol.AgentSpawned, *protocol.AgentExited, *protocol.AgentUpdated, *protocol.SubagentRunChanged:
			return true
		}
		return false
	}
	for {
		select {
		case ev, ok := <-conn.Events():
			if !ok {
				return failed(connEnded(conn))
			}
			if !changes(ev.Msg) {
				continue
			}
			for {
				select {
				case _, ok := <-conn.Events():
					if !ok {
						return failed(connEnded(conn))
					}
				default:
					return nil
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
