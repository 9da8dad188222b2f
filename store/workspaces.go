package store

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// Workspace is the durable record of one workspace (docs/protocol.md
// §10.1a): a git worktree the daemon created on a branch of its own. It
// lives in the "workspaces" bucket under WorkspaceID, and the
// "workspace_paths" bucket maps the WorktreePath of every record that is
// not retired to its id, so two live records never claim one worktree.
//
// The record is written before each git step (state creating, retiring),
// so a crash leaves a state startup can reconcile. The JSON field names are
// the stored format; add fields with omitempty and never rename one.
//
// CommonDir is internal: it never reaches the wire (Info leaves it out, as
// it leaves out CreatedPath).
type Workspace struct {
	WorkspaceID string                      `json:"workspace_id"` // required; the key; never changes
	Label       string                      `json:"label,omitempty"`
	Ownership   protocol.WorkspaceOwnership `json:"ownership"` // required; "managed"
	// RepoRoot is the main checkout's root (repository_cwd on the wire).
	RepoRoot string `json:"repo_root"` // required; absolute, clean
	// CommonDir is the repository's git common dir (internal only).
	CommonDir string `json:"common_dir"` // required; absolute, clean
	// WorktreePath is the worktree's root (cwd on the wire).
	WorktreePath      string                  `json:"worktree_path"` // required; absolute, clean
	Branch            string                  `json:"branch"`        // required
	BaseRef           string                  `json:"base_ref,omitempty"`
	BaseSHA           string                  `json:"base_sha,omitempty"`
	IntegrationTarget string                  `json:"integration_target,omitempty"`
	HeadSHA           string                  `json:"head_sha,omitempty"` // the branch head as last recorded
	State             protocol.WorkspaceState `json:"state"`              // required
	ConflictReason    string                  `json:"conflict_reason,omitempty"`
	CreatedAt         int64                   `json:"created_at"` // epoch milliseconds
	UpdatedAt         int64                   `json:"updated_at"` // epoch milliseconds; the caller sets it
	RetiredAt         int64                   `json:"retired_at,omitempty"`
	// AgentIDs are the bound agents, in binding order, without repeats.
	AgentIDs []string `json:"agent_ids,omitempty"`
	// Tombstone is required once retired.
	Tombstone *WorkspaceTombstone `json:"tombstone,omitempty"`
	// RetireDisposition is the branch disposition of the retire under way
	// (set with state retiring, cleared if the retire is rolled back), so
	// that startup can finish a retire a crash cut short as it was asked.
	RetireDisposition protocol.BranchDisposition `json:"retire_disposition,omitempty"`
	// CreatedPath records what the daemon created, so that it can later
	// prove a worktree on disk is its own before it removes anything.
	CreatedPath *CreatedPath `json:"created_path,omitempty"`
	// JobID names the subagent job whose isolated runs work here
	// (subagent.create isolation "workspace"): the record was committed
	// with the job, in state creating, before git made anything.
	JobID string `json:"job_id,omitempty"`
}

// WorkspaceTombstone keeps what a retired workspace's branch was, so that
// even a confirmed deletion can be undone by hand (`git branch <Branch>
// <HeadSHA>`).
type WorkspaceTombstone struct {
	Branch  string `json:"branch"`
	HeadSHA string `json:"head_sha"`
	Deleted bool   `json:"deleted"` // retire deleted the branch
	// Disposition and Proof say what retire was asked and how a deletion
	// was justified (protocol.MergeProof; "confirmed" when not proven).
	Disposition protocol.BranchDisposition `json:"disposition,omitempty"`
	Proof       protocol.MergeProof        `json:"proof,omitempty"`
}

// CreatedPath is the daemon's marker of a worktree it created: the path as
// created, the directory's identity (device and inode) right after git
// made it, and a random token the daemon also wrote into the worktree's
// git admin dir. The daemon treats a directory as its own only when all of
// them still match; what counts as a match is its decision, the store just
// keeps the facts. Zero Dev/Ino or an empty Token mean "not recorded".
type CreatedPath struct {
	Path      string `json:"path"`
	Dev       uint64 `json:"dev,omitempty"`
	Ino       uint64 `json:"ino,omitempty"`
	Token     string `json:"token,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"` // epoch milliseconds
}

// Info returns the record's transport-safe projection: everything the
// record knows, without CommonDir or CreatedPath. Live git facts (ahead,
// behind, dirty, a fresher head) are the caller's to add.
func (w *Workspace) Info() protocol.WorkspaceInfo {
	info := protocol.WorkspaceInfo{
		WorkspaceID:       w.WorkspaceID,
		Label:             w.Label,
		Cwd:               w.WorktreePath,
		RepositoryCwd:     w.RepoRoot,
		Ownership:         w.Ownership,
		State:             w.State,
		Branch:            w.Branch,
		BaseRef:           w.BaseRef,
		BaseSHA:           w.BaseSHA,
		IntegrationTarget: w.IntegrationTarget,
		HeadSHA:           w.HeadSHA,
		CreatedAt:         w.CreatedAt,
		UpdatedAt:         w.UpdatedAt,
		RetiredAt:         w.RetiredAt,
		AgentCount:        len(w.AgentIDs),
		AgentIDs:          slices.Clone(w.AgentIDs),
		ConflictReason:    w.ConflictReason,
	}
	if t := w.Tombstone; t != nil {
		info.Tombstone = &protocol.WorkspaceTombstone{Branch: t.Branch, HeadSHA: t.HeadSHA, Deleted: t.Deleted}
	}
	return info
}

// Live reports whether the record still claims its worktree path (every
// state but retired).
func (w *Workspace) Live() bool { return w.State != protocol.WorkspaceStateRetired }

// validate reports a record missing a required field or breaking an
// invariant.
func (w *Workspace) validate() error {
	id := w.WorkspaceID
	switch {
	case id == "":
		return fmt.Errorf("%w: workspace has no workspace_id", ErrInvalid)
	case w.Ownership != protocol.OwnershipManaged:
		return fmt.Errorf("%w: workspace %q has ownership %q", ErrInvalid, id, w.Ownership)
	case !w.State.Valid():
		return fmt.Errorf("%w: workspace %q has state %q", ErrInvalid, id, w.State)
	case w.Branch == "":
		return fmt.Errorf("%w: workspace %q has no branch", ErrInvalid, id)
	case w.State == protocol.WorkspaceStateRetired && (w.Tombstone == nil || w.RetiredAt == 0):
		return fmt.Errorf("%w: retired workspace %q needs a tombstone and retired_at", ErrInvalid, id)
	}
	for _, p := range [...]struct{ name, v string }{
		{"repo_root", w.RepoRoot}, {"common_dir", w.CommonDir}, {"worktree_path", w.WorktreePath},
	} {
		// Paths are compared as keys (workspace_paths), so they must be
		// in one canonical form.
		if p.v == "" || !filepath.IsAbs(p.v) || filepath.Clean(p.v) != p.v {
			return fmt.Errorf("%w: workspace %q: %s %q is not an absolute, clean path", ErrInvalid, id, p.name, p.v)
		}
	}
	if slices.Contains(w.AgentIDs, "") {
		return fmt.Errorf("%w: workspace %q binds an empty agent id", ErrInvalid, id)
	}
	for i, a := range w.AgentIDs {
		if slices.Contains(w.AgentIDs[:i], a) {
			return fmt.Errorf("%w: workspace %q binds agent %q twice", ErrInvalid, id, a)
		}
	}
	return nil
}

// optionalBucket returns the named bucket or nil. Reads use it for the
// workspace buckets so that a file written by a build before workspaces,
// opened read-only (shardctl doctor offline: no buckets are created), reads
// as having none instead of failing.
func optionalBucket(tx *bolt.Tx, name string) *bolt.Bucket { return tx.Bucket([]byte(name)) }

// claimPath makes the workspace_paths entry of a live record, refusing a
// path another live record holds.
func claimPath(tx *bolt.Tx, w *Workspace) error {
	paths, err := bucket(tx, bucketWorkspacePaths)
	if err != nil {
		return err
	}
	if prev := paths.Get([]byte(w.WorktreePath)); prev != nil && string(prev) != w.WorkspaceID {
		return fmt.Errorf("%w: worktree %q belongs to workspace %q", ErrConflict, w.WorktreePath, prev)
	}
	return paths.Put([]byte(w.WorktreePath), []byte(w.WorkspaceID))
}

// releasePath drops the workspace_paths entry of path if it is id's.
func releasePath(tx *bolt.Tx, path, id string) error {
	paths, err := bucket(tx, bucketWorkspacePaths)
	if err != nil {
		return err
	}
	if prev := paths.Get([]byte(path)); prev != nil && string(prev) == id {
		return paths.Delete([]byte(path))
	}
	return nil
}

// CreateWorkspace stores a new record. It fails with ErrInvalid on a
// record missing a required field, and with ErrConflict when the id is
// taken (that error wraps ErrExists too, as CreateAgent's does) or when a
// live record (any state but retired) already holds the same
// WorktreePath. Nothing is written on error.
func (s *Store) CreateWorkspace(w Workspace) error {
	if err := w.validate(); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		taken, err := exists(tx, bucketWorkspaces, w.WorkspaceID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: %w: workspace %q", ErrConflict, ErrExists, w.WorkspaceID)
		}
		if w.Live() {
			if err := claimPath(tx, &w); err != nil {
				return err
			}
		}
		return putJSON(tx, bucketWorkspaces, w.WorkspaceID, w)
	})
	return wrapOp(err, "create workspace %q", w.WorkspaceID)
}

// GetWorkspace returns the record for id, or an error wrapping
// ErrNotFound.
func (s *Store) GetWorkspace(id string) (Workspace, error) {
	var w Workspace
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getWorkspace(tx, id, &w)
		if err == nil && !found {
			err = fmt.Errorf("%w: workspace %q", ErrNotFound, id)
		}
		return err
	})
	if err != nil {
		return Workspace{}, wrapOp(err, "get workspace %q", id)
	}
	return w, nil
}

func getWorkspace(tx *bolt.Tx, id string, w *Workspace) (bool, error) {
	if optionalBucket(tx, bucketWorkspaces) == nil {
		return false, nil
	}
	return getJSON(tx, bucketWorkspaces, id, w)
}

// WorkspaceByPath returns the live record that holds worktree path (which
// must be in the clean, absolute form records use), or an error wrapping
// ErrNotFound. Startup reconciliation asks it of every worktree it finds.
func (s *Store) WorkspaceByPath(path string) (Workspace, error) {
	var w Workspace
	err := s.db.View(func(tx *bolt.Tx) error {
		var id string
		if paths := optionalBucket(tx, bucketWorkspacePaths); paths != nil {
			id = string(paths.Get([]byte(path))) // string() copies out of bbolt's memory
		}
		found := false
		if id != "" {
			var err error
			if found, err = getWorkspace(tx, id, &w); err != nil {
				return err
			}
		}
		if !found {
			return fmt.Errorf("%w: no workspace holds %q", ErrNotFound, path)
		}
		return nil
	})
	if err != nil {
		return Workspace{}, wrapOp(err, "workspace of %q", path)
	}
	return w, nil
}

// WorkspaceFilter selects records for ListWorkspaces. The zero value
// selects every live record.
type WorkspaceFilter struct {
	// RepoRoot keeps records of that main checkout only; "" keeps all.
	RepoRoot string
	// IncludeRetired keeps retired records too. Default false.
	IncludeRetired bool
}

// ListWorkspaces returns the records f selects, oldest first (by
// CreatedAt, then WorkspaceID). It returns an empty, non-nil slice when
// there are none.
func (s *Store) ListWorkspaces(f WorkspaceFilter) ([]Workspace, error) {
	out := []Workspace{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if optionalBucket(tx, bucketWorkspaces) == nil {
			return nil
		}
		all, err := listJSON[Workspace](tx, bucketWorkspaces)
		if err != nil {
			return err
		}
		for _, w := range all {
			if (f.RepoRoot == "" || w.RepoRoot == f.RepoRoot) && (f.IncludeRetired || w.Live()) {
				out = append(out, w)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "list workspaces")
	}
	slices.SortFunc(out, func(a, b Workspace) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.WorkspaceID, b.WorkspaceID))
	})
	return out, nil
}

// UpdateWorkspace reads the record for id, lets fn modify it, and writes
// the result, all in one transaction: fn checks the state it expects
// (compare-and-set) and returns an error — ErrConflict when the record
// moved on — to write nothing; that error is returned (wrapped). The
// result must keep its WorkspaceID and required fields (ErrInvalid). The
// path claim follows the record: retiring releases its WorktreePath, and a
// live record moved to a path another live record holds is ErrConflict. A
// missing id is ErrNotFound. It returns the stored record. fn runs inside
// the write transaction: it must be quick and must not call back into the
// Store; it may run more than once (a group-commit retry, on a fresh copy).
func (s *Store) UpdateWorkspace(id string, fn func(*Workspace) error) (Workspace, error) {
	var w Workspace
	err := s.update(func(tx *bolt.Tx) error {
		w = Workspace{} // a group-commit retry runs this again
		found, err := getJSON(tx, bucketWorkspaces, id, &w)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: workspace %q", ErrNotFound, id)
		}
		old := w
		if err := fn(&w); err != nil {
			return err
		}
		return putWorkspace(tx, &old, &w)
	})
	if err != nil {
		return Workspace{}, wrapOp(err, "update workspace %q", id)
	}
	return w, nil
}

// putWorkspace writes w over old (the stored version), keeping the path
// index in step.
func putWorkspace(tx *bolt.Tx, old, w *Workspace) error {
	if w.WorkspaceID != old.WorkspaceID {
		return fmt.Errorf("%w: workspace_id of %q may not change (to %q)", ErrInvalid, old.WorkspaceID, w.WorkspaceID)
	}
	if err := w.validate(); err != nil {
		return err
	}
	if old.Live() && (!w.Live() || w.WorktreePath != old.WorktreePath) {
		if err := releasePath(tx, old.WorktreePath, old.WorkspaceID); err != nil {
			return err
		}
	}
	if w.Live() {
		if err := claimPath(tx, w); err != nil {
			return err
		}
	}
	return putJSON(tx, bucketWorkspaces, w.WorkspaceID, w)
}

// bindable refuses to bind agents to a workspace that is going away.
func bindable(w *Workspace) error {
	if w.State == protocol.WorkspaceStateRetiring || w.State == protocol.WorkspaceStateRetired {
		return fmt.Errorf("%w: workspace %q is %s", ErrConflict, w.WorkspaceID, w.State)
	}
	return nil
}

// BindWorkspaceAgent records that agentID works in workspace id (a chain
// step continuing in the previous step's workspace, a re-bind at
// reconciliation). Binding an agent already bound changes nothing. A
// retiring or retired workspace is ErrConflict; other states are the
// caller's to judge. It returns the stored record.
func (s *Store) BindWorkspaceAgent(id, agentID string) (Workspace, error) {
	if agentID == "" {
		return Workspace{}, fmt.Errorf("%w: bind an empty agent id to workspace %q", ErrInvalid, id)
	}
	return s.UpdateWorkspace(id, func(w *Workspace) error {
		if slices.Contains(w.AgentIDs, agentID) {
			return nil
		}
		if err := bindable(w); err != nil {
			return err
		}
		w.AgentIDs = append(w.AgentIDs, agentID)
		return nil
	})
}

// UnbindWorkspaceAgent forgets that agentID works in workspace id, in any
// state. Unbinding an agent not bound changes nothing. It returns the
// stored record.
func (s *Store) UnbindWorkspaceAgent(id, agentID string) (Workspace, error) {
	return s.UpdateWorkspace(id, func(w *Workspace) error {
		w.AgentIDs = slices.DeleteFunc(w.AgentIDs, func(a string) bool { return a == agentID })
		if len(w.AgentIDs) == 0 {
			w.AgentIDs = nil
		}
		return nil
	})
}

// CreateWorkspaceAgent stores a new Agent manifest and binds it to
// workspace id in one transaction (workspace.create and workspace.attach
// launch a fresh Agent; a crash never leaves one without the other). The
// agent must run in the worktree: a.Cwd must equal WorktreePath
// (ErrInvalid). A taken agent id is ErrExists; a retiring or retired
// workspace is ErrConflict; a missing one ErrNotFound. Nothing is written
// on error. It returns the stored workspace.
func (s *Store) CreateWorkspaceAgent(id string, a Agent) (Workspace, error) {
	if err := a.validate(); err != nil {
		return Workspace{}, err
	}
	var w Workspace
	err := s.update(func(tx *bolt.Tx) error {
		w = Workspace{}
		found, err := getJSON(tx, bucketWorkspaces, id, &w)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: workspace %q", ErrNotFound, id)
		}
		if err := bindable(&w); err != nil {
			return err
		}
		if a.Cwd != w.WorktreePath {
			return fmt.Errorf("%w: agent %q runs in %q, not in workspace %q's worktree", ErrInvalid, a.AgentID, a.Cwd, id)
		}
		taken, err := exists(tx, bucketAgents, a.AgentID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: agent %q", ErrExists, a.AgentID)
		}
		if err := putAgent(tx, &a); err != nil {
			return err
		}
		old := w
		old.AgentIDs = slices.Clone(w.AgentIDs)
		if !slices.Contains(w.AgentIDs, a.AgentID) {
			w.AgentIDs = append(w.AgentIDs, a.AgentID)
		}
		return putWorkspace(tx, &old, &w)
	})
	if err != nil {
		return Workspace{}, wrapOp(err, "create agent %q in workspace %q", a.AgentID, id)
	}
	return w, nil
}
