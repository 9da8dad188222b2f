package main

import (
	"context"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// requestDraining is conn.Request for a caller that is also the consumer of
// conn's events: while it waits for the response it keeps taking events off
// conn and appends them to backlog, for the caller to handle afterwards, in
// order. A plain Request would risk a deadlock there: the client stops
// reading — responses included — while its event buffer is full, and a
// streaming agent fills it.
func requestDraining(ctx context.Context, conn *client.Conn, cmd protocol.Typed, backlog *[]client.Event) (*protocol.Response, error) {
	type answer struct {
		resp *protocol.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := conn.Request(ctx, cmd)
		done <- answer{resp, err}
	}()
	events := conn.Events()
	for {
		select {
		case a := <-done:
			return a.resp, a.err
		case ev, ok := <-events:
			if !ok {
				events = nil // closed: the Request fails too; wait for it
				continue
			}
			*backlog = append(*backlog, ev)
		}
	}
}
