package team

import (
	"context"
	"fmt"
	"sync"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Link is how the coordinator acts on the rest of the daemon: as a client
// of its own wire protocol, so that the lead's creation, the workers' runs,
// merges and retires take the path, checks and records a client's commands
// take. Implementations are safe for concurrent use; every call may block
// and runs off the actor's mailbox.
type Link interface {
	// Call sends cmd and decodes the answer's data into data (nil: the
	// data is ignored). A refused command is its *protocol.Error.
	Call(ctx context.Context, cmd protocol.Typed, data any) error
	// Prompt gives agentID a prompt as an interactive client of it
	// (attach, prompt with streaming_behavior follow_up, detach): a prompt
	// needs an attachment (docs/protocol.md §6.1). A non-empty dedupeKey
	// makes a repeat of the same prompt (after a restart) acknowledged
	// without being delivered twice.
	Prompt(ctx context.Context, agentID, text, dedupeKey string) error
}

// SocketLink is the Link over the daemon's own unix socket: one short
// connection per call, as the reference runtime's subagent tool reaches
// the daemon. The zero value is not usable: Path is required.
type SocketLink struct {
	// Path is the daemon's unix socket.
	Path string
}

var _ Link = SocketLink{}

// Call implements Link.
func (l SocketLink) Call(ctx context.Context, cmd protocol.Typed, data any) error {
	return l.with(ctx, func(conn *client.Conn) error { return conn.Call(ctx, cmd, data) })
}

// Prompt implements Link.
func (l SocketLink) Prompt(ctx context.Context, agentID, text, dedupeKey string) error {
	return l.with(ctx, func(conn *client.Conn) error {
		att := &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID}}
		if err := conn.Call(ctx, att, nil); err != nil {
			return err
		}
		p := &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: agentID}, Message: text,
			StreamingBehavior: protocol.BehaviorFollowUp, DedupeKey: dedupeKey}
		return conn.Call(ctx, p, nil)
	})
}

// with runs f on a fresh connection, draining its events (daemon-wide
// events reach every connection; nobody reads them here, but they must not
// fill the buffer ahead of a response) and closing it after.
func (l SocketLink) with(ctx context.Context, f func(*client.Conn) error) error {
	conn, err := client.Dial(ctx, l.Path)
	if err != nil {
		return fmt.Errorf("team: reach the daemon: %w", err)
	}
	var drain sync.WaitGroup
	drain.Go(func() {
		for range conn.Events() {
		}
	})
	defer func() {
		_ = conn.Close()
		drain.Wait()
	}()
	return f(conn)
}
