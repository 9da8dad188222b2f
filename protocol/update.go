package protocol

// agent.update and agent_updated are Shard extensions (docs/protocol.md
// §10.1, §10.2): an Agent's title, the name a person reads where nobody
// named it. The daemon gives an untitled, unnamed Agent an automatic title
// from the first prompt it accepts; agent.update sets or clears it, and a
// title set by hand is never replaced by an automatic one.

// TypeAgentUpdate changes an Agent's editable fields (Shard extension).
const TypeAgentUpdate = "agent.update"

// TypeAgentUpdated is the daemon-wide event after an Agent's editable
// fields changed (Shard extension).
const TypeAgentUpdated = "agent_updated"

// AgentUpdate sets the editable fields of the Agent named by agent_id, as
// agent.attach names it. Title is required (the one editable field so
// far): "" clears it, and the Agent then shows as its id again.
type AgentUpdate struct {
	Header
	Title *string `json:"title"`
}

// Validate implements Command.
func (c *AgentUpdate) Validate() error {
	if err := required("agent_id", c.AgentID); err != nil {
		return err
	}
	if c.Title == nil {
		return Errorf(CodeInvalidRequest, `field "title": required`)
	}
	return maxLen("title", *c.Title, MaxLabelLen)
}

// AgentUpdateData is the data of an agent.update response: the Agent as it
// is now.
type AgentUpdateData struct {
	Info AgentInfo `json:"info"`
}

// AgentUpdated announces an Agent's new projection after agent.update or
// an automatic title. Like agent_spawned, the agent_id it is about is the
// header's.
type AgentUpdated struct {
	Header
	Info AgentInfo `json:"info"`
}
