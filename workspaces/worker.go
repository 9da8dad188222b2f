package workspaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
	"github.com/shard-dev/shard/workspaces/layout"
)

// worker does one command's work off the mailbox. It holds only values
// safe to share between goroutines.
type worker struct {
	deps   Deps
	locks  *git.Locks
	claims *claims
	sys    *actor.ActorSystem
	jobs   *actor.PID // the jobs coordinator, or nil (Actor.jobs)
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

// worktreePath is where a workspace's worktree goes (layout.WorktreePath).
func worktreePath(root string, repo git.Repo, id string) string {
	return layout.WorktreePath(root, repo.Root, id)
}

// shortID is the tail of a workspace id used in generated branch names.
func shortID(id string) string { return layout.ShortID(id) }

func (w *worker) newAgent(workspaceID, cwd string, name, model, provider, mode, title string) store.Agent {
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
		WorkspaceID: workspaceID,
	}
}

// summary is rec's projection in an event: the summary, with this node's
// name in a cluster (docs/protocol.md §13 "Events of other nodes": the
// events travel to every node's clients, which tell by it where the
// workspace is).
func (w *worker) summary(rec store.Workspace) protocol.WorkspaceInfo {
	info := rec.Info().Summary()
	info.Node = w.deps.Node
	return info
}

func (w *worker) createdEvent(rec store.Workspace) []byte {
	return protocol.MustMarshal(protocol.WorkspaceCreated{
		Header: protocol.Header{Type: protocol.TypeWorkspaceCreated}, Workspace: w.summary(rec)})
}

func (w *worker) attachedEvent(rec store.Workspace, a store.Agent) []byte {
	return protocol.MustMarshal(protocol.WorkspaceAttached{
		Header:    protocol.Header{Type: protocol.TypeWorkspaceAttached, AgentID: a.AgentID},
		SessionID: a.SessionID, Workspace: w.summary(rec)})
}

func (w *worker) conflictEvent(rec store.Workspace, reason string) []byte {
	return protocol.MustMarshal(protocol.WorkspaceConflict{
		Header: protocol.Header{Type: protocol.TypeWorkspaceConflict}, Reason: reason, Workspace: w.summary(rec)})
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

// getLocked returns a workspace's record read again under its
// repository's lock (the record read first names the lock; a command
// that held it meanwhile may have changed the record), and the unlock.
func (w *worker) getLocked(ctx context.Context, id string) (store.Workspace, func(), error) {
	rec, err := w.get(id)
	if err != nil {
		return store.Workspace{}, nil, err
	}
	unlock, err := w.lock(ctx, rec.CommonDir)
	if err != nil {
		return store.Workspace{}, nil, err
	}
	if rec, err = w.get(id); err != nil {
		unlock()
		return store.Workspace{}, nil, err
	}
	return rec, unlock, nil
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
	return &done{events: [][]byte{w.conflictEvent(upd, reason)}}
}
