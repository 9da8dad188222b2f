package registry

import (
	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
)

// Command is a decoded client command for the registry: an orchestrator
// command, or a per-agent command to route by its agent_id.
type Command struct {
	Client *agent.Client
	Header protocol.Header
	Cmd    protocol.Command
	Raw    []byte
}

// Drain stops every runtime for a daemon shutdown and closes Done once none
// is left. A later Drain with Force escalates one in progress.
type Drain struct {
	Force bool
	Done  chan<- struct{}
}

// createResult carries the outcome of agent.create's I/O back to the actor.
type createResult struct {
	cmd *Command
	m   agentManifest
	err error
}
