package protocol

import "fmt"

// agent.remove is a Shard extension (docs/protocol.md §10.1; the contract has
// no command that deletes a durable Agent): an operator forgets finished
// agents and their sessions (`shardctl agents rm`, `agents prune`). The
// daemon refuses an agent that anything still needs, each refusal with a kind
// saying why.

// TypeAgentRemove deletes durable Agents (Shard extension).
const TypeAgentRemove = "agent.remove"

// TypeAgentRemoved is the daemon-wide event after an Agent was removed
// (Shard extension, docs/protocol.md §10.2).
const TypeAgentRemoved = "agent_removed"

// Refusal kinds of agent.remove (AgentRemoveResult.Kind, and the kind in the
// data of a CONFLICT error).
const (
	RemoveRunning       = "running"        // its runtime is not stopped
	RemoveAttached      = "attached"       // a client is attached to it
	RemoveChildrenAlive = "children_alive" // a child of it has a runtime that is not stopped
	RemoveWorkspace     = "workspace"      // it is bound to a workspace that is not retired
	RemoveJobOpen       = "job_open"       // it is a run's agent or the parent of a job that has not ended
	RemoveReport        = "report_pending" // a completion report of or for it is not delivered yet
	RemoveBusy          = "busy"           // a removal of it is already in progress
)

// AgentRemove deletes the named Agents: each one's manifest, alias and
// session directory. Each id is judged on its own (see AgentRemoveData).
type AgentRemove struct {
	Header
	AgentIDs []string `json:"agent_ids"`
}

// AgentRemoveData is the data of an agent.remove response: one result per
// requested id, in request order. The command succeeds as a whole even if
// some ids were refused.
type AgentRemoveData struct {
	Results []AgentRemoveResult `json:"results"`
}

// AgentRemoveResult is the outcome for one id: Removed, or Error (a
// protocol code: NOT_FOUND, CONFLICT, INTERNAL_ERROR; in a cluster
// UNSUPPORTED for another node's agent, docs/protocol.md §13 "Agents of
// other nodes") with a Kind for CONFLICT and a Reason.
type AgentRemoveResult struct {
	AgentID string    `json:"agent_id"`
	Removed bool      `json:"removed"`
	Error   ErrorCode `json:"error,omitempty"`
	Kind    string    `json:"kind,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// AgentRemoved announces that an Agent is gone for good. Like
// agent_spawned, the agent_id it is about is the header's.
type AgentRemoved struct {
	Header
	SessionID string `json:"session_id"`
}

// Validate implements Command.
func (c *AgentRemove) Validate() error {
	if err := eachMaxLen("agent_ids", c.AgentIDs, MaxHandles, MaxIDLen); err != nil {
		return err
	}
	if len(c.AgentIDs) == 0 {
		return invalid("agent_ids", "must name at least one agent")
	}
	for i, id := range c.AgentIDs {
		if id == "" {
			return invalid(fmt.Sprintf("agent_ids[%d]", i), "must not be empty")
		}
	}
	return nil
}
