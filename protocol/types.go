package protocol

// Version is the protocol version this build speaks (docs/protocol.md §7).
const Version = "0.1.0"

// AgentStatus is an agent's activity state (docs/protocol.md §9.1).
type AgentStatus string

// Agent statuses.
const (
	StatusIdle                 AgentStatus = "idle"
	StatusStreaming            AgentStatus = "streaming"
	StatusWaitingForPermission AgentStatus = "waiting_for_permission"
	StatusWaitingForUI         AgentStatus = "waiting_for_ui"
	StatusCompacting           AgentStatus = "compacting"
	StatusError                AgentStatus = "error"
)

// Active reports whether the status is one that must never be reaped
// (docs/protocol.md §6.4: streaming, waiting_for_permission, waiting_for_ui,
// compacting).
func (s AgentStatus) Active() bool {
	switch s {
	case StatusStreaming, StatusWaitingForPermission, StatusWaitingForUI, StatusCompacting:
		return true
	}
	return false
}

// Valid reports whether s is a registered status.
func (s AgentStatus) Valid() bool {
	return s == StatusIdle || s == StatusError || s.Active()
}

// RuntimeState is the state of an Agent's Runtime generation.
//
// The spec uses the type (AgentInfo, agent_status_changed) and pins only
// "failed" (agent_exited). Shard's choice: a Runtime is "stopped" (no process;
// restored on demand), "starting" (spawned, not yet ready), "running" (hello
// and first sync seen), "stopping" (teardown in progress) or "failed" (the
// last generation crashed or never became ready; retry is safe).
type RuntimeState string

// Runtime states.
const (
	RuntimeStopped  RuntimeState = "stopped"
	RuntimeStarting RuntimeState = "starting"
	RuntimeRunning  RuntimeState = "running"
	RuntimeStopping RuntimeState = "stopping"
	RuntimeFailed   RuntimeState = "failed"
)

// Image is an inline image attachment (base64 data).
type Image struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	MimeType string `json:"mime_type"`
}

// ModelDescriptor describes a selectable model (secret-free).
type ModelDescriptor struct {
	ID            string `json:"id"`
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	ContextWindow int    `json:"context_window,omitempty"`
}

// ModeDescriptor describes a mode in the list_modes catalog.
type ModeDescriptor struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Message is one conversation message of the live window.
type Message struct {
	ID      string         `json:"id"`
	Role    string         `json:"role"` // "user" | "assistant"
	Content []ContentBlock `json:"content"`
}

// Content block types.
const (
	BlockText       = "text"
	BlockToolCall   = "tool_call"
	BlockToolResult = "tool_result"
	BlockThinking   = "thinking"
)

// ContentBlock is the tagged union of message content (docs/protocol.md §11).
// Type selects which of the remaining fields are meaningful.
type ContentBlock struct {
	Type       string             `json:"type"`
	Text       string             `json:"text,omitempty"`         // text, thinking
	ID         string             `json:"id,omitempty"`           // tool_call
	Name       string             `json:"name,omitempty"`         // tool_call
	Args       map[string]any     `json:"args,omitempty"`         // tool_call
	ToolCallID string             `json:"tool_call_id,omitempty"` // tool_result
	Content    *ToolResultContent `json:"content,omitempty"`      // tool_result
	IsError    bool               `json:"is_error,omitempty"`     // tool_result
	// The image block (BlockImage, a Shard extension, docs/protocol.md
	// §13 P4) names a stored image: its MIME type, the SHA-256 of its bytes
	// (lower-case hex) and their length. Data, its base64, is never on the
	// wire: the runtime fills it only for its own provider calls; clients
	// fetch the bytes with get_image.
	MimeType string `json:"mime_type,omitempty"` // image
	SHA256   string `json:"sha256,omitempty"`    // image
	Size     int64  `json:"size,omitempty"`      // image
	Data     string `json:"data,omitempty"`      // image, inside the runtime only
}

// ToolResultContent is the tagged union of tool output (docs/protocol.md §11):
// kind "text" (Text), "json" (Value) or "error" (Message).
type ToolResultContent struct {
	Kind    string `json:"kind"`
	Text    string `json:"text,omitempty"`
	Value   any    `json:"value,omitempty"`
	Message string `json:"message,omitempty"`
}

// RenderDescriptor is the closed set of client-neutral render hints
// (docs/protocol.md §11). Kind selects the meaningful fields.
type RenderDescriptor struct {
	Kind string `json:"kind"`

	Text       string      `json:"text,omitempty"`       // text, code
	Pairs      []KV        `json:"pairs,omitempty"`      // kv
	Path       string      `json:"path,omitempty"`       // diff, code
	Hunks      []Hunk      `json:"hunks,omitempty"`      // diff
	Root       *TreeNode   `json:"root,omitempty"`       // tree
	Label      string      `json:"label,omitempty"`      // progress, status
	Current    *int64      `json:"current,omitempty"`    // progress
	Total      *int64      `json:"total,omitempty"`      // progress
	Tone       string      `json:"tone,omitempty"`       // status
	Command    string      `json:"command,omitempty"`    // command
	ExitCode   *int        `json:"exitCode,omitempty"`   // command
	DurationMs *int64      `json:"durationMs,omitempty"` // command
	Paths      []PathEntry `json:"paths,omitempty"`      // path_list
	Lang       string      `json:"lang,omitempty"`       // code
}

// KV is one pair of a "kv" render descriptor.
type KV struct {
	K string `json:"k"`
	V string `json:"v"`
}

// Hunk is one unified-diff hunk. The contract leaves it underspecified
// (docs/protocol.md §13, P6); Shard uses the standard unified-diff header
// numbers plus the raw lines.
type Hunk struct {
	OldStart int      `json:"old_start"`
	OldLines int      `json:"old_lines"`
	NewStart int      `json:"new_start"`
	NewLines int      `json:"new_lines"`
	Lines    []string `json:"lines"`
}

// TreeNode is a nested-list node (docs/protocol.md §13, P6: underspecified;
// name + children).
type TreeNode struct {
	Name     string     `json:"name"`
	Children []TreeNode `json:"children,omitempty"`
}

// PathEntry is one entry of a "path_list" render descriptor.
type PathEntry struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // "file" | "dir"
	Hint string `json:"hint,omitempty"`
}

// Usage counts tokens for a provider call or a turn.
type Usage struct {
	Input         int64   `json:"input"`
	Output        int64   `json:"output"`
	CacheRead     int64   `json:"cache_read,omitempty"`
	CacheWrite    int64   `json:"cache_write,omitempty"`
	Cost          float64 `json:"cost,omitempty"`
	ContextTokens int64   `json:"context_tokens,omitempty"`
	Model         string  `json:"model,omitempty"`
}

// AgentInfo is the public projection of an Agent (docs/protocol.md §11). It
// never carries prompts, task text or credentials, but for Title: an
// automatic title is the first line of the first prompt, cut (§10.1).
type AgentInfo struct {
	AgentID        string       `json:"agent_id"`
	Name           string       `json:"name,omitempty"`
	Cwd            string       `json:"cwd"`
	Model          string       `json:"model,omitempty"`
	Provider       string       `json:"provider,omitempty"`
	Mode           string       `json:"mode,omitempty"`
	Status         AgentStatus  `json:"status"`
	RuntimeState   RuntimeState `json:"runtime_state"`
	CreatedAt      int64        `json:"created_at"`
	Usage          *Usage       `json:"usage,omitempty"`
	ParentAgentID  string       `json:"parent_agent_id,omitempty"`
	Alias          string       `json:"alias,omitempty"`
	DefinitionName string       `json:"definition_name,omitempty"`
	DisplayName    string       `json:"display_name,omitempty"`
	// WorkspaceID (additive) names the workspace the agent works
	// in: one of workspace.create/attach, or of an isolated subagent run.
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Runtime is the runtime profile the agent runs on ("shard" for the
	// reference runtime). Additive (docs/protocol.md §10.1).
	Runtime string `json:"runtime,omitempty"`
	// Tools and Skills (additive, docs/protocol.md §10.1) are the agent's
	// tool limit and skills, as agent.create or its parent set them;
	// omitted: every tool, no skill.
	Tools  []string `json:"tools,omitempty"`
	Skills []string `json:"skills,omitempty"`
	// MCPServers (additive, docs/protocol.md §10.1) names the agent's own
	// MCP servers (agent.create's mcp_servers or its parent's); only the
	// names, since their env and headers may hold secrets.
	MCPServers []string `json:"mcp_servers,omitempty"`
	// AttachedClients (additive) is how many client connections
	// are attached to the agent (interactive or observer, attaching
	// included), as the agent's actor counts them: the dashboard's
	// "attached clients". Not omitempty: 0 ("nobody watches") is an answer,
	// and a client tells a daemon that predates the field by its absence.
	// The contract's AgentInfo (docs/protocol.md §11) has no such field;
	// this is its name.
	AttachedClients int `json:"attached_clients"`
	// Title (additive) is the name a person reads when nobody named the
	// agent: automatic from its first accepted prompt, or set with
	// agent.update (docs/protocol.md §10.1).
	Title string `json:"title,omitempty"`
	// Node (additive, docs/protocol.md §10.1) is the cluster node that
	// hosts the agent: its runtime is a process there and its cwd a path
	// there. Omitted on a single shardd.
	Node string `json:"node,omitempty"`
}

// PermissionDetail is server-authored presentation data of a permission request.
type PermissionDetail struct {
	Label  string `json:"label,omitempty"`
	Value  string `json:"value"`
	Format string `json:"format,omitempty"` // text | command | path | code
}

// PermissionChoice is one structured, server-defined answer to a permission request.
type PermissionChoice struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Accelerator string `json:"accelerator,omitempty"`
	Intent      string `json:"intent"` // allow | persist | deny
}

// Permission decisions (legacy semantic form).
const (
	DecisionAllow       = "allow"
	DecisionAllowAlways = "allow_always"
	DecisionDeny        = "deny"
)

// Headless policies (agent.create headless_policy).
const (
	HeadlessDeny               = "deny"
	HeadlessAllowIfRuleMatches = "allow_if_rule_matches"
	HeadlessQueue              = "queue"
)

// ValidHeadlessPolicy reports whether p is a registered headless policy.
func ValidHeadlessPolicy(p string) bool {
	return p == HeadlessDeny || p == HeadlessAllowIfRuleMatches || p == HeadlessQueue
}

// Attachment roles (agent.attach role).
const (
	RoleInteractive = "interactive"
	RoleObserver    = "observer"
)

// JobState is the derived state of a subagent job (docs/protocol.md §11.2).
type JobState string

// Job states.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobCompleted JobState = "completed"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// RunState is the state of one run of a subagent job (docs/protocol.md §11.2).
type RunState string

// Run states.
const (
	RunQueued      RunState = "queued"
	RunStarting    RunState = "starting"
	RunActive      RunState = "active"
	RunCompleted   RunState = "completed"
	RunFailed      RunState = "failed"
	RunTimedOut    RunState = "timed_out"
	RunCancelled   RunState = "cancelled"
	RunInterrupted RunState = "interrupted"
)

// Terminal reports whether a run in state s can never change again.
func (s RunState) Terminal() bool {
	switch s {
	case RunCompleted, RunFailed, RunTimedOut, RunCancelled, RunInterrupted:
		return true
	}
	return false
}

// JobStrategy is how a job's runs are scheduled.
type JobStrategy string

// Job strategies.
const (
	StrategySingle   JobStrategy = "single"
	StrategyParallel JobStrategy = "parallel"
	StrategyChain    JobStrategy = "chain"
)

// RunUsage is the token usage recorded for a run.
type RunUsage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// RunSnapshot is the public view of one run (docs/protocol.md §11.2).
// FinalText is set only for the owning parent.
type RunSnapshot struct {
	JobID          string    `json:"job_id"`
	RunID          string    `json:"run_id"`
	Index          int       `json:"index"`
	Name           string    `json:"name"`
	AgentID        string    `json:"agent_id,omitempty"`
	Alias          string    `json:"alias,omitempty"`
	DefinitionName string    `json:"definition_name,omitempty"`
	DisplayName    string    `json:"display_name,omitempty"`
	State          RunState  `json:"state"`
	Deadline       int64     `json:"deadline,omitempty"`
	FinalText      string    `json:"final_text,omitempty"`
	Usage          *RunUsage `json:"usage,omitempty"`
	Error          string    `json:"error,omitempty"`
	StartedAt      int64     `json:"started_at,omitempty"`
	EndedAt        int64     `json:"ended_at,omitempty"`
	// Workspace (additive) is the run's workspace binding under
	// isolation "workspace".
	Workspace *RunWorkspace `json:"workspace,omitempty"`
	// Steers (additive) are the steers sent into the run and how each
	// resolved, oldest first (at most MaxRunSteers): the parent's
	// subagent.steer and a person's direct steer of the leased child
	// (docs/protocol.md §10.3 "recorded against the run"). The message
	// text is private and never appears.
	Steers []RunSteer `json:"steers,omitempty"`
	// Node (additive) is the cluster node the run runs on: the parent's
	// own, or, for a run any node may take, the node that claimed it
	// (docs/protocol.md §10.3). Absent on a single shardd and while a run
	// waits to be claimed.
	Node string `json:"node,omitempty"`
}

// RunSteer records one steer of a run: who sent it, and whether it reached
// the model in the run's turn (injected) or was refused (conflict).
type RunSteer struct {
	CorrelationID string `json:"correlation_id"`
	// Source is "parent" (subagent.steer) or "client" (a person's steer
	// sent to the leased child directly).
	Source string `json:"source"`
	// Status is "injected" or "conflict".
	Status string `json:"status"`
	TurnID string `json:"turn_id,omitempty"`
	At     int64  `json:"at"`
}

// Sources and statuses of a RunSteer.
const (
	SteerSourceParent = "parent"
	SteerSourceClient = "client"
	SteerInjected     = "injected"
	SteerConflict     = "conflict"
)

// MaxRunSteers bounds the steers a run record keeps (the newest stay).
const MaxRunSteers = 32

// RunWorkspace is a run's workspace binding: the workspace, its branch
// and worktree, and, once the run ended, the workspace's diff stat
// against its merge-base at that moment (workspace.diff's stats).
type RunWorkspace struct {
	WorkspaceID string     `json:"workspace_id"`
	Branch      string     `json:"branch,omitempty"`
	Cwd         string     `json:"cwd,omitempty"`
	DiffStat    *DiffStats `json:"diff_stat,omitempty"`
}

// JobSnapshot is the public view of a job (docs/protocol.md §11.2); task
// specs are private and never part of it.
type JobSnapshot struct {
	JobID         string        `json:"job_id"`
	ParentAgentID string        `json:"parent_agent_id"`
	Strategy      JobStrategy   `json:"strategy"`
	State         JobState      `json:"state"`
	Runs          []RunSnapshot `json:"runs"`
	ChainStep     *int          `json:"chain_step,omitempty"`
	StoppedAt     int64         `json:"stopped_at,omitempty"`
	CreatedAt     int64         `json:"created_at"`
	EndedAt       int64         `json:"ended_at,omitempty"`
}

// MarshalJSON writes a tool_call block with its `args` object even when it is
// empty (the protocol requires it, docs/protocol.md §11), and every other
// block without the fields of other kinds.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if b.Type == BlockToolCall {
		args := b.Args
		if args == nil {
			args = map[string]any{}
		}
		return Marshal(struct {
			Type string         `json:"type"`
			ID   string         `json:"id"`
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		}{b.Type, b.ID, b.Name, args})
	}
	type plain ContentBlock
	// Marshal, not json.Marshal: the enclosing encoder copies this output
	// verbatim, so it must already be free of HTML escapes.
	return Marshal(plain(b))
}

// StatusDetailRetrying is the detail of the status event a runtime writes
// when a failed provider request is about to be retried; the status itself
// does not change. The daemon shows it as agent_activity phase "retrying"
// (docs/protocol.md §10.2) until the next activity.
const StatusDetailRetrying = "retrying"
