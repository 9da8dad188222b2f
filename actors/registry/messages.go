package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Message is a message of the registry family. The marker is unexported,
// so only this file adds to the family; the registry also receives agent
// messages (agent.Route, agent.InfoChanged, agent.Drained), which are the
// agent family's.
type Message interface{ isRegistryMessage() }

// Command is a decoded client command for the registry: an orchestrator
// command, or a per-agent command to route by its agent_id. The registry
// forwards subagent.* and jobs.* commands unchanged to the jobs coordinator
// it was handed (AttachJobs), workspace.* commands to the workspace
// actor (AttachWorkspaces) and team.* commands to the team coordinator
// (AttachTeam); each answers the client itself.
type Command struct {
	Client *agent.Client
	Header protocol.Header
	Cmd    protocol.Command
	Raw    []byte
	// Parent is the registry's live AgentInfo of a subagent.create's
	// parent (zero when unknown): what it runs now, which a model_changed
	// may have changed before the store has it (the agent saves it off its
	// mailbox), so that a child inherits the parent's current provider and
	// model.
	Parent protocol.AgentInfo
	// Local keeps an agent.list to this node's own agents: the cluster's
	// directory publisher reads what it publishes with it. Never set from
	// the wire.
	Local bool
}

// Drain stops every runtime for a daemon shutdown and closes Done once none
// is left. A later Drain with Force escalates one in progress. From the
// first Drain on, subagent.* commands are answered with CONFLICT.
type Drain struct {
	Force bool
	Done  chan<- struct{}
}

// Adopt asks the registry to serve newly committed Agents (the children a
// subagent.create committed): it spawns an agent actor for each one it does
// not serve yet and broadcasts agent_spawned.
type Adopt struct{ Agents []store.Agent }

// AttachJobs hands the registry the jobs coordinator, its sibling under the
// root, to which it forwards subagent.* and jobs.* commands. The registry
// watches it: once it stops, those commands are answered with CONFLICT
// instead of being lost.
type AttachJobs struct{ PID *actor.PID }

// DetachJobs makes the registry stop forwarding to the jobs coordinator
// (subagent.* is answered with CONFLICT from then on) and closes Done once
// it has. The daemon sends it before it stops the coordinator, so that no
// command can be forwarded to a stopped coordinator and go unanswered.
type DetachJobs struct{ Done chan<- struct{} }

// AttachWorkspaces hands the registry the workspace actor, its sibling
// under the root, to which it forwards workspace.* commands (the workspace
// actor answers the client itself). Like AttachJobs, the registry watches
// it: once it stops, workspace.* is answered with CONFLICT, never lost.
type AttachWorkspaces struct{ PID *actor.PID }

// DetachWorkspaces stops forwarding to the workspace actor and closes Done
// once it has; the daemon sends it before it stops that actor.
type DetachWorkspaces struct{ Done chan<- struct{} }

// AttachUplink hands the registry, on a cluster node, the actor that
// carries a child's permission and UI requests to an ancestor on another
// node (actors/uplink): a Delegate for an agent the directory places on
// another node goes there as a RemoteDelegate instead of being refused.
// Sent before the gateway serves; nil keeps refusing.
type AttachUplink struct{ PID *actor.PID }

// RemoteDelegate is a child's Delegate for AgentID, an ancestor that Node
// hosts (docs/protocol.md §13 "Runs on other nodes"): what the registry
// hands the uplink (AttachUplink). The uplink answers Msg.Origin as the
// ancestor would (agent.DelegateResult).
type RemoteDelegate struct {
	Node, AgentID string
	Msg           *agent.Delegate
}

// RemoteSteer is a parent's subagent.steer of a run that Node claimed
// (docs/protocol.md §13 "Runs on other nodes"): what the jobs coordinator
// hands the registry, which hands it the uplink (AttachUplink), or
// answers NODE_UNAVAILABLE off a cluster. The uplink carries Msg to the
// child on Node, records the outcome at Holder (the run's job actor, by
// agent.LeaseSteered) and then answers Msg.Client; a lost link answers
// NODE_UNAVAILABLE.
type RemoteSteer struct {
	Node, AgentID string
	Msg           *agent.LeaseSteer
	Holder        *actor.PID
}

// RemoteSteered is a person's steer of a child leased a run that this
// node claimed, whose outcome is recorded against the run on the parent's
// node Node (docs/protocol.md §10.3: every steer of a run is recorded
// there, the parent's and a person's). The claiming node's lease holder
// hands it the registry, which hands it the uplink (AttachUplink); ReplyTo
// (the child's wait for the record) is answered agent.SteerRecorded once
// the parent's node committed it, or at once when no link can carry it.
type RemoteSteered struct {
	Node    string
	Steered *agent.LeaseSteered
	ReplyTo *actor.PID
}

// RecordSteer is the parent's node's side of a RemoteSteered (or a
// steer of a run this node claimed itself): the uplink (or the run's
// lease holder) asks the registry, which asks the jobs coordinator, to
// record Steered at the run's job actor. The sender is answered agent.SteerRecorded
// once it is committed (or when no live job holds the run).
type RecordSteer struct{ Steered *agent.LeaseSteered }

// AttachTeam hands the registry the team coordinator, its sibling under
// the root, to which it forwards team.* commands (docs/protocol.md §10.4;
// the coordinator answers the client itself). Like AttachJobs, the
// registry watches it: once it stops, team.* is answered with CONFLICT,
// never lost.
type AttachTeam struct{ PID *actor.PID }

// DetachTeam stops forwarding to the team coordinator and closes Done once
// it has; the daemon sends it before it stops the coordinator.
type DetachTeam struct{ Done chan<- struct{} }

// AgentStates asks the registry for the runtime projections of the given
// agents (the workspace actor refuses to retire a workspace one of whose
// agents is live or busy). The registry responds to the sender with
// *AgentStatesResult.
type AgentStates struct{ AgentIDs []string }

// AgentStatesResult answers AgentStates: Infos holds the projection of
// every agent the registry serves, Unknown the ids it does not serve.
type AgentStatesResult struct {
	Infos   []protocol.AgentInfo
	Unknown []string
	// Attachments counts the connections attached to each agent of Infos
	// that has any.
	Attachments map[string]int
}

// RemoveAgents is agent.remove of AgentIDs asked by a sibling (the jobs
// coordinator's retention, docs/protocol.md §10.3 jobs.prune), with every
// check of agent.remove. The registry responds to the sender with
// *RemoveAgentsResult once the removal is done (session directories
// included).
type RemoveAgents struct{ AgentIDs []string }

// RemoveAgentsResult answers RemoveAgents: agent.remove's data, or Err
// (CONFLICT while the daemon shuts down).
type RemoveAgentsResult struct {
	Data protocol.AgentRemoveData
	Err  error
}

// LiveAgents asks the registry which agents it runs an actor for (the
// live ones, passivate.go): for tests and diagnostics. It responds to the
// sender with *LiveAgentsResult.
type LiveAgents struct{}

// LiveAgentsResult answers LiveAgents, the agent ids in no order.
type LiveAgentsResult struct{ AgentIDs []string }

// createResult carries the outcome of agent.create's I/O back to the actor.
type createResult struct {
	cmd *Command
	m   agentManifest
	err error
}

func (*Command) isRegistryMessage()          {}
func (*Drain) isRegistryMessage()            {}
func (*Adopt) isRegistryMessage()            {}
func (*AttachJobs) isRegistryMessage()       {}
func (*DetachJobs) isRegistryMessage()       {}
func (*createResult) isRegistryMessage()     {}
func (*AttachWorkspaces) isRegistryMessage() {}
func (*DetachWorkspaces) isRegistryMessage() {}
func (*AgentStates) isRegistryMessage()      {}
func (*AttachTeam) isRegistryMessage()       {}
func (*AttachUplink) isRegistryMessage()     {}
func (*RemoteSteer) isRegistryMessage()      {}
func (*RemoteSteered) isRegistryMessage()    {}
func (*RecordSteer) isRegistryMessage()      {}
func (*DetachTeam) isRegistryMessage()       {}
func (*RemoveAgents) isRegistryMessage()     {}
func (*LiveAgents) isRegistryMessage()       {}
