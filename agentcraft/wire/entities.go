package wire

import "encoding/json"

// Agent is one member of the team as the world shows it: its nameplate,
// colors, what it does and where it stands. agent.upsert replaces it whole
// by ID.
type Agent struct {
	// ID is stable and lowercase, e.g. "kit".
	ID string `json:"id"`
	// Name is the display name, e.g. "Kit".
	Name string    `json:"name"`
	Role AgentRole `json:"role"`
	// Title is a short descriptive role, e.g. "Backend tinkerer".
	Title string `json:"title,omitempty"`
	// Color is the agent's "#RRGGBB" (scarf, badge, nameplate). The
	// decoders do not check its spelling; encoders must send "#RRGGBB".
	Color string `json:"color"`
	// Accent is a second "#RRGGBB".
	Accent string `json:"accent,omitempty"`
	// Skin names the texture the mod draws the agent with.
	Skin  string     `json:"skin"`
	State AgentState `json:"state"`
	// Activity is one short line for the nameplate, at most ActivityMax
	// characters (the encoder does not cut it; the server does).
	Activity string  `json:"activity"`
	Station  Station `json:"station"`
	TaskID   string  `json:"taskId,omitempty"`
	RepoID   string  `json:"repoId,omitempty"`
	// Worktree is the id of the worktree the agent works in (Repo.Worktrees).
	Worktree string `json:"worktree,omitempty"`
	Paused   bool   `json:"paused"`
	// Active false means off shift (not on the current team, or stopped by
	// the user); the mod renders it idle in the lounge.
	Active bool `json:"active"`
}

// LogEntry is one line (or block) of an agent monitor.
type LogEntry struct {
	// TS is epoch milliseconds.
	TS   int64   `json:"ts"`
	Kind LogKind `json:"kind"`
	// Text may contain newlines; LogDiff entries use unified +/- prefixes.
	Text string `json:"text"`
}

// Task is one card of the Task Wall. task.upsert replaces it whole by ID.
type Task struct {
	ID          string     `json:"id"`
	Title       string     `json:"title"`
	Description string     `json:"description,omitempty"`
	Status      TaskStatus `json:"status"`
	// Assignee is an agent id.
	Assignee string `json:"assignee,omitempty"`
	// Deps are the ids of tasks that must be done before this one can
	// start; always encoded, [] when there are none.
	Deps   []string `json:"deps"`
	RepoID string   `json:"repoId,omitempty"`
	GoalID string   `json:"goalId,omitempty"`
	// Priority: higher is sooner; 0 by default.
	Priority int `json:"priority"`
	// Branch is the task's git branch.
	Branch        string   `json:"branch,omitempty"`
	Worktree      string   `json:"worktree,omitempty"`
	CI            CiStatus `json:"ci"`
	BlockedReason string   `json:"blockedReason,omitempty"`
	// Summary is the worker's or lead's summary of the result.
	Summary string `json:"summary,omitempty"`
	// CreatedBy is an agent id or User.
	CreatedBy string `json:"createdBy"`
	CreatedAt int64  `json:"createdAt"`
	UpdatedAt int64  `json:"updatedAt"`
}

// MarshalJSON encodes t with Deps as [] when nil, since the field is required.
func (t Task) MarshalJSON() ([]byte, error) {
	type plain Task
	p := plain(t)
	p.Deps = nonNil(p.Deps)
	return json.Marshal(p)
}

// Decision is one entry of the decisions queue: a question, a permission or
// a merge waiting on the person. decision.upsert replaces it whole by ID.
type Decision struct {
	ID string `json:"id"`
	// AgentID is the agent waiting on the decision.
	AgentID  string       `json:"agentId"`
	Kind     DecisionKind `json:"kind"`
	Question string       `json:"question"`
	// Options are the button labels, the first being the default; always
	// encoded, [] for a free-text question. Merge and permission decisions
	// use MergeOptions and PermissionOptions.
	Options []string `json:"options"`
	// Context is extra plain text. Permission: why it asks, the cwd and a
	// line starting with AlwaysAllowCovers. Merge: summary and diff stat;
	// after a refused merge the decision is open again and this ends with
	// MergeRefused and the reason.
	Context string         `json:"context,omitempty"`
	Status  DecisionStatus `json:"status"`
	// Answer is set once the decision is answered.
	Answer *DecisionAnswer `json:"answer,omitempty"`
	TaskID string          `json:"taskId,omitempty"`
	// RepoID and Worktree name the diff to request for a merge decision.
	RepoID   string `json:"repoId,omitempty"`
	Worktree string `json:"worktree,omitempty"`
	// Tool names the tool of a permission decision, e.g. "Bash".
	Tool      string `json:"tool,omitempty"`
	CreatedAt int64  `json:"createdAt"`
}

// MarshalJSON encodes d with Options as [] when nil, since the field is required.
func (d Decision) MarshalJSON() ([]byte, error) {
	type plain Decision
	p := plain(d)
	p.Options = nonNil(p.Options)
	return json.Marshal(p)
}

// DecisionAnswer is how a decision was answered.
type DecisionAnswer struct {
	// Option is the chosen label, one of Decision.Options. Choice: an
	// empty label reads as absent (the dialect has no empty label).
	Option string `json:"option,omitempty"`
	// Text is the free-text answer or feedback.
	Text string `json:"text,omitempty"`
	TS   int64  `json:"ts"`
}

// Repo is a registered local git repository with the worktrees of its
// tasks. repo.upsert replaces it whole by ID.
type Repo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Path is the absolute path of the user's checkout.
	Path string `json:"path"`
	// Branch is the base branch agents branch from and merge into.
	Branch string `json:"branch"`
	// Head is the short sha of the base branch.
	Head string `json:"head,omitempty"`
	// Dirty: the checkout has uncommitted tracked changes (merges are
	// refused while it is).
	Dirty bool `json:"dirty"`
	// Worktrees is always encoded, [] when there are none.
	Worktrees []Worktree `json:"worktrees"`
	// CI is the latest CI/test result across the repo (the dialect spells
	// the same four values inline).
	CI CiStatus `json:"ci"`
}

// MarshalJSON encodes r with Worktrees as [] when nil, since the field is required.
func (r Repo) MarshalJSON() ([]byte, error) {
	type plain Repo
	p := plain(r)
	p.Worktrees = nonNil(p.Worktrees)
	return json.Marshal(p)
}

// Worktree is one task's worktree of a repo and how far it is from base.
type Worktree struct {
	// ID is what diff.request names as its worktree, e.g. "kit-t2".
	ID      string `json:"id"`
	AgentID string `json:"agentId"`
	TaskID  string `json:"taskId,omitempty"`
	Branch  string `json:"branch"`
	// Base is the branch it was created from and will merge into.
	Base   string         `json:"base"`
	Path   string         `json:"path"`
	Status WorktreeStatus `json:"status"`
	// Ahead counts the commits on Branch that are not on Base.
	Ahead int `json:"ahead"`
	// Files counts the files changed vs base, uncommitted ones included.
	Files     int `json:"files"`
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
}

// MemoryEntry is one markdown note of the team's memory, shared or one
// agent's. memory.upsert replaces it whole by ID.
type MemoryEntry struct {
	// ID is "shared/<slug>" or "<agentId>/<slug>".
	ID string `json:"id"`
	// Scope is ScopeShared or an agent id.
	Scope string `json:"scope"`
	Title string `json:"title"`
	// Body is markdown.
	Body    string `json:"body"`
	Updated int64  `json:"updated"`
	// Author is the agent id or User that last wrote it.
	Author string `json:"author,omitempty"`
}

// Goal is what the person asked the team for. goal.upsert replaces it whole
// by ID; the latest goal is the current one.
type Goal struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Progress is a number; the dialect gives no range, the examples use
	// fractions of 1 (0.39). Choice: encoded as is, not checked.
	Progress  float64    `json:"progress"`
	Status    GoalStatus `json:"status"`
	RepoID    string     `json:"repoId,omitempty"`
	CreatedAt int64      `json:"createdAt"`
	UpdatedAt int64      `json:"updatedAt"`
}

// FeedItem is one line of the activity feed (appended, never replaced).
type FeedItem struct {
	TS   int64    `json:"ts"`
	Kind FeedKind `json:"kind"`
	Text string   `json:"text"`
	// AgentID is who it is about or from.
	AgentID string `json:"agentId,omitempty"`
	// To is a message's recipient: an agent id, User or All.
	To string `json:"to,omitempty"`
}

// ForemanStatus is the server's backend and auth status, shown as a banner.
type ForemanStatus struct {
	Version string      `json:"version"`
	Backend BackendName `json:"backend"`
	Auth    AuthStatus  `json:"auth"`
	// Message is the human-readable backend/auth status for the banner.
	Message string `json:"message,omitempty"`
	// Account is e.g. the organization or plan when auth is ok.
	Account string `json:"account,omitempty"`
	// Speed is the sim speed multiplier. A pointer: absent and 0 differ.
	Speed *float64 `json:"speed,omitempty"`
	// Showcase: sim holds a static showcase state. A pointer, so that an
	// explicit false survives a round trip.
	Showcase *bool `json:"showcase,omitempty"`
	// CostUSD is the estimated spend of this profile. A pointer: a spend of
	// 0 is sent as 0, not omitted.
	CostUSD *float64 `json:"costUsd,omitempty"`
	// UserName is the person the team works for, as the agents address them.
	UserName string `json:"userName,omitempty"`
}

// AgentLogs is the recent log tail of one agent (at most LogTailMax
// entries in a snapshot).
type AgentLogs struct {
	AgentID string `json:"agentId"`
	// Entries is always encoded, [] when there are none.
	Entries []LogEntry `json:"entries"`
}

// MarshalJSON encodes l with Entries as [] when nil, since the field is required.
func (l AgentLogs) MarshalJSON() ([]byte, error) {
	type plain AgentLogs
	p := plain(l)
	p.Entries = nonNil(p.Entries)
	return json.Marshal(p)
}

// DiffFile is one changed file of a structured diff.
type DiffFile struct {
	Path string `json:"path"`
	// OldPath is set for renames only.
	OldPath   string         `json:"oldPath,omitempty"`
	Status    DiffFileStatus `json:"status"`
	Binary    bool           `json:"binary"`
	Additions int            `json:"additions"`
	Deletions int            `json:"deletions"`
	// Hunks is always encoded, [] for a binary file.
	Hunks []DiffHunk `json:"hunks"`
}

// MarshalJSON encodes f with Hunks as [] when nil, since the field is required.
func (f DiffFile) MarshalJSON() ([]byte, error) {
	type plain DiffFile
	p := plain(f)
	p.Hunks = nonNil(p.Hunks)
	return json.Marshal(p)
}

// DiffHunk is one hunk of a DiffFile.
type DiffHunk struct {
	// Header is the whole "@@ -12,6 +12,9 @@ ..." line.
	Header   string `json:"header"`
	OldStart int    `json:"oldStart"`
	OldLines int    `json:"oldLines"`
	NewStart int    `json:"newStart"`
	NewLines int    `json:"newLines"`
	// Lines is always encoded, [] when there are none.
	Lines []DiffLine `json:"lines"`
}

// MarshalJSON encodes h with Lines as [] when nil, since the field is required.
func (h DiffHunk) MarshalJSON() ([]byte, error) {
	type plain DiffHunk
	p := plain(h)
	p.Lines = nonNil(p.Lines)
	return json.Marshal(p)
}

// DiffLine is one line of a hunk.
type DiffLine struct {
	Kind DiffLineKind `json:"kind"`
	// Text is the line without its +/-/space prefix.
	Text string `json:"text"`
	// OldNo is the line number in base (del, ctx lines); a pointer so that
	// presence follows the line's kind, not its value.
	OldNo *int `json:"oldNo,omitempty"`
	// NewNo is the line number in the branch (add, ctx lines).
	NewNo *int `json:"newNo,omitempty"`
}

// nonNil returns s, or an empty slice if s is nil, so that a required list
// is encoded as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
