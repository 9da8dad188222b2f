package workspaces

import (
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/store"
)

// Message is a message of the workspace actor's own family. Clients'
// commands reach it as *registry.Command, forwarded by the registry.
type Message interface{ isWorkspaceMessage() }

// done carries the outcome of one command's git and store work, done in a
// goroutine of Deps.Group, back to the mailbox: the actor asks the registry
// to serve the new agents (Adopt), answers the client, then broadcasts the
// events, in that order, so that a client that reads the response can use
// the agent at once.
type done struct {
	cmd    *registry.Command
	data   any
	err    error
	adopt  []store.Agent
	events [][]byte
}

// reconciled reports the end of startup reconciliation (for the log and
// for tests, through Deps.OnReconciled).
type reconciled struct {
	err error
}

func (*done) isWorkspaceMessage()       {}
func (*reconciled) isWorkspaceMessage() {}
