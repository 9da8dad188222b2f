package protocol

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
)

// Workspaces (docs/protocol.md §10.1a, §10.2): a workspace is one git
// worktree of a repository, on a branch of its own, that the daemon created
// and records durably, so that parallel agents never share a checkout.
//
// Choices made here (the protocol leaves them open; docs/protocol.md §13):
//
//   - Workspace commands are daemon-level (ScopeOrchestrator). A stray
//     routing agent_id is ignored, as agent.list, daemon.status and the
//     subagent.* commands ignore it: it is never used to route them, and it
//     is not an error.
//   - `version` may be omitted or 1; any other value is INVALID_REQUEST
//     naming the field, so a client written for a later version learns it at
//     once instead of getting version-1 semantics it did not ask for.
//   - workspace.diff and workspace.merge are Shard extensions, additive
//     like ws.ticket and daemon.status: daemons without them answer them as
//     unknown types.
//   - Wire names are snake_case like the rest of this protocol. The diff
//     shapes are AgentCraft's DiffFile/DiffHunk/DiffLine (pinning §13, P6)
//     field for field, with the keys in snake_case (oldPath → old_path,
//     oldStart → old_start, newNo → new_no); a bridge renames keys and
//     nothing else.
//   - A projection never carries a git-dir or common-dir path: cwd is the
//     worktree root and repository_cwd the main checkout root, the only two
//     paths it exposes (workspace_test.go checks every field).

// Workspace command types (§10.1a). Diff and merge are Shard extensions.
const (
	TypeWorkspaceCreate = "workspace.create"
	TypeWorkspaceAttach = "workspace.attach"
	TypeWorkspaceList   = "workspace.list"
	TypeWorkspaceStatus = "workspace.status"
	TypeWorkspaceRetire = "workspace.retire"
	TypeWorkspaceDiff   = "workspace.diff"
	TypeWorkspaceMerge  = "workspace.merge"
)

// Workspace event types (§10.2): daemon broadcasts, sent after the record
// they describe is durable, without a correlation id.
const (
	TypeWorkspaceCreated  = "workspace_created"
	TypeWorkspaceAttached = "workspace_attached"
	TypeWorkspaceRetired  = "workspace_retired"
	TypeWorkspaceConflict = "workspace_conflict"
)

// WorkspaceVersion is the only `version` a workspace command may carry.
const WorkspaceVersion = 1

// ---- Enumerations ----

// WorkspaceState is a workspace's lifecycle state. The record is written
// before each git step, so a crash leaves a state that says what to
// reconcile:
//
//		creating ──▶ active ◀──▶ missing
//		   │           │ ▲
//		   │           ▼ │
//		   │         conflict
//		   │           │
//		   ▼           ▼
//		retired ◀── retiring ◀── (active, missing or conflict)
//
//	  - creating: the record is durable, the worktree and branch may not exist
//	    yet. Startup finishes or rolls back the create; a failed create goes
//	    straight to retired with a tombstone, deleting nothing it did not make.
//	  - active: the worktree exists where the record says, on its branch.
//	  - missing: the worktree or the repository vanished or moved behind the
//	    daemon's back. Attach is refused; retire only forgets it (nothing on
//	    disk is touched).
//	  - conflict: disk and record disagree in a way the daemon will not settle
//	    on its own (the worktree holds another branch, a merge stopped on
//	    conflicts); ConflictReason says why.
//	  - retiring: a retire is under way (the record is written before git
//	    removes the worktree or deletes the branch).
//	  - retired: terminal. The worktree is gone; the tombstone keeps the branch
//	    name and its last head, so even a deleted branch can be restored by
//	    hand (`git branch <name> <sha>`).
type WorkspaceState string

// Workspace states.
const (
	WorkspaceStateCreating WorkspaceState = "creating"
	WorkspaceStateActive   WorkspaceState = "active"
	WorkspaceStateMissing  WorkspaceState = "missing"
	WorkspaceStateConflict WorkspaceState = "conflict"
	WorkspaceStateRetiring WorkspaceState = "retiring"
	WorkspaceStateRetired  WorkspaceState = "retired"
)

// WorkspaceStates lists every state in lifecycle order.
func WorkspaceStates() []WorkspaceState {
	return []WorkspaceState{WorkspaceStateCreating, WorkspaceStateActive, WorkspaceStateMissing, WorkspaceStateConflict, WorkspaceStateRetiring, WorkspaceStateRetired}
}

// Valid reports whether s is a registered state.
func (s WorkspaceState) Valid() bool {
	for _, v := range WorkspaceStates() {
		if s == v {
			return true
		}
	}
	return false
}

// WorkspaceOwnership says who made a workspace and so who may delete what
// is in it. Only "managed" exists (creation is managed-only,
// docs/protocol.md §10.1a): the daemon created the worktree and the branch.
type WorkspaceOwnership string

// Ownerships.
const (
	OwnershipManaged WorkspaceOwnership = "managed"
)

// BranchDisposition says what workspace.retire does with the branch.
type BranchDisposition string

// Branch dispositions (§10.1a).
const (
	// DispositionDeleteIfMerged deletes the branch only when the daemon
	// proves it adds nothing to the integration target; otherwise the
	// retire is refused with confirmation_required and nothing changes.
	// It is the default when branch_disposition is omitted (see
	// WorkspaceRetire.Disposition).
	DispositionDeleteIfMerged BranchDisposition = "delete_if_merged"
	// DispositionKeep retires the workspace and keeps the branch.
	DispositionKeep BranchDisposition = "keep"
	// DispositionDeleteConfirmed deletes the branch without proof: the
	// retry a confirmation_required refusal asks for.
	DispositionDeleteConfirmed BranchDisposition = "delete_confirmed"
)

// MergeStrategy is how workspace.merge integrates a branch.
type MergeStrategy string

// Merge strategies (Shard extension).
const (
	// MergeMerge makes a merge commit on the integration target (a fast
	// forward when the target has not moved is still recorded as a merge
	// commit, so the branch stays visible in history).
	MergeMerge MergeStrategy = "merge"
	// MergeSquash makes one commit on the target with the branch's
	// combined change.
	MergeSquash MergeStrategy = "squash"
	// MergeRebase rebases the branch onto the target, then fast-forwards
	// the target to it. It makes no commit of its own, so it takes no
	// message.
	MergeRebase MergeStrategy = "rebase"
)

// MergeProof names how the daemon proved that a branch adds nothing to its
// integration target, cheapest proof first, or that the
// deletion was confirmed instead.
type MergeProof string

// Merge proofs.
const (
	ProofSameCommit MergeProof = "same_commit" // branch head is the target head
	ProofAncestor   MergeProof = "ancestor"    // branch head is an ancestor of the target
	ProofEmptyDiff  MergeProof = "empty_diff"  // the three-dot diff is empty
	ProofSameTree   MergeProof = "same_tree"   // branch and target trees are identical
	ProofMergeTree  MergeProof = "merge_tree"  // a simulated merge (git merge-tree --write-tree) adds nothing
	ProofPatchID    MergeProof = "patch_id"    // squash-merged: the combined change's patch-id equals one target commit's
	ProofConfirmed  MergeProof = "confirmed"   // not proven: deleted on delete_confirmed
)

// ---- Commands (§10.1a) ----

// WorkspaceCreate creates a managed workspace — a new branch (Branch, or a
// generated one) in a new worktree of the repository at Cwd, from BaseRef
// (default: the repository's HEAD), integrating into IntegrationTarget
// (default: the branch checked out in the main checkout) — and launches a
// fresh daemon-generated Agent and Session in it. Title, Name, Model,
// Provider and Mode configure that agent as in agent.create.
type WorkspaceCreate struct {
	Header
	Version           *int   `json:"version,omitempty"`
	Cwd               string `json:"cwd"`
	Label             string `json:"label,omitempty"`
	Branch            string `json:"branch,omitempty"`
	BaseRef           string `json:"base_ref,omitempty"`
	IntegrationTarget string `json:"integration_target,omitempty"`
	Title             string `json:"title,omitempty"`
	Name              string `json:"name,omitempty"`
	Model             string `json:"model,omitempty"`
	Provider          string `json:"provider,omitempty"`
	Mode              string `json:"mode,omitempty"`
}

// WorkspaceAttach launches another fresh Agent and Session in an existing
// workspace.
type WorkspaceAttach struct {
	Header
	Version     *int   `json:"version,omitempty"`
	WorkspaceID string `json:"workspace_id"`
	Title       string `json:"title,omitempty"`
	Name        string `json:"name,omitempty"`
	Model       string `json:"model,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Mode        string `json:"mode,omitempty"`
}

// WorkspaceList lists workspaces: those of the repository containing Cwd
// when it is set, retired ones only with IncludeRetired.
type WorkspaceList struct {
	Header
	Version        *int   `json:"version,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
	IncludeRetired bool   `json:"include_retired,omitempty"`
}

// WorkspaceStatus describes one workspace in detail, with live git facts.
type WorkspaceStatus struct {
	Header
	Version     *int   `json:"version,omitempty"`
	WorkspaceID string `json:"workspace_id"`
}

// WorkspaceRetire retires a workspace: its worktree is removed and its
// branch kept or deleted as BranchDisposition says (see Disposition).
type WorkspaceRetire struct {
	Header
	Version           *int              `json:"version,omitempty"`
	WorkspaceID       string            `json:"workspace_id"`
	BranchDisposition BranchDisposition `json:"branch_disposition,omitempty"`
}

// Disposition returns the requested disposition, delete_if_merged when it
// was omitted: safe by default (an unproven deletion is refused, never
// done), and a branch that is provably merged does not linger.
func (c *WorkspaceRetire) Disposition() BranchDisposition {
	if c.BranchDisposition == "" {
		return DispositionDeleteIfMerged
	}
	return c.BranchDisposition
}

// WorkspaceDiff asks for a structured diff of a workspace against the merge
// base with its integration target, uncommitted and untracked changes
// included (Shard extension). MaxBytes caps the diff text; nil means the
// daemon's default, and the daemon may lower a larger value to its own
// limit. Data: WorkspaceDiffData.
type WorkspaceDiff struct {
	Header
	Version     *int   `json:"version,omitempty"`
	WorkspaceID string `json:"workspace_id"`
	MaxBytes    *int64 `json:"max_bytes,omitempty"`
}

// WorkspaceMerge integrates a workspace's branch into its integration
// target in the main checkout (Shard extension). Message is the commit
// message of a merge or squash commit (default: one the daemon writes); a
// rebase makes no commit, so Message with rebase is refused. Nothing is
// left half-done: a refusal (main_dirty, wrong_branch, merge_conflict)
// leaves the main checkout and the branch as they were. Data:
// WorkspaceMergeData.
type WorkspaceMerge struct {
	Header
	Version     *int          `json:"version,omitempty"`
	WorkspaceID string        `json:"workspace_id"`
	Strategy    MergeStrategy `json:"strategy"`
	Message     string        `json:"message,omitempty"`
}

// ---- Validation ----

func checkVersion(v *int) error {
	if v != nil && *v != WorkspaceVersion {
		return invalid("version", "must be %d", WorkspaceVersion)
	}
	return nil
}

// checkAbs requires an absolute path: the daemon has no meaningful cwd to
// resolve a relative one against (agent.create refuses it the same way).
func checkAbs(field, v string) error {
	if v != "" && !filepath.IsAbs(v) {
		return invalid(field, "must be an absolute path")
	}
	return nil
}

// checkRefArg refuses a ref name that git could read as an option or that
// holds control characters. Git itself judges the rest (a bad name is a
// refusal, not a decode error), and the daemon passes refs after "--" or
// --end-of-options anyway: this is defence in depth, cheap and early.
func checkRefArg(field, v string) error {
	if strings.HasPrefix(v, "-") {
		return invalid(field, "must not start with '-'")
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// Validate implements Command.
func (c *WorkspaceCreate) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	if err := checkMode("mode", c.Mode); err != nil {
		return err
	}
	if err := required("cwd", c.Cwd); err != nil {
		return err
	}
	if err := checkAbs("cwd", c.Cwd); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, v string }{
		{"branch", c.Branch}, {"base_ref", c.BaseRef}, {"integration_target", c.IntegrationTarget},
	} {
		if err := checkRefArg(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (c *WorkspaceAttach) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	if err := checkMode("mode", c.Mode); err != nil {
		return err
	}
	return required("workspace_id", c.WorkspaceID)
}

// Validate implements Command.
func (c *WorkspaceList) Validate() error {
	if err := maxLen("cwd", c.Cwd, MaxPathLen); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	return checkAbs("cwd", c.Cwd)
}

// Validate implements Command.
func (c *WorkspaceStatus) Validate() error {
	if err := maxLen("workspace_id", c.WorkspaceID, MaxIDLen); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	return required("workspace_id", c.WorkspaceID)
}

// Validate implements Command.
func (c *WorkspaceRetire) Validate() error {
	if err := maxLen("workspace_id", c.WorkspaceID, MaxIDLen); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	if err := required("workspace_id", c.WorkspaceID); err != nil {
		return err
	}
	return oneOf("branch_disposition", string(c.BranchDisposition),
		string(DispositionDeleteIfMerged), string(DispositionKeep), string(DispositionDeleteConfirmed))
}

// Validate implements Command.
func (c *WorkspaceDiff) Validate() error {
	if err := maxLen("workspace_id", c.WorkspaceID, MaxIDLen); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	if err := required("workspace_id", c.WorkspaceID); err != nil {
		return err
	}
	if c.MaxBytes != nil && *c.MaxBytes <= 0 {
		return invalid("max_bytes", "must be a positive integer")
	}
	return nil
}

// Validate implements Command.
func (c *WorkspaceMerge) Validate() error {
	if err := bounds(bound{"workspace_id", c.WorkspaceID, MaxIDLen}, bound{"message", c.Message, MaxCommitMessageLen}); err != nil {
		return err
	}
	if err := checkVersion(c.Version); err != nil {
		return err
	}
	if err := required("workspace_id", c.WorkspaceID); err != nil {
		return err
	}
	if err := required("strategy", string(c.Strategy)); err != nil {
		return err
	}
	if err := oneOf("strategy", string(c.Strategy), string(MergeMerge), string(MergeSquash), string(MergeRebase)); err != nil {
		return err
	}
	if c.Strategy == MergeRebase && c.Message != "" {
		return invalid("message", "strategy rebase makes no commit; omit message")
	}
	return nil
}

// ---- Projection ----

// WorkspaceInfo is the transport-safe projection of a workspace, in
// responses and events. It exposes exactly two paths — Cwd, the worktree
// root, and RepositoryCwd, the main checkout's root — and never a git-dir or
// common-dir path, nor any path the daemon keeps for itself.
//
// A summary (workspace.list, events) leaves AgentIDs out (see Summary); the
// detail (workspace.status, create/attach/retire/merge responses) has them.
// Ahead, Behind and Dirty are live git facts that only workspace.status
// fills in; everything else is the durable record.
type WorkspaceInfo struct {
	WorkspaceID string `json:"workspace_id"`
	Label       string `json:"label,omitempty"`
	// Cwd is the worktree's root: where the workspace's agents run.
	Cwd string `json:"cwd"`
	// RepositoryCwd is the ORIGINAL project's main-checkout root (the
	// shared repository root, derived from the common dir but never the
	// common dir itself), so clients can group sibling worktrees.
	RepositoryCwd string             `json:"repository_cwd,omitempty"`
	Ownership     WorkspaceOwnership `json:"ownership"`
	State         WorkspaceState     `json:"state"`
	Branch        string             `json:"branch"`
	// BaseRef is the ref the branch was created from, as given (or the
	// repository's HEAD branch); BaseSHA is the commit it resolved to.
	BaseRef string `json:"base_ref,omitempty"`
	BaseSHA string `json:"base_sha,omitempty"`
	// IntegrationTarget is the branch the workspace merges into.
	IntegrationTarget string `json:"integration_target,omitempty"`
	// HeadSHA is the branch's head as last recorded (live in status).
	HeadSHA   string `json:"head_sha,omitempty"`
	CreatedAt int64  `json:"created_at"` // epoch milliseconds
	UpdatedAt int64  `json:"updated_at"` // epoch milliseconds
	RetiredAt int64  `json:"retired_at,omitempty"`
	// AgentCount counts the agents bound to the workspace.
	AgentCount int `json:"agent_count"`
	// AgentIDs are the bound agents' opaque ids (detail only): the binding
	// ids the protocol calls redacted — ids, never sessions or paths.
	AgentIDs []string `json:"agent_ids,omitempty"`
	// Ahead and Behind count commits on the branch not on the integration
	// target and the other way round; Dirty reports uncommitted or
	// untracked files. Live, from workspace.status only.
	Ahead  *int  `json:"ahead,omitempty"`
	Behind *int  `json:"behind,omitempty"`
	Dirty  *bool `json:"dirty,omitempty"`
	// ConflictReason says, sanitized (no paths of the daemon's), why the
	// state is conflict.
	ConflictReason string `json:"conflict_reason,omitempty"`
	// Tombstone is set once retired.
	Tombstone *WorkspaceTombstone `json:"tombstone,omitempty"`
	// Node (additive) is the cluster node holding the workspace (its
	// worktree is on that node's disk), in a cluster's workspace.list
	// (docs/protocol.md §13 "Jobs and workspaces of other nodes") and
	// workspace events, which every node's clients get (§13 "Events of
	// other nodes"); absent on a single shardd.
	Node string `json:"node,omitempty"`
}

// Summary returns the projection without the detail-only binding ids.
func (w WorkspaceInfo) Summary() WorkspaceInfo {
	w.AgentIDs = nil
	return w
}

// WorkspaceTombstone is what a retired workspace keeps of its branch: the
// name and last head, so `git branch <branch> <head_sha>` restores it even
// after a confirmed deletion. Deleted says whether retire deleted it.
type WorkspaceTombstone struct {
	Branch  string `json:"branch"`
	HeadSHA string `json:"head_sha"`
	Deleted bool   `json:"deleted"`
}

// ---- Response data ----

// WorkspaceCreateData is the data of a workspace.create response: the
// fresh Agent and Session launched in the workspace, and its detail.
type WorkspaceCreateData struct {
	AgentID   string        `json:"agent_id"`
	SessionID string        `json:"session_id"`
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceAttachData is the data of a workspace.attach response; it has
// the shape of a create's.
type WorkspaceAttachData = WorkspaceCreateData

// WorkspaceListData is the data of a workspace.list response: summaries,
// oldest first. Workspaces is never null.
type WorkspaceListData struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
	// UnavailableNodes (additive) are the cluster's nodes whose
	// workspaces are missing from the answer: declared dead, or silent
	// past the bound (docs/protocol.md §13 "Jobs and workspaces of other
	// nodes").
	UnavailableNodes []string `json:"unavailable_nodes,omitempty"`
}

// WorkspaceStatusData is the data of a workspace.status response.
type WorkspaceStatusData struct {
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceRetireData is the data of a workspace.retire response. Proof
// says how a deleted branch was shown merged (or "confirmed"); it is empty
// when the branch was kept.
type WorkspaceRetireData struct {
	Workspace     WorkspaceInfo `json:"workspace"`
	BranchDeleted bool          `json:"branch_deleted"`
	Proof         MergeProof    `json:"proof,omitempty"`
}

// WorkspaceMergeData is the data of a workspace.merge response: the
// integration target moved from PreviousSHA to MergedSHA.
type WorkspaceMergeData struct {
	Workspace         WorkspaceInfo `json:"workspace"`
	Strategy          MergeStrategy `json:"strategy"`
	IntegrationTarget string        `json:"integration_target"`
	PreviousSHA       string        `json:"previous_sha"`
	MergedSHA         string        `json:"merged_sha"`
	Stats             DiffStats     `json:"stats"`
}

// WorkspaceDiffData is the data of a workspace.diff response: the change of
// the workspace (commits, staged, unstaged and untracked files) against
// BaseSHA, the merge base of its branch with the integration target.
// Truncated is set when MaxBytes cut hunks or files; Stats still counts
// every file. Files is never null.
type WorkspaceDiffData struct {
	WorkspaceID       string     `json:"workspace_id"`
	Branch            string     `json:"branch"`
	IntegrationTarget string     `json:"integration_target"`
	BaseSHA           string     `json:"base_sha"`
	HeadSHA           string     `json:"head_sha,omitempty"`
	Files             []DiffFile `json:"files"`
	Stats             DiffStats  `json:"stats"`
	Truncated         bool       `json:"truncated"`
}

// DiffStats is a diff's total +/- counts.
type DiffStats struct {
	Files     int `json:"files"`
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
}

// DiffFileStatus is how a file changed.
type DiffFileStatus string

// File statuses (AgentCraft DiffFile.status).
const (
	DiffAdded    DiffFileStatus = "added"
	DiffModified DiffFileStatus = "modified"
	DiffDeleted  DiffFileStatus = "deleted"
	DiffRenamed  DiffFileStatus = "renamed"
)

// DiffFile is one changed file (AgentCraft DiffFile). Path and OldPath are
// relative to the worktree root, '/'-separated. A binary file has counts of
// 0 and no hunks. Hunks is never null. Untracked marks a file git does not
// track yet (shown as added); Truncated marks a file whose hunks the byte
// cap cut (its counts stay whole). OldMode and NewMode are git's octal modes
// when the diff shows them (a mode change, a new or a deleted file), so a
// mode-only change is visible; additive to AgentCraft, omitted when empty.
//
// It is the one diff type: workspaces/treediff parses git's output straight
// into it (diff.File is an alias), so nothing converts between a parser
// shape and the wire shape.
type DiffFile struct {
	Path      string         `json:"path"`
	OldPath   string         `json:"old_path,omitempty"`
	Status    DiffFileStatus `json:"status"`
	Binary    bool           `json:"binary"`
	Additions int            `json:"additions"`
	Deletions int            `json:"deletions"`
	OldMode   string         `json:"old_mode,omitempty"`
	NewMode   string         `json:"new_mode,omitempty"`
	Truncated bool           `json:"truncated,omitempty"`
	Hunks     []DiffHunk     `json:"hunks"`
	Untracked bool           `json:"untracked,omitempty"`
}

// DiffHunk is one unified-diff hunk (AgentCraft DiffHunk): its "@@ … @@"
// header line as git wrote it, the header's numbers, and its lines. Lines
// is never null.
type DiffHunk struct {
	Header   string     `json:"header"`
	OldStart int        `json:"old_start"`
	OldLines int        `json:"old_lines"`
	NewStart int        `json:"new_start"`
	NewLines int        `json:"new_lines"`
	Lines    []DiffLine `json:"lines"`
}

// DiffLineKind is a diff line's kind.
type DiffLineKind string

// Line kinds (AgentCraft DiffLine.kind).
const (
	LineAdd DiffLineKind = "add"
	LineDel DiffLineKind = "del"
	LineCtx DiffLineKind = "ctx"
)

// DiffLine is one line of a hunk (AgentCraft DiffLine), without its
// "+"/"-"/" " prefix and its newline (a CRLF file keeps its "\r"). OldNo is
// set for del and ctx lines, NewNo for add and ctx lines (line numbers start
// at 1, so 0 means absent). NoNewline marks the last line of a side that has
// no newline at end of file (git's "\ No newline at end of file"); additive
// to AgentCraft, omitted when false.
type DiffLine struct {
	Kind      DiffLineKind `json:"kind"`
	Text      string       `json:"text"`
	OldNo     int          `json:"old_no,omitempty"`
	NewNo     int          `json:"new_no,omitempty"`
	NoNewline bool         `json:"no_newline,omitempty"`
}

// ---- Events (§10.2) ----

// WorkspaceCreated reports a new workspace (with its summary) once its
// record is active and durable.
type WorkspaceCreated struct {
	Header
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceAttached reports an agent launched in a workspace (by create or
// attach). The new agent's id is the event's agent_id member
// (Header.AgentID), a payload here as in agent_exited (§10.2 note), and
// SessionID its session.
type WorkspaceAttached struct {
	Header
	SessionID string        `json:"session_id"`
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceRetired reports a retired workspace; its projection carries the
// tombstone.
type WorkspaceRetired struct {
	Header
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceConflict reports a workspace that entered the conflict (or
// missing) state; Reason is sanitized like ConflictReason.
type WorkspaceConflict struct {
	Header
	Reason    string        `json:"reason"`
	Workspace WorkspaceInfo `json:"workspace"`
}

// ---- Refusals ----

// WorkspaceRefusalKind names why a workspace command was refused. Each kind
// maps to one protocol code (Code); clients branch on the kind, which is
// finer than the code.
type WorkspaceRefusalKind string

// Refusal kinds.
const (
	// Create.
	RefusalNotARepository WorkspaceRefusalKind = "not_a_repository" // cwd is not inside a git repository
	RefusalBranchExists   WorkspaceRefusalKind = "branch_exists"    // the branch name is taken
	RefusalBaseRefUnknown WorkspaceRefusalKind = "base_ref_unknown" // base_ref or integration_target does not resolve
	RefusalPathTaken      WorkspaceRefusalKind = "path_taken"       // the worktree path exists or is another record's
	RefusalRepositoryBusy WorkspaceRefusalKind = "repository_busy"  // the repository is mid rebase, merge, cherry-pick or bisect

	// Retire.
	RefusalConfirmationRequired WorkspaceRefusalKind = "confirmation_required" // delete_if_merged could not prove the branch merged
	RefusalLive                 WorkspaceRefusalKind = "live"                  // an agent of the workspace has a runtime or an attachment
	RefusalBusy                 WorkspaceRefusalKind = "busy"                  // a turn or a subagent run is in flight
	RefusalDirty                WorkspaceRefusalKind = "dirty"                 // staged, unstaged or untracked files
	RefusalLocked               WorkspaceRefusalKind = "locked"                // the worktree is locked (git worktree lock)
	RefusalSubmodules           WorkspaceRefusalKind = "submodules"            // the worktree has initialized submodules

	// Any command on an existing workspace.
	RefusalMissingAuthority WorkspaceRefusalKind = "missing_authority" // the repository or worktree is gone or moved
	RefusalUnsafe           WorkspaceRefusalKind = "unsafe"            // the path is not the one the daemon created

	// A subagent run (subagent.relaunch, or a run that starts) bound to a
	// workspace that is retired or being retired: it never runs elsewhere.
	RefusalRetired WorkspaceRefusalKind = "retired"

	// Merge.
	RefusalMainDirty     WorkspaceRefusalKind = "main_dirty"     // the main checkout has uncommitted changes
	RefusalWrongBranch   WorkspaceRefusalKind = "wrong_branch"   // the main checkout is not on the integration target
	RefusalMergeConflict WorkspaceRefusalKind = "merge_conflict" // the merge or rebase would conflict (Paths lists where)
)

// WorkspaceRefusalKinds lists every kind.
func WorkspaceRefusalKinds() []WorkspaceRefusalKind {
	return []WorkspaceRefusalKind{
		RefusalNotARepository, RefusalBranchExists, RefusalBaseRefUnknown, RefusalPathTaken, RefusalRepositoryBusy,
		RefusalConfirmationRequired, RefusalLive, RefusalBusy, RefusalDirty, RefusalLocked, RefusalSubmodules,
		RefusalMissingAuthority, RefusalUnsafe, RefusalRetired,
		RefusalMainDirty, RefusalWrongBranch, RefusalMergeConflict,
	}
}

// Valid reports whether k is a registered kind.
func (k WorkspaceRefusalKind) Valid() bool { return k.Code() != "" }

// Code returns the protocol code a refusal of kind k carries, or "" for an
// unregistered kind. The mapping (a choice; §8 has no workspace codes):
// arguments that name nothing usable are INVALID_REQUEST (not a repository,
// an unknown ref); a path the daemon did not create is PERMISSION_DENIED
// (the server refuses to touch it, whatever the caller asks); every other
// refusal is CONFLICT — the operation conflicts with the state of the
// repository, the worktree or its agents, and may succeed once that
// changes.
func (k WorkspaceRefusalKind) Code() ErrorCode {
	switch k {
	case RefusalNotARepository, RefusalBaseRefUnknown:
		return CodeInvalidRequest
	case RefusalUnsafe:
		return CodePermissionDenied
	case RefusalBranchExists, RefusalPathTaken, RefusalRepositoryBusy,
		RefusalConfirmationRequired, RefusalLive, RefusalBusy, RefusalDirty, RefusalLocked, RefusalSubmodules,
		RefusalMissingAuthority, RefusalRetired, RefusalMainDirty, RefusalWrongBranch, RefusalMergeConflict:
		return CodeConflict
	}
	return ""
}

// MaxRefusalPaths bounds WorkspaceRefusal.Paths; producers set
// PathsTruncated when they cut the list.
const MaxRefusalPaths = 100

// WorkspaceRefusal is the typed data of a refused workspace command, carried
// as the `data` member of the response's error object (`error: {code,
// message, data?}`, docs/protocol.md §8/§9.3). Reason is the sanitized,
// human-readable why (also the error's message). WorkspaceID is empty for a
// create refused before an id existed.
type WorkspaceRefusal struct {
	Kind        WorkspaceRefusalKind `json:"kind"`
	WorkspaceID string               `json:"workspace_id,omitempty"`
	Reason      string               `json:"reason"`
	// ConfirmationDisposition is the disposition to retry with
	// (confirmation_required: delete_confirmed).
	ConfirmationDisposition BranchDisposition `json:"confirmation_disposition,omitempty"`
	// Paths lists the files involved (dirty, conflicting, submodules),
	// relative to the worktree or main checkout, at most MaxRefusalPaths.
	Paths          []string `json:"paths,omitempty"`
	PathsTruncated bool     `json:"paths_truncated,omitempty"`
	// Branch is the branch involved: the taken name (branch_exists), or
	// the main checkout's current branch (wrong_branch, where
	// IntegrationTarget is the one it should be on).
	Branch            string `json:"branch,omitempty"`
	IntegrationTarget string `json:"integration_target,omitempty"`
	// AgentIDs are the agents that make the workspace live or busy.
	AgentIDs []string `json:"agent_ids,omitempty"`
}

// Err returns the refusal as a protocol error: its kind's code, Reason as
// the message, and the refusal as the error's data.
func (r WorkspaceRefusal) Err() *Error {
	code := r.Kind.Code()
	if code == "" {
		code = CodeConflict
	}
	return &Error{Code: code, Message: r.Reason, Data: r}
}

// WorkspaceRefusalOf returns the refusal carried by err: a typed one built
// by Err anywhere in err's chain, or one decoded from a response's error
// data (a JSON object with a registered kind). It reports false otherwise.
func WorkspaceRefusalOf(err error) (WorkspaceRefusal, bool) {
	var pe *Error
	if !errors.As(err, &pe) || pe.Data == nil {
		return WorkspaceRefusal{}, false
	}
	switch d := pe.Data.(type) {
	case WorkspaceRefusal:
		return d, d.Kind.Valid()
	case *WorkspaceRefusal:
		if d == nil {
			return WorkspaceRefusal{}, false
		}
		return *d, d.Kind.Valid()
	}
	raw, ok := pe.Data.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(pe.Data); err != nil {
			return WorkspaceRefusal{}, false
		}
	}
	var r WorkspaceRefusal
	if json.Unmarshal(raw, &r) != nil || !r.Kind.Valid() {
		return WorkspaceRefusal{}, false
	}
	return r, true
}
