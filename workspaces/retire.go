package workspaces

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
	"github.com/shard-dev/shard/workspaces/layout"
)

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

// liveness asks the jobs coordinator and the registry about the
// workspace's agents: busy (a subagent run in flight — queued, starting or
// active — or a turn in flight) before live (a runtime up or a client
// attached).
func (w *worker) liveness(rec store.Workspace) error {
	if err := w.runsInFlight(rec); err != nil {
		return err
	}
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

// runsInFlight refuses busy when a run holds a claim on the workspace
// (claims.go: checked under the repository's lock, like materialize), or
// when a subagent run bound to one of the workspace's agents is not
// terminal: a queued chain step would start in the worktree retire
// removes, and a starting run may not have a runtime (or a turn) to see
// yet.
func (w *worker) runsInFlight(rec store.Workspace) error {
	if runs, agents := w.claims.of(rec.WorkspaceID); len(runs) > 0 {
		return protocol.WorkspaceRefusal{Kind: protocol.RefusalBusy, WorkspaceID: rec.WorkspaceID, AgentIDs: slices.DeleteFunc(agents, func(a string) bool { return a == "" }),
			Reason: "a subagent run is starting or running in the workspace (" + strings.Join(runs, ", ") + ")"}.Err()
	}
	if len(rec.AgentIDs) == 0 || w.jobs == nil {
		return nil
	}
	res, err := w.sys.Root.RequestFuture(w.jobs, &RunsInFlight{AgentIDs: rec.AgentIDs}, 10*time.Second).Result()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "ask the jobs coordinator about the workspace's runs: %w", err)
	}
	st, ok := res.(*RunsInFlightResult)
	if !ok {
		return protocol.Errorf(protocol.CodeInternal, "jobs coordinator answered %T", res)
	}
	if len(st.Runs) == 0 {
		return nil
	}
	var agents, runs []string
	for _, a := range rec.AgentIDs {
		if r, ok := st.Runs[a]; ok {
			agents, runs = append(agents, a), append(runs, r)
		}
	}
	return protocol.WorkspaceRefusal{Kind: protocol.RefusalBusy, WorkspaceID: rec.WorkspaceID, AgentIDs: agents,
		Reason: "a subagent run bound to the workspace is in flight (" + strings.Join(runs, ", ") + ")"}.Err()
}

func (w *worker) retire(ctx context.Context, req *protocol.WorkspaceRetire) *done {
	rec, unlock, err := w.getLocked(ctx, req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	id, disp := rec.WorkspaceID, req.Disposition()
	switch rec.State {
	case protocol.WorkspaceStateRetired:
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is already retired", id))
	case protocol.WorkspaceStateMissing:
		// Nothing on disk is ours to touch any more: forget the record.
		return w.finishRetire(rec, disp, rec.HeadSHA, false, "")
	case protocol.WorkspaceStateActive, protocol.WorkspaceStateRetiring, protocol.WorkspaceStateConflict:
		// conflict: a create that could not be rolled back, or disk and
		// record that disagree; the checks below decide as for active.
	default:
		if rec.JobID != "" {
			// Planned for a subagent job whose run has not made it yet.
			if err := w.runsInFlight(rec); err != nil {
				return failed(err)
			}
		}
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
		r.State, r.HeadSHA, r.RetireDisposition, r.UpdatedAt = protocol.WorkspaceStateRetiring, head, disp, w.now()
		return nil
	}); err != nil {
		return failed(internal(err))
	}
	w.step(StepRetireRecorded)
	if err := g.RemoveWorktree(ctx, repo, rec.WorktreePath, false); err != nil {
		w.unretire(id)
		return failed(internal(err))
	}
	w.step(StepRetireWorktree)
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
	w.step(StepRetireBranch)
	return w.finishRetire(rec, disp, head, deleted, proof)
}

// unretire rolls a retiring record back to active: its retire did not
// remove the worktree (it failed, or a crash cut it short before git did).
func (w *worker) unretire(id string) {
	_, _ = w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
		if r.State != protocol.WorkspaceStateRetiring {
			return fmt.Errorf("%w: workspace is %s", store.ErrConflict, r.State)
		}
		r.State, r.RetireDisposition, r.UpdatedAt = protocol.WorkspaceStateActive, "", w.now()
		return nil
	})
}

// finishInterrupted finishes a retire a crash cut short after git removed
// the worktree: the branch is deleted on delete_confirmed, and on
// delete_if_merged only when the proof, made again now against the
// target as it is, holds for the branch's head; a branch already gone is
// recorded as deleted (the tombstone keeps its last recorded head).
func (w *worker) finishInterrupted(ctx context.Context, rec store.Workspace, disp protocol.BranchDisposition) *done {
	g, repo := w.deps.Git, repoOf(rec)
	head, err := g.BranchHead(ctx, repo, rec.Branch)
	switch {
	case errors.Is(err, git.ErrBranchNotFound):
		return w.finishRetire(rec, disp, rec.HeadSHA, true, "")
	case err != nil:
		return failed(internal(err))
	}
	switch disp {
	case protocol.DispositionDeleteConfirmed:
		if err := g.DeleteBranch(ctx, repo, rec.Branch, head, git.Deletion{Confirmed: true}); err == nil {
			return w.finishRetire(rec, disp, head, true, protocol.ProofConfirmed)
		}
	case protocol.DispositionDeleteIfMerged:
		if proof, err := g.ProveMerged(ctx, repo, rec.Branch, rec.IntegrationTarget); err == nil && proof.Held() && proof.BranchHead == head {
			if err := g.DeleteBranch(ctx, repo, rec.Branch, head, git.Deletion{Proof: proof}); err == nil {
				return w.finishRetire(rec, disp, head, true, proofOf(proof.Kind))
			}
		}
	}
	return w.finishRetire(rec, disp, head, false, "")
}

func writeToken(worktree string) (string, error) {
	dir, err := layout.AdminDir(worktree)
	if err != nil {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw[:])
	return tok, os.WriteFile(filepath.Join(dir, layout.TokenFile), []byte(tok+"\n"), 0o600)
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
		if layout.ReadToken(path) != marker.Token {
			return false
		}
	}
	return true
}

func (w *worker) finishRetire(rec store.Workspace, disp protocol.BranchDisposition, head string, deleted bool, proof protocol.MergeProof) *done {
	upd, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		now := w.now()
		r.State, r.RetiredAt, r.UpdatedAt, r.RetireDisposition = protocol.WorkspaceStateRetired, now, now, ""
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
			Header: protocol.Header{Type: protocol.TypeWorkspaceRetired}, Workspace: w.summary(upd)})},
	}
}
