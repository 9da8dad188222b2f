// Package agentdir keeps the cluster's agent directory (records bucket
// shard_agents, docs/cluster.md "The agent directory"): a Publisher writes
// this node's agents into it, a View follows the other nodes' agents out of
// it. Both run on goroutines of their own; the daemon's actors only mark
// agents changed (Publisher.Changed) and read the View's snapshot, so no
// mailbox ever waits on the cluster.
package agentdir

import (
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
)

// EntryOf is the directory entry node publishes for its agent in.
func EntryOf(node string, in protocol.AgentInfo) records.AgentEntry {
	return records.AgentEntry{
		AgentID: in.AgentID, Node: node, Cwd: in.Cwd, Name: in.Name, Alias: in.Alias,
		ParentAgentID: in.ParentAgentID, Runtime: in.Runtime, State: records.AgentLive,
		CreatedAt: in.CreatedAt, Title: in.Title, Model: in.Model, Provider: in.Provider,
		Status: in.Status, RuntimeState: in.RuntimeState, Workspace: in.WorkspaceID,
		Definition: in.DefinitionName, DisplayName: in.DisplayName,
	}
}

// InfoOf is the AgentInfo a node lists for another node's agent: the
// entry's fields, with Node set. Fields the directory does not carry
// (usage, tools, attached clients, …) are absent: they are the host's to
// tell, to a client connected to it.
func InfoOf(e records.AgentEntry) protocol.AgentInfo {
	return protocol.AgentInfo{
		AgentID: e.AgentID, Node: e.Node, Cwd: e.Cwd, Name: e.Name, Alias: e.Alias,
		ParentAgentID: e.ParentAgentID, Runtime: e.Runtime, CreatedAt: e.CreatedAt,
		Title: e.Title, Model: e.Model, Provider: e.Provider, Status: e.Status,
		RuntimeState: e.RuntimeState, WorkspaceID: e.Workspace, DefinitionName: e.Definition,
		DisplayName: e.DisplayName,
	}
}
