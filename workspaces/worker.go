package workspaces

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/diff"
	"github.com/shard-dev/shard/workspaces/git"
)

// maxDiffBytes is the most hunk text a workspace.diff may ask for with
// max_bytes (a choice: 4 MiB fits one response record well under the
// gateway's 8 MiB outbox); without max_bytes the cap is
// diff.DefaultMaxBytes (1 MiB).
const maxDiffBytes = 4 << 20

// worker does one command's work off the mailbox. It holds only values
// safe to share between goroutines.
type worker struct {
	deps  Deps
	locks *git.Locks
	sys   *actor.ActorSystem
}

func (w *worker) now() int64 { return w.deps.Clock.Now().UnixMilli() }

func (w *worker) lock(ctx context.Context, commonDir string) (func(), error) {
	unlock, err := w.locks.Lock(ctx, commonDir)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeTimeout, "waiting for another operation on the repository: %w", err)
	}
	return unlock, nil
}

func refuse(kind protocol.WorkspaceRefusalKind, id, reason string) *protocol.Error {
	return protocol.WorkspaceRefusal{Kind: kind, WorkspaceID: id, Reason: reason}.Err()
}

func failed(err error) *done { return &done{err: err} }

func internal(err error) error {
	if _, ok := errors.AsType[*protocol.Error](err); ok {
		return err
	}
	return protocol.Errorf(protocol.CodeInternal, "%w", err)
}

// inspectErr maps an Inspect failure onto a typed refusal.
func inspectErr(cwd string, err error) error {
	var opErr *git.OperationError
	switch {
	case errors.As(err, &opErr):
		return refuse(protocol.RefusalRepositoryBusy, "", fmt.Sprintf("a %s is in progress in the repository", opErr.Op))
	case errors.Is(err, git.ErrNotRepository):
		return refuse(protocol.RefusalNotARepository, "", fmt.Sprintf("%s is not inside a git repository", cwd))
	case errors.Is(err, git.ErrBareRepository):
		return refuse(protocol.RefusalNotARepository, "", "the repository is bare: it has no main checkout to branch from")
	case errors.Is(err, git.ErrNoCommits):
		return refuse(protocol.RefusalBaseRefUnknown, "", "the repository has no commits yet")
	}
	return internal(err)
}

// repoOf is the git.Repo a record describes (the main checkout's root and
// the common dir; Worktree is the record's worktree).
func repoOf(rec store.Workspace) git.Repo {
	return git.Repo{Root: rec.RepoRoot, CommonDir: rec.CommonDir, Worktree: rec.WorktreePath}
}

// canonicalDir makes dir, resolves its symlinks and cleans it, so that
// paths under it compare equal to the ones git reports.
func canonicalDir(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return filepath.Clean(r), nil
}

// worktreePath is where a workspace's worktree goes: one directory per
// repository under the root, named after the repository and a short hash
// of its main checkout root (two repositories of one name do not share
// it), then the workspace id (unique, so two workspaces never race for
// one path).
func worktreePath(root string, repo git.Repo, id string) string {
	sum := sha256.Sum256([]byte(repo.Root))
	name := strings.Trim(nonName(filepath.Base(repo.Root)), "-")
	if name == "" {
		name = "repo"
	}
	return filepath.Join(root, name+"-"+hex.EncodeToString(sum[:4]), id)
}

func nonName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// shortID is the tail of a ULID-based id: its random part, enough to tell
// workspaces of one repository apart in a generated branch name.
func shortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func (w *worker) newAgent(cwd string, name, model, provider, mode, title string) store.Agent {
	if mode == "" {
		mode = w.deps.DefaultMode
	}
	return store.Agent{
		AgentID:     ids.New(ids.Agent),
		SessionID:   ids.New(ids.Session),
		Cwd:         cwd,
		Name:        name,
		Model:       model,
		Provider:    provider,
		Mode:        mode,
		DisplayName: title,
		CreatedAt:   w.now(),
	}
}

func createdEvent(rec store.Workspace) []byte {
	return protocol.MustMarshal(protocol.WorkspaceCreated{
		Header: protocol.Header{Type: protocol.TypeWorkspaceCreated}, Workspace: rec.Info().Summary()})
}

func attachedEvent(rec store.Workspace, a store.Agent) []byte {
	return protocol.MustMarshal(protocol.WorkspaceAttached{
		Header:    protocol.Header{Type: protocol.TypeWorkspaceAttached, AgentID: a.AgentID},
		SessionID: a.SessionID, Workspace: rec.Info().Summary()})
}

func conflictEvent(rec store.Workspace, reason string) []byte {
	return protocol.MustMarshal(protocol.WorkspaceConflict{
		Header: protocol.Header{Type: protocol.TypeWorkspaceConflict}, Reason: reason, Workspace: rec.Info().Summary()})
}

// ---- create ----

func (w *worker) create(ctx context.Context, req *protocol.WorkspaceCreate) *done {
	g := w.deps.Git
	repo, err := g.Inspect(ctx, req.Cwd)
	if err != nil {
		return failed(inspectErr(req.Cwd, err))
	}
	root, err := canonicalDir(w.deps.Root)
	if err != nil {
		return failed(internal(fmt.Errorf("worktree root: %w", err)))
	}
	unlock, err := w.lock(ctx, repo.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()

	// Integration target: given (it must resolve), else the main
	// checkout's branch. A detached main checkout has none to default to:
	// refused as base_ref_unknown naming the field to give (a choice).
	target := req.IntegrationTarget
	if target == "" {
		if target, err = repo.RequireBranch(); err != nil {
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBaseRefUnknown,
				Reason: "the main checkout is on a detached HEAD; give integration_target"}.Err())
		}
	} else if _, err := g.ResolveCommit(ctx, repo.Root, target); err != nil {
		if errors.Is(err, git.ErrRefUnknown) {
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBaseRefUnknown, IntegrationTarget: target,
				Reason: fmt.Sprintf("integration_target %q does not name a commit", target)}.Err())
		}
		return failed(internal(err))
	}
	baseRef, baseSHA := req.BaseRef, repo.HEAD
	if baseRef != "" {
		if baseSHA, err = g.ResolveCommit(ctx, repo.Root, baseRef); err != nil {
			if errors.Is(err, git.ErrRefUnknown) {
				return failed(refuse(protocol.RefusalBaseRefUnknown, "", fmt.Sprintf("base_ref %q does not name a commit", baseRef)))
			}
			return failed(internal(err))
		}
	} else if baseRef = repo.CurrentBranch; baseRef == "" {
		baseRef = "HEAD"
	}
	id := ids.New(ids.Workspace)
	branch := req.Branch
	if branch == "" {
		branch = git.BranchName(req.Label, shortID(id))
	}
	if _, err := g.BranchHead(ctx, repo, branch); err == nil {
		return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, Branch: branch,
			Reason: fmt.Sprintf("branch %q already exists", branch)}.Err())
	}
	path := worktreePath(root, repo, id)
	if _, err := os.Lstat(path); err == nil {
		return failed(refuse(protocol.RefusalPathTaken, "", "the worktree path is taken"))
	}

	now := w.now()
	rec := store.Workspace{
		WorkspaceID: id, Label: req.Label, Ownership: protocol.OwnershipManaged,
		RepoRoot: repo.Root, CommonDir: repo.CommonDir, WorktreePath: path,
		Branch: branch, BaseRef: baseRef, BaseSHA: baseSHA, IntegrationTarget: target, HeadSHA: baseSHA,
		State: protocol.WorkspaceStateCreating, CreatedAt: now, UpdatedAt: now,
	}
	// The record first (durable): a crash from here on leaves a creating
	// record that startup reconciles.
	if err := w.deps.Store.CreateWorkspace(rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return failed(refuse(protocol.RefusalPathTaken, "", "the worktree path belongs to another workspace"))
		}
		return failed(internal(err))
	}
	orig := rec // what is on disk is described by this until activation
	created, err := g.CreateWorktree(ctx, repo, path, branch, baseSHA)
	if err != nil {
		var why string
		if refusedBeforeChange(err) {
			// CreateWorktree refused before it changed anything: the branch
			// or path it names is not ours, so nothing on disk is touched.
			why = w.retireFailed(rec, "git refused the worktree", false)
		} else {
			why = w.rollback(ctx, rec, "git worktree add failed", true)
		}
		switch {
		case errors.Is(err, git.ErrBranchExists):
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, WorkspaceID: id, Branch: branch,
				Reason: fmt.Sprintf("branch %q already exists", branch)}.Err())
		case errors.Is(err, git.ErrInvalidBranchName):
			return failed(protocol.Errorf(protocol.CodeInvalidRequest, `field "branch": %q is not a valid branch name`, branch))
		case errors.Is(err, git.ErrRefUnknown):
			return failed(refuse(protocol.RefusalBaseRefUnknown, id, "base_ref does not name a commit"))
		case errors.Is(err, git.ErrPathTaken):
			return failed(refuse(protocol.RefusalPathTaken, id, "the worktree path is taken"))
		}
		return failed(internal(fmt.Errorf("create worktree (%s): %w", why, err)))
	}
	if err := copyFiles(repo.Root, created.Path, w.deps.CopyFiles); err != nil {
		w.rollback(ctx, recWith(orig, created), "copying workspaces.copy_files failed", true)
		return failed(internal(err))
	}
	if err := w.setup(ctx, id, repo.Root, created.Path); err != nil {
		why := w.rollback(ctx, recWith(orig, created), "workspaces.setup_command failed", true)
		return failed(protocol.Errorf(protocol.CodeConflict, "%w (the create was rolled back: %s)", err, why))
	}
	marker := &store.CreatedPath{Path: created.Path, CreatedAt: w.now()}
	if fi, err := os.Stat(created.Path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			marker.Dev, marker.Ino = uint64(st.Dev), st.Ino
		}
	}
	if tok, err := writeToken(created.Path); err == nil {
		marker.Token = tok
	} else {
		w.deps.Logger.Warn("workspaces: worktree token not written", "workspace_id", id, "err", err)
	}
	rec, err = w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
		if r.State != protocol.WorkspaceStateCreating {
			return fmt.Errorf("%w: workspace %s is %s", store.ErrConflict, id, r.State)
		}
		r.WorktreePath, r.BaseSHA, r.HeadSHA = created.Path, created.Base, created.Base
		r.CreatedPath = marker
		r.State = protocol.WorkspaceStateActive
		r.UpdatedAt = w.now()
		return nil
	})
	if err != nil {
		w.rollback(ctx, recWith(orig, created), "recording the worktree failed", true)
		return failed(internal(err))
	}
	ag := w.newAgent(rec.WorktreePath, req.Name, req.Model, req.Provider, req.Mode, req.Title)
	rec, err = w.deps.Store.CreateWorkspaceAgent(id, ag)
	if err != nil {
		cur, gerr := w.deps.Store.GetWorkspace(id)
		if gerr != nil {
			cur = recWith(orig, created)
		}
		w.rollback(ctx, cur, "storing the workspace's agent failed", true)
		return failed(internal(err))
	}
	return &done{
		data:   protocol.WorkspaceCreateData{AgentID: ag.AgentID, SessionID: ag.SessionID, Workspace: rec.Info()},
		adopt:  []store.Agent{ag},
		events: [][]byte{createdEvent(rec), attachedEvent(rec, ag)},
	}
}

// copyFiles copies each listed regular file from the main checkout into
// the new worktree, keeping its mode; missing files, symlinks and
// anything but a regular file are skipped, and a name that would leave
// either root is refused (config validates it already).
func copyFiles(from, to string, names []string) error {
	for _, name := range names {
		rel := filepath.Clean(name)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("copy_files: %q leaves the repository", name)
		}
		src := filepath.Join(from, rel)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
	}
	return nil
}

// maxSetupOutput bounds the setup command's output kept for the error.
const maxSetupOutput = 4 << 10

// setup runs Deps.SetupCommand in the new worktree, if one is configured.
func (w *worker) setup(ctx context.Context, id, repoRoot, dir string) error {
	argv := strings.Fields(w.deps.SetupCommand)
	if len(argv) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SHARD_WORKSPACE_ID="+id, "SHARD_WORKSPACE_CWD="+dir, "SHARD_REPOSITORY_CWD="+repoRoot)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if len(out) > maxSetupOutput {
		out = out[len(out)-maxSetupOutput:]
	}
	return fmt.Errorf("setup command %q failed: %w: %s", argv[0], err, strings.TrimSpace(string(out)))
}

// recWith is the record to roll back: what create first wrote, with the
// worktree path git made (canonical, possibly spelt differently).
func recWith(rec store.Workspace, created git.Created) store.Workspace {
	if created.Path != "" {
		rec.WorktreePath = created.Path
	}
	return rec
}

// rollback undoes a create that failed after its record was durable:
// it removes the worktree and the branch only if they are still exactly
// what the create made (the worktree registered at the recorded path on
// the recorded branch and clean, the branch at the base commit; git's own
// `worktree remove` without --force refuses anything else again), then
// retires the record with a tombstone saying nothing was kept. Whatever it
// cannot undo it leaves in place and says so (the returned text, logged).
// The caller holds the repository's lock.
//
// ours says that only this create wrote into the worktree (git's checkout,
// copy_files, the setup command; no agent ever ran there), so that a
// dirty worktree is removed with --force: what makes it dirty is ours.
// Startup reconciliation passes false: after a crash nobody can say who
// touched it since.
func (w *worker) rollback(ctx context.Context, rec store.Workspace, cause string, ours bool) string {
	g, repo := w.deps.Git, repoOf(rec)
	notes := []string{cause}
	_, err := g.CheckRetire(ctx, repo, git.Recorded{Path: rec.WorktreePath, Branch: rec.Branch})
	force := ours && errors.Is(err, git.ErrDirty)
	if err == nil || force {
		if err := g.RemoveWorktree(ctx, repo, rec.WorktreePath, force); err != nil {
			notes = append(notes, "worktree left in place: "+err.Error())
		} else {
			notes = append(notes, "worktree removed")
		}
	} else if !errors.Is(err, git.ErrMissingAuthority) {
		notes = append(notes, "worktree left in place: "+err.Error())
	}
	deleted := false
	if head, err := g.BranchHead(ctx, repo, rec.Branch); err == nil {
		if head == rec.BaseSHA {
			// Still at the base: it holds no work of anyone's.
			if err := g.DeleteBranch(ctx, repo, rec.Branch, head, git.Deletion{Confirmed: true}); err == nil {
				deleted = true
				notes = append(notes, "branch deleted")
			} else {
				notes = append(notes, "branch kept: "+err.Error())
			}
		} else {
			notes = append(notes, "branch kept: it moved off the base commit")
		}
	}
	return w.retireFailed(rec, strings.Join(notes, "; "), deleted)
}

// refusedBeforeChange reports a CreateWorktree refusal, which it makes
// before it changes anything.
func refusedBeforeChange(err error) bool {
	for _, s := range []error{git.ErrBranchExists, git.ErrInvalidBranchName, git.ErrRefUnknown, git.ErrPathTaken, git.ErrPathNotAbsolute} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// retireFailed retires the record of a failed create with a tombstone of
// its branch at the base commit, and ConflictReason saying what happened
// (a choice: the record is kept, not deleted, so the failure stays
// visible with include_retired). It returns that explanation.
func (w *worker) retireFailed(rec store.Workspace, why string, deleted bool) string {
	_, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		r.State = protocol.WorkspaceStateRetired
		r.ConflictReason = "create failed: " + why
		r.RetiredAt, r.UpdatedAt = w.now(), w.now()
		r.Tombstone = &store.WorkspaceTombstone{Branch: r.Branch, HeadSHA: r.BaseSHA, Deleted: deleted}
		return nil
	})
	if err != nil {
		why += "; record not retired: " + err.Error()
	}
	w.deps.Logger.Warn("workspaces: create rolled back", "workspace_id", rec.WorkspaceID, "what", why)
	return why
}

// ---- attach ----

func (w *worker) attach(ctx context.Context, req *protocol.WorkspaceAttach) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	unlock, err := w.lock(ctx, rec.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	if rec, err = w.get(req.WorkspaceID); err != nil {
		return failed(err)
	}
	switch rec.State {
	case protocol.WorkspaceStateActive:
	case protocol.WorkspaceStateMissing:
		return failed(refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the workspace's worktree or repository is gone"))
	default:
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", rec.WorkspaceID, rec.State))
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		d := w.markMissing(rec, "the worktree directory is gone")
		d.err = refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the worktree directory is gone")
		return d
	}
	ag := w.newAgent(rec.WorktreePath, req.Name, req.Model, req.Provider, req.Mode, req.Title)
	rec, err = w.deps.Store.CreateWorkspaceAgent(rec.WorkspaceID, ag)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is going away: %w", req.WorkspaceID, err))
		}
		return failed(internal(err))
	}
	return &done{
		data:   protocol.WorkspaceAttachData{AgentID: ag.AgentID, SessionID: ag.SessionID, Workspace: rec.Info()},
		adopt:  []store.Agent{ag},
		events: [][]byte{attachedEvent(rec, ag)},
	}
}

func (w *worker) get(id string) (store.Workspace, error) {
	rec, err := w.deps.Store.GetWorkspace(id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return rec, protocol.Errorf(protocol.CodeNotFound, "no workspace %s", id)
		}
		return rec, internal(err)
	}
	return rec, nil
}

// markMissing moves an active record to missing and returns the
// workspace_conflict broadcast (the caller holds the repository's lock).
func (w *worker) markMissing(rec store.Workspace, reason string) *done {
	upd, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		if r.State != protocol.WorkspaceStateActive {
			return fmt.Errorf("%w: workspace is %s", store.ErrConflict, r.State)
		}
		r.State, r.ConflictReason, r.UpdatedAt = protocol.WorkspaceStateMissing, reason, w.now()
		return nil
	})
	if err != nil {
		return &done{}
	}
	return &done{events: [][]byte{conflictEvent(upd, reason)}}
}

// ---- list and status ----

func (w *worker) list(ctx context.Context, req *protocol.WorkspaceList) *done {
	var commonDir string
	if req.Cwd != "" {
		// The repository of cwd, by its common dir: the same from the main
		// checkout and from every worktree, and readable even mid-rebase.
		out, err := w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: req.Cwd, ReadOnly: true,
			Args: []string{"rev-parse", "--path-format=absolute", "--git-common-dir"}})
		if err != nil {
			return failed(refuse(protocol.RefusalNotARepository, "", fmt.Sprintf("%s is not inside a git repository", req.Cwd)))
		}
		if commonDir, err = filepath.EvalSymlinks(strings.TrimSpace(string(out))); err != nil {
			return failed(internal(err))
		}
	}
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: req.IncludeRetired})
	if err != nil {
		return failed(internal(err))
	}
	out := []protocol.WorkspaceInfo{}
	for _, rec := range all {
		if commonDir == "" || rec.CommonDir == commonDir {
			out = append(out, rec.Info().Summary())
		}
	}
	return &done{data: protocol.WorkspaceListData{Workspaces: out}}
}

func (w *worker) status(ctx context.Context, req *protocol.WorkspaceStatus) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	if rec.State != protocol.WorkspaceStateActive {
		return &done{data: protocol.WorkspaceStatusData{Workspace: rec.Info()}}
	}
	unlock, err := w.lock(ctx, rec.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	if rec, err = w.get(req.WorkspaceID); err != nil {
		return failed(err)
	}
	g, repo := w.deps.Git, repoOf(rec)
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		d := w.markMissing(rec, "the worktree directory is gone")
		if cur, err := w.get(rec.WorkspaceID); err == nil {
			rec = cur
		}
		d.data = protocol.WorkspaceStatusData{Workspace: rec.Info()}
		return d
	}
	info := rec.Info()
	if head, err := g.BranchHead(ctx, repo, rec.Branch); err == nil {
		info.HeadSHA = head
		if head != rec.HeadSHA {
			if upd, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
				r.HeadSHA, r.UpdatedAt = head, w.now()
				return nil
			}); err == nil {
				info = upd.Info()
			}
		}
		if rec.IntegrationTarget != "" {
			out, err := g.Runner().Run(ctx, git.Invocation{Dir: rec.RepoRoot, ReadOnly: true,
				Args: []string{"rev-list", "--left-right", "--count", "--end-of-options", rec.IntegrationTarget + "..." + head}})
			if err == nil {
				if f := strings.Fields(string(out)); len(f) == 2 {
					behind, e1 := strconv.Atoi(f[0])
					ahead, e2 := strconv.Atoi(f[1])
					if e1 == nil && e2 == nil {
						info.Ahead, info.Behind = &ahead, &behind
					}
				}
			}
		}
	}
	if st, err := g.Status(ctx, rec.WorktreePath); err == nil {
		dirty := !st.Clean()
		info.Dirty = &dirty
	}
	return &done{data: protocol.WorkspaceStatusData{Workspace: info}}
}

// ---- retire ----

// proofOf names a git proof on the wire.
func proofOf(k git.ProofKind) protocol.MergeProof {
	switch k {
	case git.ProofSameCommit:
		return protocol.ProofSameCommit
	case git.ProofAncestor:
		return protocol.ProofAncestor
	case git.ProofEmptyDiff:
		return protocol.ProofEmptyDiff
	case git.ProofSameTree:
		return protocol.ProofSameTree
	case git.ProofMergeAddsNothing:
		return protocol.ProofMergeTree
	case git.ProofSquashMerged:
		return protocol.ProofPatchID
	}
	return ""
}

// refusalOf maps CheckRetire's typed refusal onto the wire's.
func refusalOf(id string, err error) error {
	ref, ok := errors.AsType[*git.Refusal](err)
	if !ok {
		return internal(err)
	}
	r := protocol.WorkspaceRefusal{WorkspaceID: id, Paths: ref.Paths, PathsTruncated: ref.Count > len(ref.Paths)}
	switch ref.Reason {
	case git.ReasonMissingAuthority:
		r.Kind, r.Reason = protocol.RefusalMissingAuthority, "the repository or the worktree is gone or moved ("+ref.Detail+")"
	case git.ReasonUnsafe:
		r.Kind, r.Reason = protocol.RefusalUnsafe, "the worktree is not the one the daemon created ("+ref.Detail+")"
	case git.ReasonLocked:
		r.Kind, r.Reason = protocol.RefusalLocked, "the worktree is locked"
		if ref.Note != "" {
			r.Reason += ": " + ref.Note
		}
	case git.ReasonSubmodules:
		r.Kind, r.Reason = protocol.RefusalSubmodules, "the worktree has initialized submodules"
	case git.ReasonDirty:
		r.Kind, r.Reason = protocol.RefusalDirty, fmt.Sprintf("the worktree has %d uncommitted or untracked path(s)", ref.Count)
	default:
		return internal(err)
	}
	if len(r.Paths) > protocol.MaxRefusalPaths {
		r.Paths, r.PathsTruncated = r.Paths[:protocol.MaxRefusalPaths], true
	}
	return r.Err()
}

// liveness asks the registry about the workspace's agents: busy (a turn
// in flight) before live (a runtime up).
func (w *worker) liveness(rec store.Workspace) error {
	if len(rec.AgentIDs) == 0 || w.deps.Registry == nil {
		return nil
	}
	res, err := w.sys.Root.RequestFuture(w.deps.Registry, &registry.AgentStates{AgentIDs: rec.AgentIDs}, 10*time.Second).Result()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "ask the registry about the workspace's agents: %w", err)
	}
	st, ok := res.(*registry.AgentStatesResult)
	if !ok {
		return protocol.Errorf(protocol.CodeInternal, "registry answered %T", res)
	}
	var busy, live []string
	for _, in := range st.Infos {
		switch {
		case in.Status == protocol.StatusStreaming || in.Status == protocol.StatusCompacting:
			busy = append(busy, in.AgentID)
		case in.RuntimeState == protocol.RuntimeStarting || in.RuntimeState == protocol.RuntimeRunning || in.RuntimeState == protocol.RuntimeStopping,
			st.Attachments[in.AgentID] > 0: // a client watches it there
			live = append(live, in.AgentID)
		}
	}
	if len(busy) > 0 {
		return protocol.WorkspaceRefusal{Kind: protocol.RefusalBusy, WorkspaceID: rec.WorkspaceID, AgentIDs: busy,
			Reason: "an agent of the workspace has a turn in flight"}.Err()
	}
	if len(live) > 0 {
		return protocol.WorkspaceRefusal{Kind: protocol.RefusalLive, WorkspaceID: rec.WorkspaceID, AgentIDs: live,
			Reason: "an agent of the workspace has a running runtime or an attached client; terminate or detach it first"}.Err()
	}
	return nil
}

func (w *worker) retire(ctx context.Context, req *protocol.WorkspaceRetire) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	unlock, err := w.lock(ctx, rec.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	if rec, err = w.get(req.WorkspaceID); err != nil {
		return failed(err)
	}
	id, disp := rec.WorkspaceID, req.Disposition()
	switch rec.State {
	case protocol.WorkspaceStateRetired:
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is already retired", id))
	case protocol.WorkspaceStateMissing:
		// Nothing on disk is ours to touch any more: forget the record.
		return w.finishRetire(rec, disp, rec.HeadSHA, false, "")
	case protocol.WorkspaceStateActive, protocol.WorkspaceStateRetiring:
	default:
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", id, rec.State))
	}
	if err := w.liveness(rec); err != nil {
		return failed(err)
	}
	g, repo := w.deps.Git, repoOf(rec)
	if rec.State == protocol.WorkspaceStateRetiring {
		if _, err := os.Lstat(rec.WorktreePath); errors.Is(err, os.ErrNotExist) {
			return w.finishInterrupted(ctx, rec, disp)
		}
	}
	if _, err := g.CheckRetire(ctx, repo, git.Recorded{Path: rec.WorktreePath, Branch: rec.Branch}); err != nil {
		d := &done{}
		if errors.Is(err, git.ErrMissingAuthority) && rec.State == protocol.WorkspaceStateActive {
			// Recorded as missing, so that a retry forgets it.
			d = w.markMissing(rec, "the repository or the worktree is gone or moved")
		}
		d.err = refusalOf(id, err)
		return d
	}
	if !sameDir(rec.CreatedPath, rec.WorktreePath) {
		return failed(refuse(protocol.RefusalUnsafe, id, "the worktree directory is not the one the daemon created (replaced since)"))
	}
	head, err := g.BranchHead(ctx, repo, rec.Branch)
	if err != nil {
		return failed(internal(err))
	}
	var why git.Deletion
	switch disp {
	case protocol.DispositionDeleteIfMerged:
		proof, err := g.ProveMerged(ctx, repo, rec.Branch, rec.IntegrationTarget)
		if err != nil {
			return failed(internal(err))
		}
		if !proof.Held() {
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalConfirmationRequired, WorkspaceID: id,
				Branch: rec.Branch, IntegrationTarget: rec.IntegrationTarget,
				Reason:                  "the branch could not be proven merged: " + proof.Reason,
				ConfirmationDisposition: protocol.DispositionDeleteConfirmed}.Err())
		}
		why.Proof = proof
	case protocol.DispositionDeleteConfirmed:
		why.Confirmed = true
	}
	// Durable before git touches anything: a crash leaves retiring.
	if rec, err = w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
		r.State, r.HeadSHA, r.UpdatedAt = protocol.WorkspaceStateRetiring, head, w.now()
		return nil
	}); err != nil {
		return failed(internal(err))
	}
	if err := g.RemoveWorktree(ctx, repo, rec.WorktreePath, false); err != nil {
		_, _ = w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
			r.State, r.UpdatedAt = protocol.WorkspaceStateActive, w.now()
			return nil
		})
		return failed(internal(err))
	}
	deleted, proof := false, protocol.MergeProof("")
	if disp != protocol.DispositionKeep {
		if err := g.DeleteBranch(ctx, repo, rec.Branch, head, why); err != nil {
			// The worktree is gone, so the workspace is retired either way;
			// the branch is kept and the tombstone says so.
			w.deps.Logger.Warn("workspaces: branch kept at retire", "workspace_id", id, "err", err)
		} else {
			deleted = true
			if why.Confirmed {
				proof = protocol.ProofConfirmed
			} else {
				proof = proofOf(why.Proof.Kind)
			}
		}
	}
	return w.finishRetire(rec, disp, head, deleted, proof)
}

// finishInterrupted finishes a retire a crash cut short after git removed
// the worktree: the branch is deleted only on delete_confirmed (the proof
// of a delete_if_merged would have to be made again against a moved
// target; a choice: keep it and say so), and a branch already gone is
// recorded as deleted.
func (w *worker) finishInterrupted(ctx context.Context, rec store.Workspace, disp protocol.BranchDisposition) *done {
	g, repo := w.deps.Git, repoOf(rec)
	head, err := g.BranchHead(ctx, repo, rec.Branch)
	switch {
	case errors.Is(err, git.ErrBranchNotFound):
		return w.finishRetire(rec, disp, rec.HeadSHA, true, "")
	case err != nil:
		return failed(internal(err))
	}
	if disp == protocol.DispositionDeleteConfirmed {
		if err := g.DeleteBranch(ctx, repo, rec.Branch, head, git.Deletion{Confirmed: true}); err == nil {
			return w.finishRetire(rec, disp, head, true, protocol.ProofConfirmed)
		}
	}
	return w.finishRetire(rec, disp, head, false, "")
}

// tokenFile is the file, in a worktree's git admin dir
// (<common dir>/worktrees/<name>), holding the random token the daemon
// records in CreatedPath.Token. Git deletes the admin dir with the
// worktree (remove, prune), so a worktree re-created at the same path
// lacks it even where the filesystem reuses the inode.
const tokenFile = "shard-workspace-token"

// adminDir is the git admin dir a linked worktree's .git file names.
func adminDir(worktree string) (string, error) {
	b, err := os.ReadFile(filepath.Join(worktree, ".git"))
	if err != nil {
		return "", err
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || dir == "" {
		return "", fmt.Errorf("%s/.git is not a linked worktree's", worktree)
	}
	if !filepath.IsAbs(dir) { // worktree.useRelativePaths
		dir = filepath.Join(worktree, dir)
	}
	return dir, nil
}

func writeToken(worktree string) (string, error) {
	dir, err := adminDir(worktree)
	if err != nil {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw[:])
	return tok, os.WriteFile(filepath.Join(dir, tokenFile), []byte(tok+"\n"), 0o600)
}

// sameDir reports whether path is still the directory the create made:
// the device and inode recorded right after git made it, and the token in
// its admin dir. What a record does not hold (written by an older build,
// a token that could not be written) is not checked; CheckRetire's link
// checks apply either way.
func sameDir(marker *store.CreatedPath, path string) bool {
	if marker == nil {
		return true
	}
	if marker.Ino != 0 {
		fi, err := os.Stat(path)
		if err != nil {
			return false
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (uint64(st.Dev) != marker.Dev || st.Ino != marker.Ino) {
			return false
		}
	}
	if marker.Token != "" {
		dir, err := adminDir(path)
		if err != nil {
			return false
		}
		b, err := os.ReadFile(filepath.Join(dir, tokenFile))
		if err != nil || strings.TrimSpace(string(b)) != marker.Token {
			return false
		}
	}
	return true
}

func (w *worker) finishRetire(rec store.Workspace, disp protocol.BranchDisposition, head string, deleted bool, proof protocol.MergeProof) *done {
	upd, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		now := w.now()
		r.State, r.RetiredAt, r.UpdatedAt = protocol.WorkspaceStateRetired, now, now
		if head != "" {
			r.HeadSHA = head
		}
		r.Tombstone = &store.WorkspaceTombstone{Branch: r.Branch, HeadSHA: r.HeadSHA, Deleted: deleted, Disposition: disp, Proof: proof}
		return nil
	})
	if err != nil {
		return failed(internal(err))
	}
	return &done{
		data: protocol.WorkspaceRetireData{Workspace: upd.Info(), BranchDeleted: deleted, Proof: proof},
		events: [][]byte{protocol.MustMarshal(protocol.WorkspaceRetired{
			Header: protocol.Header{Type: protocol.TypeWorkspaceRetired}, Workspace: upd.Info().Summary()})},
	}
}

// ---- diff ----

func (w *worker) diff(ctx context.Context, req *protocol.WorkspaceDiff) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	if rec.State != protocol.WorkspaceStateActive {
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", rec.WorkspaceID, rec.State))
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		return failed(refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the worktree directory is gone"))
	}
	run := w.deps.Git.Runner()
	out, err := run.Run(ctx, git.Invocation{Dir: rec.WorktreePath, ReadOnly: true,
		Args: []string{"rev-parse", "--verify", "--quiet", "HEAD^{commit}"}})
	if err != nil {
		return failed(internal(fmt.Errorf("worktree head: %w", err)))
	}
	head := strings.TrimSpace(string(out))
	base := rec.BaseSHA
	if rec.IntegrationTarget != "" {
		out, err = run.Run(ctx, git.Invocation{Dir: rec.WorktreePath, ReadOnly: true,
			Args: []string{"merge-base", "--end-of-options", head, rec.IntegrationTarget}})
		if err == nil {
			base = strings.TrimSpace(string(out))
		}
	}
	lim := int64(diff.DefaultMaxBytes)
	if req.MaxBytes != nil {
		lim = min(*req.MaxBytes, maxDiffBytes)
	}
	res, err := diff.Workspace(ctx, diff.ExecRunner(""), rec.WorktreePath, base, diff.Limits{MaxBytes: int(lim)})
	if err != nil {
		return failed(err)
	}
	data := protocol.WorkspaceDiffData{
		WorkspaceID: rec.WorkspaceID, Branch: rec.Branch, IntegrationTarget: rec.IntegrationTarget,
		BaseSHA: base, HeadSHA: head, Files: []protocol.DiffFile{}, Truncated: res.Truncated,
		Stats: protocol.DiffStats{Files: res.FileCount, Additions: res.Additions, Deletions: res.Deletions},
	}
	for _, f := range res.Files {
		df := protocol.DiffFile{Path: f.Path, OldPath: f.OldPath, Status: protocol.DiffFileStatus(f.Status), Binary: f.Binary,
			Additions: f.Additions, Deletions: f.Deletions, Truncated: f.Truncated, Hunks: []protocol.DiffHunk{}}
		for _, h := range f.Hunks {
			dh := protocol.DiffHunk{Header: h.Header, OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart,
				NewLines: h.NewLines, Lines: make([]protocol.DiffLine, 0, len(h.Lines))}
			for _, l := range h.Lines {
				dh.Lines = append(dh.Lines, protocol.DiffLine{Kind: protocol.DiffLineKind(l.Kind), Text: l.Text, OldNo: l.OldNo, NewNo: l.NewNo})
			}
			df.Hunks = append(df.Hunks, dh)
		}
		data.Files = append(data.Files, df)
	}
	return &done{data: data}
}

// ---- startup reconciliation ----

// reconcile settles what a crash left (the cheap version): a creating
// record is rolled back (its worktree and branch removed only if still
// exactly what the create made) and retired with a tombstone; an active
// record whose worktree vanished becomes missing. Retiring records are
// left as they are (a retry of workspace.retire finishes them). Not done
// here: doctor reporting, sweeping worktrees under the root that no record
// holds.
func (w *worker) reconcile(ctx context.Context) error {
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{})
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range all {
		if rec.State != protocol.WorkspaceStateCreating && rec.State != protocol.WorkspaceStateActive {
			continue
		}
		func() {
			unlock, err := w.lock(ctx, rec.CommonDir)
			if err != nil {
				errs = append(errs, err)
				return
			}
			defer unlock()
			cur, err := w.deps.Store.GetWorkspace(rec.WorkspaceID)
			if err != nil {
				errs = append(errs, err)
				return
			}
			switch cur.State {
			case protocol.WorkspaceStateCreating:
				w.rollback(ctx, cur, "the daemon stopped during the create", false)
			case protocol.WorkspaceStateActive:
				if _, err := os.Stat(cur.WorktreePath); errors.Is(err, os.ErrNotExist) {
					w.markMissing(cur, "the worktree directory is gone")
				}
			}
		}()
	}
	return errors.Join(errs...)
}
