package registry

import "github.com/shard-dev/shard/protocol"

// Directory is what the registry reads of the cluster's agent directory
// (cluster/agentdir.View): the agents other nodes host, as they last
// published them. Both methods read a snapshot and never block.
type Directory interface {
	// Remote returns the other nodes' agents, oldest first (agent.list's
	// order), each with its node set.
	Remote() []protocol.AgentInfo
	// Lookup returns another node's agent, its node set.
	Lookup(agentID string) (info protocol.AgentInfo, ok bool)
	// NodeOf names the node hosting another node's agent: the directory's
	// word, else where a run this node took said its parent lives (the
	// parent's node travels with the run), so a child's requests go up to
	// a parent created a moment ago, before its listing arrives here.
	NodeOf(agentID string) (node string, ok bool)
}

// notHere is the error of a command for an agent this node does not host:
// NOT_FOUND, or, for an agent of another node in the directory,
// UNSUPPORTED naming its node. A client's commands for another node's
// agent are forwarded to that node by the gateway before they reach the
// registry (docs/protocol.md §13 "Agents of other nodes"); what still
// arrives here was not: an agent.remove naming agents of several nodes,
// or a command that another node forwarded here.
func (r *Actor) notHere(id string) error {
	if r.deps.Directory != nil {
		if in, ok := r.deps.Directory.Lookup(id); ok {
			return protocol.Errorf(protocol.CodeUnsupported,
				"agent %s lives on node %s; this command was not forwarded there (name that node's agents alone)", id, in.Node)
		}
	}
	return protocol.Errorf(protocol.CodeNotFound, "no agent %s", id)
}

// remoteNode names the node hosting another node's agent id (NodeOf).
func (r *Actor) remoteNode(id string) (string, bool) {
	if r.deps.Directory == nil {
		return "", false
	}
	return r.deps.Directory.NodeOf(id)
}

// remoteInfo is the directory's AgentInfo of another node's agent id.
func (r *Actor) remoteInfo(id string) (protocol.AgentInfo, bool) {
	if r.deps.Directory == nil {
		return protocol.AgentInfo{}, false
	}
	return r.deps.Directory.Lookup(id)
}
