package main

// The connection path attach and prompt share: connect to the daemon,
// resolve the agent the user named, attach to it as its interactive client
// and, for attach, attach again after the connection was lost.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// attachInteractive connects, resolves agent (a name, an alias, an id or
// its prefix: see resolveAgent) and attaches to it as the interactive
// client. The caller closes conn. Events are the caller's to read from the
// attach on; the client buffers them meanwhile.
func (o *globalOptions) attachInteractive(ctx context.Context, agent string) (conn *client.Conn, agentID string, att protocol.AgentAttachData, err error) {
	conn, err = o.connect(ctx)
	if err != nil {
		return nil, "", att, err
	}
	if agentID, err = resolveAgent(ctx, conn, agent); err != nil {
		conn.Close()
		return nil, "", att, err
	}
	if att, err = interactiveAttach(ctx, conn, agentID); err != nil {
		conn.Close()
		return nil, "", att, fmt.Errorf("attach %s: %w", agentID, err)
	}
	return conn, agentID, att, nil
}

// reattach waits out a lost connection: it connects again, paced by rc,
// until window has passed since the loss (lost, which the error then
// names), and attaches to agentID again. An attach the daemon refuses (the
// agent is gone) ends it at once; a daemon not yet back is tried again.
func (o *globalOptions) reattach(ctx context.Context, rc *reconnector, window time.Duration, agentID string, lost error) (*client.Conn, protocol.AgentAttachData, error) {
	for {
		if err := rc.wait(ctx, window); err != nil {
			if ctx.Err() != nil {
				return nil, protocol.AgentAttachData{}, ctx.Err()
			}
			return nil, protocol.AgentAttachData{}, failed(fmt.Errorf("%v, and no reconnect within %s", lost, window))
		}
		conn, err := o.connect(ctx)
		if err != nil {
			continue
		}
		att, err := interactiveAttach(ctx, conn, agentID)
		if err != nil {
			conn.Close()
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, att, fmt.Errorf("attach %s again: %w", agentID, err)
			}
			continue
		}
		rc.reset()
		return conn, att, nil
	}
}

// failover is reattach for a client of a cluster: each attempt, paced
// by rc within window, tries the nodes of fo (client.Failover: the other
// nodes of the last cluster.status, then the lost one) through their
// sockets (their web_url with --url), and attaches to agentID again on the first that is up. A
// node that refuses the attach (its agent's node unreachable from it
// for now) is passed over like one that is down; the window bounds it
// all, and its end names the last failure. node is the node it attached
// through.
func (o *globalOptions) failover(ctx context.Context, rc *reconnector, fo *client.Failover, window time.Duration, agentID string, lost error) (conn *client.Conn, att protocol.AgentAttachData, node string, err error) {
	var last error
	dial := o.nodeDialer()
	resume := func(ctx context.Context, c *client.Conn) error {
		var err error
		att, err = interactiveAttach(ctx, c, agentID)
		return err
	}
	for {
		if err := rc.wait(ctx, window); err != nil {
			if ctx.Err() != nil {
				return nil, att, "", ctx.Err()
			}
			return nil, att, "", failed(fmt.Errorf("%v, and no reconnect within %s (last: %v)", lost, window, last))
		}
		c, n, err := fo.Reconnect(ctx, dial, resume)
		if err != nil {
			last = err
			continue
		}
		rc.reset()
		return c, att, n.Node, nil
	}
}

// interactiveAttach is agent.attach as the interactive client, the one
// that answers the agent's questions and sends it prompts.
func interactiveAttach(ctx context.Context, conn *client.Conn, agentID string) (protocol.AgentAttachData, error) {
	var att protocol.AgentAttachData
	msg := &protocol.AgentAttach{
		Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID},
		Role:   protocol.RoleInteractive,
	}
	err := conn.Call(ctx, msg, &att)
	return att, err
}
