package records

import (
	"encoding/json"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// The record kinds replicated across the cluster. Their JSON field names
// follow the single node's store records (store.Agent, store.Job,
// store.Run) wherever the meaning is the same, so one record can move
// between the two layers field for field; what only a cluster needs (the
// node, its incarnation, a claim's lease) is added beside them.
//
// The JSON names are the stored format: add fields, never rename one.
// Every record is written inside a versioned envelope (codec.go) whose
// decoder refuses unknown fields, so a node of an older build refuses a
// record it would otherwise rewrite without the fields it does not know.

// AgentState is where an agent of the directory is in its life, as its
// host node last wrote it: enough for any node to list it and route to it.
type AgentState string

// Agent directory states.
const (
	// AgentLive means the host node serves the agent (its runtime may be
	// stopped and restarted on demand, as on a single node).
	AgentLive AgentState = "live"
	// AgentRemoved means the agent was removed; the entry stays until its
	// deletion so a late reader does not route to it.
	AgentRemoved AgentState = "removed"
)

// AgentEntry is one agent of the cluster's directory (bucket shard_agents,
// key agent_id): which node hosts it and what a client on any node needs to
// list it and route a command to it. The agent's full manifest stays in its
// host node's store; the directory holds what other nodes need.
type AgentEntry struct {
	AgentID       string     `json:"agent_id"`
	Node          string     `json:"node"`                      // the node that hosts it: its runtime, its cwd
	Cwd           string     `json:"cwd"`                       // a path on Node, meaningless elsewhere
	Name          string     `json:"name,omitempty"`            // optional human name
	Alias         string     `json:"alias,omitempty"`           // parent-scoped friendly name
	ParentAgentID string     `json:"parent_agent_id,omitempty"` // set for subagents
	Runtime       string     `json:"runtime,omitempty"`         // runtime profile; "" = the default
	State         AgentState `json:"state"`
	CreatedAt     int64      `json:"created_at"` // epoch milliseconds
	// What a client on another node lists (docs/cluster.md, "The agent
	// directory"): the host node's last published AgentInfo fields, so a
	// listing on any node shows what the host shows, as of its last write.
	Title        string                `json:"title,omitempty"`
	Model        string                `json:"model,omitempty"`
	Provider     string                `json:"provider,omitempty"`
	Status       protocol.AgentStatus  `json:"status,omitempty"`
	RuntimeState protocol.RuntimeState `json:"runtime_state,omitempty"`
	Workspace    string                `json:"workspace_id,omitempty"`
	Definition   string                `json:"definition_name,omitempty"`
	DisplayName  string                `json:"display_name,omitempty"`
}

// JobRecord is a subagent job (bucket shard_jobs, key job_id). Unlike the
// single node's store.Job, its runs are records of their own (RunRecord,
// listed by RunIDs): runs of one job may be claimed and written by
// different nodes at once, and one record per run keeps each
// compare-and-set to the one run it decides.
type JobRecord struct {
	JobID         string               `json:"job_id"`
	ParentAgentID string               `json:"parent_agent_id"`
	ParentNode    string               `json:"parent_node"` // the node hosting the parent, to which reports go
	Strategy      protocol.JobStrategy `json:"strategy"`
	RequestID     string               `json:"request_id,omitempty"`
	RunIDs        []string             `json:"run_ids"`
	HaltedBy      string               `json:"halted_by,omitempty"`
	StoppedAt     int64                `json:"stopped_at,omitempty"`
	CreatedAt     int64                `json:"created_at"`
	EndedAt       int64                `json:"ended_at,omitempty"`
}

// RunRecord is one run of a job (bucket shard_runs, key <job_id>.<run_id>,
// so a job's runs are one prefix). The fields of store.Run keep their
// names; Anywhere, Node, Incarnation, ClaimedAt and LeaseUntil say where it
// runs.
type RunRecord struct {
	RunID   string            `json:"run_id"`
	JobID   string            `json:"job_id"`
	Index   int               `json:"index"`
	Name    string            `json:"name"`
	AgentID string            `json:"agent_id"`
	Alias   string            `json:"alias,omitempty"`
	Task    string            `json:"task"` // private: never logged, never in a projection
	State   protocol.RunState `json:"state"`
	// Anywhere marks a run any node with capacity may claim (worktree
	// isolation on a repository every node can reach); it is then on the
	// claim queue until a node claims it. A run without it is placed on
	// Node when created (its cwd is a local path there).
	Anywhere bool `json:"anywhere,omitempty"`
	// Node is the node that runs it ("" while it waits to be claimed);
	// Incarnation is that node's incarnation when it took the run, so a
	// node that restarts (a new incarnation) never mistakes its previous
	// life's runs for live ones.
	Node        string `json:"node,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	ClaimedAt   int64  `json:"claimed_at,omitempty"`
	// LeaseUntil is when the claim lapses unless renewed (epoch ms): the
	// node's liveness is the cluster's membership, and this is the run's
	// own record of the promise.
	LeaseUntil int64                  `json:"lease_until,omitempty"`
	TimeoutMs  int64                  `json:"timeout_ms,omitempty"`
	Deadline   int64                  `json:"deadline,omitempty"`
	QueuedAt   int64                  `json:"queued_at"`
	StartedAt  int64                  `json:"started_at,omitempty"`
	EndedAt    int64                  `json:"ended_at,omitempty"`
	FinalText  string                 `json:"final_text,omitempty"`
	Usage      *protocol.RunUsage     `json:"usage,omitempty"`
	Error      string                 `json:"error,omitempty"`
	Workspace  *protocol.RunWorkspace `json:"workspace,omitempty"`
	// Git is where an anywhere run's work comes from and goes back to:
	// the shared remote every node reaches, the commit the run starts
	// from, and the branch the claiming node pushes when the run ends.
	Git *RunGit `json:"git,omitempty"`
	// Child is the child agent's manifest as the parent's node encodes it
	// in its store (store.Agent's JSON, its cwd meaningless elsewhere):
	// the node that claims the run hosts the child with these settings.
	// Opaque here, so this package does not depend on the store.
	Child json.RawMessage `json:"child,omitempty"`
	// ParentNode is the node hosting the child's parent (the job's
	// parent_node), written by the parent's node with the run: the node
	// that claims the run sends the child's requests and its people's
	// steers there without waiting for its agent directory to list a
	// parent created a moment ago. "" (a record written before it
	// existed) means: ask the directory.
	ParentNode string `json:"parent_node,omitempty"`
	// StopRequestedAt and StopStage are a stop asked by the parent's node
	// (subagent.stop, a deadline, a halted job) for the node running it,
	// which follows the record and stops its lease (store.Run's fields).
	StopRequestedAt int64  `json:"stop_requested_at,omitempty"`
	StopStage       string `json:"stop_stage,omitempty"`
	// Host pins the run to the node that hosts its child already: a
	// subagent.relaunch of a child that ran there (docs/protocol.md §13
	// "Runs on other nodes"). Only that node, in the incarnation
	// Incarnation names while the run waits, may claim it, and it gives
	// the task to the child it hosts (Child only stands in when that node
	// never hosted it). "" for every other run: any node may claim it.
	// Both fields are omitted when empty, so the record of a run that is
	// not a relaunch is written as before; a node of an older build
	// refuses a relaunch's record (an unknown field) rather than claim it.
	Host string `json:"host,omitempty"`
	// Worktree names the child's worktree on Host that a relaunch goes on
	// in: the id of the run that made it (the child's first run there),
	// whose directory is the child's cwd.
	Worktree string `json:"worktree,omitempty"`
}

// RunGit is an anywhere run's place in the shared git remote.
type RunGit struct {
	// Remote is the URL every node fetches from and pushes to (the
	// parent repository's remote; a path or URL git understands).
	Remote string `json:"remote"`
	// Base is the commit the run's branch starts from.
	Base string `json:"base"`
	// Branch is the run's branch (the workspace's branch name).
	Branch string `json:"branch"`
	// Head is the branch's commit as pushed when the run ended ("" until
	// then, or when nothing was pushed).
	Head string `json:"head,omitempty"`
}

// AliasEntry binds a parent's normalized alias to one of its agents
// (bucket shard_aliases, key <parent_agent_id>.<encoded alias>): created
// with Create, so two nodes naming two children alike cannot both win, as
// the single node's alias bucket guarantees in one transaction.
type AliasEntry struct {
	ParentAgentID string `json:"parent_agent_id"`
	Alias         string `json:"alias"` // normalized
	AgentID       string `json:"agent_id"`
}

// ClaimEntry is a run waiting on the claim queue (bucket shard_claims, key
// the run's key). It is only a pointer: the run record decides, and an
// entry whose run was claimed or ended is stale and dropped by whoever
// meets it.
type ClaimEntry struct {
	JobID    string `json:"job_id"`
	RunID    string `json:"run_id"`
	QueuedAt int64  `json:"queued_at"`
}

// validate checks what every writer must set. Each record kind has one,
// run before encoding and after decoding, so neither side trusts the
// other.
func (a *AgentEntry) validate() error {
	switch {
	case !validToken(a.AgentID):
		return fmt.Errorf("%w: agent entry has no valid agent_id", ErrInvalid)
	case a.Node == "":
		return fmt.Errorf("%w: agent %s has no node", ErrInvalid, a.AgentID)
	case a.State != AgentLive && a.State != AgentRemoved:
		return fmt.Errorf("%w: agent %s has state %q", ErrInvalid, a.AgentID, a.State)
	}
	return nil
}

func (j *JobRecord) validate() error {
	switch {
	case !validToken(j.JobID):
		return fmt.Errorf("%w: job has no valid job_id", ErrInvalid)
	case j.ParentAgentID == "":
		return fmt.Errorf("%w: job %s has no parent", ErrInvalid, j.JobID)
	}
	return nil
}

func (r *RunRecord) validate() error {
	switch {
	case !validToken(r.RunID) || !validToken(r.JobID):
		return fmt.Errorf("%w: run needs a valid run_id and job_id", ErrInvalid)
	case r.State == "":
		return fmt.Errorf("%w: run %s has no state", ErrInvalid, r.RunID)
	case !r.Anywhere && r.Node == "":
		return fmt.Errorf("%w: run %s is neither claimable nor placed", ErrInvalid, r.RunID)
	case r.Git != nil && (r.Git.Remote == "" || r.Git.Base == "" || r.Git.Branch == ""):
		return fmt.Errorf("%w: run %s has an incomplete git place", ErrInvalid, r.RunID)
	case r.Host != "" && (!r.Anywhere || r.Incarnation == "" || !validToken(r.Worktree)):
		return fmt.Errorf("%w: run %s is pinned to %s without its incarnation or worktree", ErrInvalid, r.RunID, r.Host)
	}
	return nil
}

func (a *AliasEntry) validate() error {
	if a.ParentAgentID == "" || a.Alias == "" || a.AgentID == "" {
		return fmt.Errorf("%w: alias entry needs a parent, an alias and an agent", ErrInvalid)
	}
	return nil
}

func (c *ClaimEntry) validate() error {
	if !validToken(c.JobID) || !validToken(c.RunID) {
		return fmt.Errorf("%w: claim entry needs a valid job_id and run_id", ErrInvalid)
	}
	return nil
}

// Key builders: every key is made of tokens joined by dots, so a prefix
// of whole tokens is a subject filter (<prefix>.>) the server evaluates.

// RunKey is a run's key in shard_runs and shard_claims: its job first, so
// the runs of a job are the prefix JobID.
func RunKey(jobID, runID string) string { return jobID + "." + runID }

// AliasKey is the key of a parent's normalized alias in shard_aliases. The
// alias is base64url-encoded: an alias may hold characters a key may not
// (dots, spaces, anything a person types), and the encoding keeps two
// aliases distinct exactly when their normalized forms are.
func AliasKey(parentAgentID, normAlias string) string {
	return parentAgentID + "." + encodeToken(normAlias)
}
