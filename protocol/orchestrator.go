package protocol

// Orchestrator command types (docs/protocol.md §10.1, §10.1a, §10.3). They
// never carry a routing agent_id.
const (
	TypeAgentList      = "agent.list"
	TypeAgentCreate    = "agent.create"
	TypeAgentAttach    = "agent.attach"
	TypeAgentDetach    = "agent.detach"
	TypeAgentTerminate = "agent.terminate"
	TypeAgentKill      = "agent.kill"
	TypeAgentStatus    = "agent.status"
	TypeDaemonShutdown = "daemon.shutdown"

	// The workspace command types (§10.1a) are in workspace.go.

	TypeSubagentCreate   = "subagent.create"
	TypeSubagentWait     = "subagent.wait"
	TypeSubagentSteer    = "subagent.steer"
	TypeSubagentRelaunch = "subagent.relaunch"
	TypeSubagentStatus   = "subagent.status"
	TypeSubagentStop     = "subagent.stop"

	// TypeWSTicket is a Shard extension: over the unix socket (local trust,
	// §4.2) a local process mints a single-use WebSocket upgrade ticket.
	TypeWSTicket = "ws.ticket"

	// TypeDaemonStatus is a Shard extension: a snapshot of the daemon
	// itself for operators (shardctl status).
	TypeDaemonStatus = "daemon.status"
)

// Orchestrator event types (docs/protocol.md §10.2, §10.3).
const (
	TypeAgentSpawned       = "agent_spawned"
	TypeAgentExited        = "agent_exited"
	TypeAgentStatusChanged = "agent_status_changed"
	TypeAgentActivity      = "agent_activity"
	TypeSubagentRunChanged = "subagent_run_changed"
	// The workspace event types (§10.2) are in workspace.go.
)

// ---- Agent lifecycle commands (§10.1) ----

// AgentList lists durable agents, oldest first (created_at, then
// agent_id). Without any member it lists every agent. The members are
// additive (docs/protocol.md §10.1, §13 "Paged lists"): filters a person
// needs on a store that grew for months, and paging.
type AgentList struct {
	Header
	// Active keeps agents that are live now: a runtime starting, running
	// or stopping, or a client attached. A stopped agent with a queued
	// run is not active until its runtime starts.
	Active bool `json:"active,omitempty"`
	// ParentAgentID keeps the managed children of one parent.
	ParentAgentID string `json:"parent_agent_id,omitempty"`
	// SinceMs keeps agents created at or after this epoch-ms time.
	SinceMs int64 `json:"since_ms,omitempty"`
	// Limit bounds the page; 0 means no bound.
	Limit int `json:"limit,omitempty"`
	// Cursor is a next_cursor of an earlier answer with the same filters:
	// the page starts after the agent it names.
	Cursor string `json:"cursor,omitempty"`
}

// AgentListData is the data of an agent.list or agent.status response.
type AgentListData struct {
	Agents []AgentInfo `json:"agents"`
	// NextCursor (additive) is set while more agents match: pass it as
	// cursor to read the next page. Absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// LaunchPolicy bounds what a managed child may launch in turn.
type LaunchPolicy struct {
	MaxTasks int `json:"maxTasks"`
	MaxDepth int `json:"maxDepth"`
}

// Modes of the Shard runtime (its list_modes catalog): build may run every
// tool, mutating ones through the permission gate; plan refuses mutating
// tools. A create naming any other mode is refused before anything is
// stored: the runtime would refuse to start with it, and the
// agent could never run.
const (
	ModeBuild = "build"
	ModePlan  = "plan"
)

// Modes lists the modes a create may name, in catalog order.
func Modes() []string { return []string{ModeBuild, ModePlan} }

// checkMode refuses a mode the runtime does not have; empty means the
// daemon's default mode.
func checkMode(field, v string) error { return oneOf(field, v, Modes()...) }

// AgentCreate creates a durable agent. The managed-child manifest fields
// (system_prompt through names) are decoded so that Validate can name them
// in its refusal: clients must not pass them (docs/protocol.md §10.1).
type AgentCreate struct {
	Header
	Cwd            string        `json:"cwd"`
	SessionID      string        `json:"session_id,omitempty"`
	Model          string        `json:"model,omitempty"`
	Provider       string        `json:"provider,omitempty"`
	Mode           string        `json:"mode,omitempty"`
	Tools          []string      `json:"tools,omitempty"`
	Skills         []string      `json:"skills,omitempty"`
	HeadlessPolicy string        `json:"headless_policy,omitempty"`
	Name           string        `json:"name,omitempty"`
	ParentAgentID  string        `json:"parent_agent_id,omitempty"`
	SystemPrompt   string        `json:"system_prompt,omitempty"`
	Depth          *int          `json:"depth,omitempty"`
	LaunchPolicy   *LaunchPolicy `json:"launch_policy,omitempty"`
	Alias          string        `json:"alias,omitempty"`
	DefinitionName string        `json:"definition_name,omitempty"`
	DisplayName    string        `json:"display_name,omitempty"`
	Names          []string      `json:"names,omitempty"`
	// Runtime names the runtime profile (config runtimes:) the agent runs
	// on; "" is the default profile, "shard" (the reference runtime).
	// Additive (docs/protocol.md §10.1); an unknown name is INVALID_REQUEST.
	Runtime string `json:"runtime,omitempty"`
	// MCPServers (additive, docs/protocol.md §10.1) are MCP servers, by
	// name, whose tools the reference runtime offers this agent as
	// <server>__<tool>, over its profile's and the daemon's of the same
	// name; its subagents inherit them. Other runtimes refuse them.
	MCPServers map[string]MCPServer `json:"mcp_servers,omitempty"`
	// Node (additive, docs/protocol.md §10.1) names the cluster node the
	// agent is to live on: the command is forwarded there. "" is the node
	// the client is connected to; a name that is no member is
	// INVALID_REQUEST, a dead node NODE_UNAVAILABLE, and any name on a
	// single shardd INVALID_REQUEST.
	Node string `json:"node,omitempty"`
}

// AgentCreateData is the data of an agent.create response.
type AgentCreateData struct {
	AgentID string `json:"agent_id"`
}

// AgentAttach subscribes the connection to an agent's stream. The target is
// a payload field here, as in the protocol's shape (docs/protocol.md
// §10.1).
type AgentAttach struct {
	Header
	Role string `json:"role,omitempty"`
}

// AgentAttachData is the data of an agent.attach response.
type AgentAttachData struct {
	Status AgentStatus `json:"status"`
	Info   AgentInfo   `json:"info"`
}

// AgentDetach unsubscribes the connection from an agent.
type AgentDetach struct{ Header }

// AgentTerminate is client-owned teardown of an agent's runtime.
type AgentTerminate struct{ Header }

// AgentTerminateData is the data of an agent.terminate response.
type AgentTerminateData struct {
	Deferred bool `json:"deferred"`
}

// AgentKill stops an agent's runtime by escalation (or at once with Force).
type AgentKill struct {
	Header
	Force bool `json:"force,omitempty"`
}

// AgentStatusCmd polls one (AgentID set) or all agents.
type AgentStatusCmd struct{ Header }

// DaemonShutdown stops the daemon.
type DaemonShutdown struct {
	Header
	Force bool `json:"force,omitempty"`
}

// DaemonStatus asks for the daemon's own status (Shard extension).
type DaemonStatus struct{ Header }

// DaemonStatusData is the data of a daemon.status response.
type DaemonStatusData struct {
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocol_version"`
	PID             int    `json:"pid"`
	StartedAt       int64  `json:"started_at"`
	UptimeMs        int64  `json:"uptime_ms"`
	Home            string `json:"home"`
	WebURL          string `json:"web_url,omitempty"`
	Connections     int    `json:"connections"`
	// AgentsByRuntimeState counts agents per runtime state.
	AgentsByRuntimeState map[RuntimeState]int `json:"agents_by_runtime_state"`
	// AgentsByStatus counts agents per status.
	AgentsByStatus map[AgentStatus]int `json:"agents_by_status"`
	StoreBytes     int64               `json:"store_bytes"`
}

// WSTicket mints a WebSocket upgrade ticket (unix socket only).
type WSTicket struct{ Header }

// WSTicketData is the data of a ws.ticket response. The ticket is a secret:
// it is never logged or persisted.
type WSTicketData struct {
	Ticket    string `json:"ticket"`
	ExpiresAt int64  `json:"expires_at"`
	URL       string `json:"url"`
}

// ---- Workspace commands (§10.1a): see workspace.go ----

// ---- Orchestrator events (§10.2) ----

// AgentSpawned reports a newly created agent.
type AgentSpawned struct {
	Header
	Info AgentInfo `json:"info"`
}

// AgentExited reports a runtime generation that ended unexpectedly.
type AgentExited struct {
	Header
	RuntimeState RuntimeState `json:"runtime_state"`
	Reason       string       `json:"reason"`
	ExitCode     *int         `json:"exit_code,omitempty"`
}

// AgentStatusChanged reports a status or runtime-state change.
type AgentStatusChanged struct {
	Header
	Status       AgentStatus  `json:"status"`
	RuntimeState RuntimeState `json:"runtime_state"`
	Detail       string       `json:"detail,omitempty"`
}

// Activity phases of agent_activity.
const (
	PhaseIdle       = "idle"
	PhaseThinking   = "thinking"
	PhaseStreaming  = "streaming"
	PhaseTool       = "tool"
	PhaseWaiting    = "waiting"
	PhaseCompacting = "compacting"
	PhaseRetrying   = "retrying"
	PhaseError      = "error"
)

// AgentActivity is the global, sanitized activity overview: never prompts,
// text, arguments, results or paths.
type AgentActivity struct {
	Header
	Timestamp int64       `json:"timestamp"`
	Phase     string      `json:"phase"`
	Status    AgentStatus `json:"status"`
	ToolName  string      `json:"tool_name,omitempty"`
}

// ---- Subagent job commands (§10.3) ----

// TaskSpec is one named task of a batch subagent.create. Task text is
// private: it never appears in responses, events or logs.
type TaskSpec struct {
	Name string `json:"name"`
	Task string `json:"task"`
}

// SubagentCreate accepts a durable background job.
type SubagentCreate struct {
	Header
	ParentAgentID string      `json:"parent_agent_id"`
	Name          string      `json:"name,omitempty"`
	Task          string      `json:"task,omitempty"`
	Tasks         []TaskSpec  `json:"tasks,omitempty"`
	Strategy      JobStrategy `json:"strategy,omitempty"`
	Model         string      `json:"model,omitempty"`
	Provider      string      `json:"provider,omitempty"`
	Mode          string      `json:"mode,omitempty"`
	// RequestID makes create idempotent, so a parent may retry a create
	// whose answer it lost: a repeat returns the original job.
	RequestID string `json:"request_id,omitempty"`
	// Isolation (additive, docs/protocol.md §10.3): IsolationNone (default,
	// "") runs every child in the parent's cwd; IsolationWorkspace gives each
	// run a git worktree of its own on a new branch from the parent's
	// repository (a chain's steps share one, in order).
	Isolation Isolation `json:"isolation,omitempty"`
	// Runtime names the runtime profile the children run on; "" is the
	// parent's. Additive (docs/protocol.md §10.1); an unknown name is
	// INVALID_REQUEST.
	Runtime string `json:"runtime,omitempty"`
	// Tools and Skills (additive, docs/protocol.md §10.1) narrow what the
	// children get; omitted, they inherit the parent's. A child never gets
	// a tool or skill its parent lacks: naming one is PERMISSION_DENIED
	// (tools) or INVALID_REQUEST (skills).
	Tools  []string `json:"tools,omitempty"`
	Skills []string `json:"skills,omitempty"`
}

// Isolation says where a subagent job's children work.
type Isolation string

// The isolations subagent.create accepts.
const (
	IsolationNone      Isolation = "none"
	IsolationWorkspace Isolation = "workspace"
)

// CreatedRun is one run in a subagent.create response.
type CreatedRun struct {
	RunID          string   `json:"run_id"`
	Index          int      `json:"index"`
	Name           string   `json:"name"`
	State          RunState `json:"state"`
	AgentID        string   `json:"agent_id"`
	Alias          string   `json:"alias"`
	DefinitionName string   `json:"definition_name,omitempty"`
	DisplayName    string   `json:"display_name,omitempty"`
	// WorkspaceID (additive) names the run's workspace under isolation
	// "workspace".
	WorkspaceID string `json:"workspace_id,omitempty"`
}

// SubagentCreateData is the data of a subagent.create response.
type SubagentCreateData struct {
	JobID    string       `json:"job_id"`
	Strategy JobStrategy  `json:"strategy"`
	Runs     []CreatedRun `json:"runs"`
}

// SubagentWait waits for handles to become terminal. Timeout is in seconds;
// nil waits forever and 0 polls.
type SubagentWait struct {
	Header
	ParentAgentID string   `json:"parent_agent_id"`
	Handles       []string `json:"handles"`
	Mode          string   `json:"mode,omitempty"`
	Timeout       *float64 `json:"timeout,omitempty"`
}

// SubagentWaitData is the data of a subagent.wait response. AggregateState
// is a JobState or "mixed".
type SubagentWaitData struct {
	TimedOut       bool          `json:"timed_out"`
	AggregateState string        `json:"aggregate_state"`
	Runs           []RunSnapshot `json:"runs"`
}

// SubagentSteer steers an actively executing run.
type SubagentSteer struct {
	Header
	ParentAgentID string `json:"parent_agent_id"`
	Target        string `json:"target"`
	Message       string `json:"message"`
}

// SubagentSteerData is the data of a subagent.steer response.
type SubagentSteerData struct {
	Status        string `json:"status"` // injected | conflict
	RunID         string `json:"run_id"`
	TurnID        string `json:"turn_id,omitempty"`
	CorrelationID string `json:"correlation_id"`
}

// SubagentRelaunch starts a new job on an existing idle child.
type SubagentRelaunch struct {
	Header
	ParentAgentID string `json:"parent_agent_id"`
	Target        string `json:"target"`
	Task          string `json:"task"`
}

// SubagentRelaunchData is the data of a subagent.relaunch response.
type SubagentRelaunchData struct {
	JobID          string   `json:"job_id"`
	RunID          string   `json:"run_id"`
	AgentID        string   `json:"agent_id"`
	Alias          string   `json:"alias"`
	DefinitionName string   `json:"definition_name,omitempty"`
	DisplayName    string   `json:"display_name,omitempty"`
	State          RunState `json:"state"`
}

// SubagentStatus asks for authoritative agent/job/run snapshots.
type SubagentStatus struct {
	Header
	ParentAgentID string   `json:"parent_agent_id"`
	Targets       []string `json:"targets,omitempty"`
}

// SubagentAgentStatus is one agent entry of a subagent.status response.
type SubagentAgentStatus struct {
	AgentID        string       `json:"agent_id"`
	Alias          string       `json:"alias,omitempty"`
	DefinitionName string       `json:"definition_name,omitempty"`
	DisplayName    string       `json:"display_name,omitempty"`
	ParentAgentID  string       `json:"parent_agent_id,omitempty"`
	Run            *RunSnapshot `json:"run,omitempty"`
}

// SubagentStatusData is the data of a subagent.status response.
type SubagentStatusData struct {
	Agents []SubagentAgentStatus `json:"agents"`
	Jobs   []JobSnapshot         `json:"jobs,omitempty"`
}

// SubagentStop cancels a job or a run.
type SubagentStop struct {
	Header
	ParentAgentID string `json:"parent_agent_id"`
	Handle        string `json:"handle"`
}

// SubagentParent names the parent on whose behalf a subagent.* command
// acts (its parent_agent_id), "" for any other command. The daemon that
// holds the parent's jobs serves them, so both the jobs and, in a
// cluster, the gateway routing a command to the parent's node read it.
func SubagentParent(cmd Command) string {
	switch m := cmd.(type) {
	case *SubagentCreate:
		return m.ParentAgentID
	case *SubagentWait:
		return m.ParentAgentID
	case *SubagentSteer:
		return m.ParentAgentID
	case *SubagentRelaunch:
		return m.ParentAgentID
	case *SubagentStatus:
		return m.ParentAgentID
	case *SubagentStop:
		return m.ParentAgentID
	}
	return ""
}

// CancelledRun is one entry of a subagent.stop response.
type CancelledRun struct {
	RunID   string   `json:"run_id"`
	AgentID string   `json:"agent_id,omitempty"`
	State   RunState `json:"state"`
}

// SubagentStopData is the data of a subagent.stop response.
type SubagentStopData struct {
	Cancelled []CancelledRun `json:"cancelled"`
	JobID     string         `json:"job_id,omitempty"`
}

// SubagentRunChanged reports a persisted run-state transition to the owning
// parent's connections.
type SubagentRunChanged struct {
	Header
	ParentAgentID  string   `json:"parent_agent_id"`
	JobID          string   `json:"job_id"`
	RunID          string   `json:"run_id"`
	Alias          string   `json:"alias,omitempty"`
	DefinitionName string   `json:"definition_name,omitempty"`
	DisplayName    string   `json:"display_name,omitempty"`
	State          RunState `json:"state"`
	PreviousState  RunState `json:"previous_state,omitempty"`
	Error          string   `json:"error,omitempty"`
	EndedAt        int64    `json:"ended_at,omitempty"`
}

// ---- Operator job views (Shard extension, for shardctl) ----
//
// Operators inspect every parent's jobs. These views add what an operator
// needs to diagnose a run (queue wait, stop stage, exit status, the step that
// halted a chain) and, like every projection, never carry task text. They
// carry no final_text either: that goes only to the owning parent.

// Operator command types.
const (
	TypeJobsList = "jobs.list"
	TypeJobsShow = "jobs.show"
)

// JobsList lists jobs, newest first (job_id descending: job ids are
// ULIDs, so this is creation order, docs/protocol.md §13 "Paged lists").
type JobsList struct {
	Header
	ParentAgentID string   `json:"parent_agent_id,omitempty"`
	State         JobState `json:"state,omitempty"`
	// SinceMs keeps jobs created at or after this epoch-ms time.
	SinceMs int64 `json:"since_ms,omitempty"`
	// Stuck keeps jobs with a stuck run (see OpRun.Stuck).
	Stuck bool `json:"stuck,omitempty"`
	// Limit bounds the page; 0 means no bound.
	Limit int `json:"limit,omitempty"`
	// Cursor (additive) is a next_cursor of an earlier answer with the
	// same filters: the page starts after the job it names.
	Cursor string `json:"cursor,omitempty"`
}

// JobsShow describes one job: a job_id, a run_id, or an agent id/alias
// (its current-or-latest run's job).
type JobsShow struct {
	Header
	Handle string `json:"handle"`
}

// OpRun is the operator's view of a run.
type OpRun struct {
	RunSnapshot
	QueuedAt        int64 `json:"queued_at"`
	QueueWaitMs     int64 `json:"queue_wait_ms,omitempty"`
	StopRequestedAt int64 `json:"stop_requested_at,omitempty"`
	// StopStage is the escalation stage a stop reached ("abort", "term",
	// "kill"): the current one while the run is live, the one that ended
	// it once terminal.
	StopStage  string `json:"stop_stage,omitempty"`
	ExitStatus string `json:"exit_status,omitempty"`
	// Stuck: a stop was requested long ago and the run is still not
	// terminal, or it has been starting for too long.
	Stuck bool `json:"stuck,omitempty"`
}

// OpJob is the operator's view of a job.
type OpJob struct {
	JobID         string      `json:"job_id"`
	ParentAgentID string      `json:"parent_agent_id"`
	Strategy      JobStrategy `json:"strategy"`
	State         JobState    `json:"state"`
	CreatedAt     int64       `json:"created_at"`
	EndedAt       int64       `json:"ended_at,omitempty"`
	StoppedAt     int64       `json:"stopped_at,omitempty"`
	ChainStep     *int        `json:"chain_step,omitempty"`
	// HaltedBy is the run_id of the chain step that halted the chain.
	HaltedBy string  `json:"halted_by,omitempty"`
	Runs     []OpRun `json:"runs"`
	// Node (additive) is the cluster node holding the job, in a cluster's
	// jobs.list (docs/protocol.md §13 "Jobs and workspaces of other
	// nodes"); absent on a single shardd.
	Node string `json:"node,omitempty"`
}

// JobsListData is the data of a jobs.list response.
type JobsListData struct {
	Jobs []OpJob `json:"jobs"`
	// NextCursor (additive) is set while more jobs match: pass it as
	// cursor to read the next page. Absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	// UnavailableNodes (additive) are the cluster's nodes whose jobs are
	// missing from the answer: declared dead, or silent past the bound
	// (docs/protocol.md §13 "Jobs and workspaces of other nodes").
	UnavailableNodes []string `json:"unavailable_nodes,omitempty"`
}

// TypeDaemonCheck is a Shard extension for `shardctl doctor`: the daemon
// checks what only it can while it holds the database.
const TypeDaemonCheck = "daemon.check"

// DaemonCheck asks the daemon to run its self-checks.
type DaemonCheck struct{ Header }

// DaemonCheckData is the data of a daemon.check response.
type DaemonCheckData struct {
	// StoreOK reports a clean bbolt consistency check; StoreError says
	// what failed otherwise.
	StoreOK    bool   `json:"store_ok"`
	StoreError string `json:"store_error,omitempty"`
	// SchemaVersion is the database's schema version.
	SchemaVersion int `json:"schema_version"`
}

// TypeModelsList is a Shard extension (docs/protocol.md §13, providers):
// the daemon's model catalog, every model of every configured provider,
// with the default an agent created without provider or model runs on. A
// client picks provider and model for agent.create, subagent.create and
// workspace.create/attach from it before any agent exists; list_models is
// an agent's own catalog and needs its runtime running.
const TypeModelsList = "models.list"

// ModelsList asks for the daemon's model catalog.
type ModelsList struct{ Header }

// ModelsListData is the data of a models.list response. Descriptors are
// secret-free, as list_models' are: no base URLs, keys or key variables.
type ModelsListData struct {
	// Models are the models of every provider, the default provider's
	// first, in configuration order.
	Models []ModelDescriptor `json:"models"`
	// Default is the model of an agent created without provider or model.
	Default ModelDescriptor `json:"default"`
}

// TypeJobsPrune removes finished jobs (Shard extension, docs/protocol.md
// §10.3): retention an operator controls (`shardctl jobs prune`).
const TypeJobsPrune = "jobs.prune"

// JobsPrune removes the finished jobs whose end is at least OlderThanMs
// ago — every run terminal, every completion report delivered, no
// subagent.wait on them — and with them their children that nothing else
// references, with the checks of agent.remove (a child that is live, or
// that another job or an undelivered report still names, is kept, and so is
// its job). DryRun answers what would go and changes nothing.
type JobsPrune struct {
	Header
	OlderThanMs int64 `json:"older_than_ms"`
	DryRun      bool  `json:"dry_run,omitempty"`
}

// JobsPruneData answers jobs.prune: the jobs and agents removed (or, for a
// dry run, that would be), oldest job first. Agent removal may still
// refuse a child that became live meanwhile: it is then left out and kept.
type JobsPruneData struct {
	JobIDs   []string `json:"job_ids"`
	AgentIDs []string `json:"agent_ids"`
	DryRun   bool     `json:"dry_run,omitempty"`
}

// Validate implements Command.
func (c *JobsPrune) Validate() error {
	if c.OlderThanMs < 0 {
		return invalid("older_than_ms", "must not be negative")
	}
	return nil
}
