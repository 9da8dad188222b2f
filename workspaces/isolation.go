package workspaces

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// Isolated subagent runs (subagent.create isolation "workspace",
// docs/protocol.md §10.3). The jobs coordinator owns the job; this actor owns
// the workspaces, in three steps:
//
//  1. Plan (before the job commit): inspect the parent's repository and
//     describe one new workspace per label — id, branch, worktree path,
//     base and integration target — as records in state creating that
//     name the job. Nothing is written and git changes nothing: the
//     coordinator commits these records in the same transaction as the
//     job, its runs and its child agents (store.CreateJobWorkspaces).
//  2. Materialize (when a run starts): make the worktree of a creating
//     record and activate it, exactly as workspace.create does (build),
//     under the repository's lock; an active record answers at once (a
//     chain's later steps, a restart). A failure rolls back and retires
//     the record; the run fails with the refusal.
//  3. DiffStat (when a run ends): the workspace's diff stat against its
//     merge-base (workspace.diff's totals), for the completion report.
//
// Crash safety: a record committed with its job stays creating until a
// run materializes it. Startup reconciliation keeps a plan of which
// nothing was made (no worktree, no branch: stillPlanned), so a run still
// queued at the crash makes it when it starts; it rolls back every other
// creating record (a materialize cut short: retired, nothing of anyone's
// removed), and a run that then asks for it fails naming the rollback.
// Plan and Materialize wait until reconciliation has ended, so a record it
// sees as creating is always one a crashed daemon left; jobs.Reconcile
// ends runs that were starting or active.

// Plan asks for the workspace records of a job's isolated runs. The actor
// answers the sender with *Planned.
type Plan struct {
	// Cwd is the parent agent's cwd; it must be inside a git repository.
	Cwd string
	// JobID is the job the workspaces are for (store.Workspace.JobID).
	JobID string
	// Labels name the workspaces to plan, one each (the runs' names).
	Labels []string
}

// Planned answers Plan: the records, in the order of Plan.Labels, in
// state creating; or Err, a protocol error with typed refusal data
// (not_a_repository, repository_busy, base_ref_unknown, branch_exists).
type Planned struct {
	Workspaces []store.Workspace
	Err        error
}

// Materialize asks that a workspace's worktree exist, for a run about to
// start in it. The run claims the workspace as the request arrives, and
// holds the claim until the job actor sends Release (claims.go): retire
// refuses busy meanwhile. The actor answers the sender with *Materialized.
type Materialize struct {
	WorkspaceID string
	// RunID is the run that claims the workspace; echoed back.
	RunID string
	// AgentID is the run's child agent (named by a busy refusal).
	AgentID string
	// Fetch, when set, brings a branch another node pushed into the
	// worktree once it exists: the run ran elsewhere in the cluster and
	// its work is on the shared remote (docs/protocol.md §13 "Runs on
	// other nodes"). The branch is fast-forwarded to it, so
	// workspace.diff, workspace.merge and the review see the run's work
	// as if it had been done here.
	Fetch *Fetch
}

// Fetch names a branch on a remote: what Materialize brings into the
// worktree of a run that ran on another node.
type Fetch struct {
	// Remote is the URL (or path) git fetches from.
	Remote string
	// Branch is the remote branch (the workspace's own branch name).
	Branch string
	// Head is the commit the branch was pushed at; "" takes the fetched
	// tip as it is.
	Head string
}

// Release ends a run's claim on a workspace (sent by the job actor when a
// run that asked Materialize reaches a terminal state). No answer.
type Release struct {
	WorkspaceID string
	RunID       string
}

// Materialized answers Materialize: the active record, or Err (a
// protocol error) when the worktree cannot be made or the workspace is no
// longer usable: typed refusal "retired" (retired or being retired),
// "missing_authority" (missing). On an Err the claim is already released.
type Materialized struct {
	RunID     string
	Workspace store.Workspace
	Err       error
}

// DiffStat asks for a workspace's diff stat. The actor answers the sender
// with *DiffStatResult.
type DiffStat struct {
	WorkspaceID string
	RunID       string // echoed back
}

// DiffStatResult answers DiffStat.
type DiffStatResult struct {
	RunID string
	Stats protocol.DiffStats
	Err   error
}

// RunsInFlight is what the actor asks the jobs coordinator (Deps.Jobs)
// before a retire: which of these agents have a subagent run that is not
// terminal (queued, starting, active). The coordinator answers
// *RunsInFlightResult. The type lives here because jobs imports this
// package, not the other way round.
type RunsInFlight struct{ AgentIDs []string }

// RunsInFlightResult maps each agent with a run in flight to its run id.
type RunsInFlightResult struct{ Runs map[string]string }

// AttachJobs gives the actor the jobs coordinator's PID (the coordinator
// is spawned after it, with this actor's PID in its Deps); the daemon
// sends it before the gateway serves.
type AttachJobs struct{ PID *actor.PID }

func (*Plan) isWorkspaceMessage()               {}
func (*Planned) isWorkspaceMessage()            {}
func (*Materialize) isWorkspaceMessage()        {}
func (*Materialized) isWorkspaceMessage()       {}
func (*Release) isWorkspaceMessage()            {}
func (*DiffStat) isWorkspaceMessage()           {}
func (*DiffStatResult) isWorkspaceMessage()     {}
func (*RunsInFlight) isWorkspaceMessage()       {}
func (*RunsInFlightResult) isWorkspaceMessage() {}
func (*AttachJobs) isWorkspaceMessage()         {}

// onIsolation runs a Plan, Materialize or DiffStat off the mailbox and
// answers to, the sender, from the goroutine.
func (a *Actor) onIsolation(c actor.Context, to *actor.PID, m Message) {
	if to == nil {
		a.deps.Logger.Warn("workspaces: isolation request without a sender", "type", fmt.Sprintf("%T", m))
		return
	}
	sys := c.ActorSystem()
	w := a.worker(sys)
	started := a.work.Go(func(ctx context.Context) {
		var out any
		switch m := m.(type) {
		case *Plan:
			recs, err := w.plan(ctx, m)
			out = &Planned{Workspaces: recs, Err: shutdownErr(ctx, err)}
		case *Materialize:
			rec, err := w.materialize(ctx, m.WorkspaceID, m.RunID)
			if err == nil && m.Fetch != nil {
				rec, err = w.fetchRun(ctx, rec, m.Fetch)
			}
			if err != nil {
				w.claims.release(m.WorkspaceID, m.RunID)
				if interrupted(ctx) {
					// Unanswered: the jobs coordinator stops next, and the
					// run, still starting on disk, is reconciled to
					// interrupted at the next start; an answer now would
					// end it failed.
					return
				}
			}
			out = &Materialized{RunID: m.RunID, Workspace: rec, Err: err}
		case *DiffStat:
			st, err := w.diffStat(ctx, m.WorkspaceID)
			out = &DiffStatResult{RunID: m.RunID, Stats: st, Err: shutdownErr(ctx, err)}
		}
		sys.Root.Send(to, out)
	})
	if !started {
		a.held = append(a.held, heldRequest{to: to, msg: m})
		a.refuseHeld(c)
	}
}

// refuseHeld answers the requests still waiting for reconciliation when
// the actor stops.
func (a *Actor) refuseHeld(c actor.Context) {
	err := protocol.Errorf(protocol.CodeConflict, "daemon is shutting down")
	for _, h := range a.held {
		switch m := h.msg.(type) {
		case *Plan:
			c.Send(h.to, &Planned{Err: err})
		case *Materialize:
			a.claims.release(m.WorkspaceID, m.RunID)
			c.Send(h.to, &Materialized{RunID: m.RunID, Err: err})
		case *DiffStat:
			c.Send(h.to, &DiffStatResult{RunID: m.RunID, Err: err})
		}
	}
	a.held = nil
}

// plan describes the workspaces of Plan (see the file comment). The base
// is the main checkout's HEAD and the integration target its branch, as
// workspace.create's defaults are (a choice: a parent working in a linked
// worktree still branches its children from the main checkout).
func (w *worker) plan(ctx context.Context, req *Plan) ([]store.Workspace, error) {
	g := w.deps.Git
	repo, err := g.Inspect(ctx, req.Cwd)
	if err != nil {
		return nil, inspectErr(req.Cwd, err)
	}
	target, err := repo.RequireBranch()
	if err != nil {
		return nil, protocol.WorkspaceRefusal{Kind: protocol.RefusalBaseRefUnknown,
			Reason: "the main checkout is on a detached HEAD: isolated runs have no integration target"}.Err()
	}
	root, err := canonicalDir(w.deps.Root)
	if err != nil {
		return nil, internal(fmt.Errorf("worktree root: %w", err))
	}
	now := w.now()
	out := make([]store.Workspace, 0, len(req.Labels))
	for _, label := range req.Labels {
		id := ids.New(ids.Workspace)
		branch := git.BranchName(label, shortID(id))
		if _, err := g.BranchHead(ctx, repo, branch); err == nil {
			return nil, protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, Branch: branch,
				Reason: fmt.Sprintf("branch %q already exists", branch)}.Err()
		}
		out = append(out, store.Workspace{
			WorkspaceID: id, Label: label, Ownership: protocol.OwnershipManaged,
			RepoRoot: repo.Root, CommonDir: repo.CommonDir, WorktreePath: worktreePath(root, repo, id),
			Branch: branch, BaseRef: target, BaseSHA: repo.HEAD, IntegrationTarget: target, HeadSHA: repo.HEAD,
			State: protocol.WorkspaceStateCreating, CreatedAt: now, UpdatedAt: now, JobID: req.JobID,
		})
	}
	return out, nil
}

// materialize makes a planned workspace's worktree (see the file comment)
// and broadcasts workspace_created and a workspace_attached per bound
// agent once the record is active. It decides under the repository's
// lock, as retire does: a run whose claim was released meanwhile (it ended
// while it waited) makes nothing, and a workspace a retire won is refused
// "retired" (claims.go).
func (w *worker) materialize(ctx context.Context, id, runID string) (store.Workspace, error) {
	rec, unlock, err := w.getLocked(ctx, id)
	if err != nil {
		return store.Workspace{}, err
	}
	defer unlock()
	if !w.claims.held(id, runID) {
		return store.Workspace{}, protocol.Errorf(protocol.CodeConflict, "run %s ended before its workspace %s was made", runID, id)
	}
	switch {
	case rec.State == protocol.WorkspaceStateRetired || rec.State == protocol.WorkspaceStateRetiring:
		err := RetiredRefusal(id, rec.State)
		if rec.ConflictReason != "" {
			// e.g. a plan rolled back at startup: say why.
			err = refuse(protocol.RefusalRetired, id, fmt.Sprintf("workspace %s is %s (%s): no run may start in it", id, rec.State, rec.ConflictReason))
		}
		return store.Workspace{}, err
	case rec.State == protocol.WorkspaceStateActive:
		if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
			d := w.markMissing(rec, "the worktree directory is gone")
			w.broadcast(d.events)
			return store.Workspace{}, refuse(protocol.RefusalMissingAuthority, id, "the worktree directory is gone")
		}
		return rec, nil
	case rec.State == protocol.WorkspaceStateCreating && rec.JobID != "":
	case rec.State == protocol.WorkspaceStateMissing:
		return store.Workspace{}, refuse(protocol.RefusalMissingAuthority, id, "the workspace's worktree or repository is gone")
	default:
		why := ""
		if rec.ConflictReason != "" {
			why = " (" + rec.ConflictReason + ")"
		}
		return store.Workspace{}, protocol.Errorf(protocol.CodeConflict, "workspace %s is %s%s", id, rec.State, why)
	}
	repo, err := w.deps.Git.Inspect(ctx, rec.RepoRoot)
	if err != nil && interrupted(ctx) {
		return store.Workspace{}, err // the plan stays for the next start
	}
	if err != nil {
		// Nothing was made: retire the plan so that it claims nothing.
		w.retireFailed(rec, "the repository could not be inspected", false)
		return store.Workspace{}, inspectErr(rec.RepoRoot, err)
	}
	if repo.CommonDir != rec.CommonDir {
		w.retireFailed(rec, "the repository moved", false)
		return store.Workspace{}, refuse(protocol.RefusalMissingAuthority, id, "the repository is not the one planned")
	}
	rec, err = w.build(ctx, repo, rec)
	if err != nil {
		return store.Workspace{}, err
	}
	events := [][]byte{w.createdEvent(rec)}
	for _, agentID := range rec.AgentIDs {
		if ag, err := w.deps.Store.GetAgent(agentID); err == nil {
			events = append(events, w.attachedEvent(rec, ag))
		}
	}
	w.broadcast(events)
	return rec, nil
}

// fetchRun fast-forwards an active workspace's branch to a branch another
// node pushed (Materialize.Fetch), under the repository's lock, and
// records the new head. The worktree was made at the base the remote
// branch starts from, and nobody worked in it here, so a fast-forward is
// all it takes; anything else (the branch moved here, the remote branch
// does not descend from the base) is refused and nothing changes.
func (w *worker) fetchRun(ctx context.Context, rec store.Workspace, f *Fetch) (store.Workspace, error) {
	cur, unlock, err := w.getLocked(ctx, rec.WorkspaceID)
	if err != nil {
		return rec, err
	}
	defer unlock()
	run := func(args ...string) ([]byte, error) {
		return w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: cur.WorktreePath, Args: args})
	}
	if _, err := run("fetch", "--no-tags", "--quiet", f.Remote, "refs/heads/"+f.Branch); err != nil {
		return cur, protocol.Errorf(protocol.CodeConflict, "fetch branch %s of the run from its remote: %w", f.Branch, err)
	}
	target := f.Head
	if target == "" {
		target = "FETCH_HEAD"
	}
	if _, err := run("merge", "--ff-only", "--quiet", target); err != nil {
		return cur, protocol.Errorf(protocol.CodeConflict, "fast-forward branch %s to the run's work: %w", f.Branch, err)
	}
	out, err := w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: cur.WorktreePath, Args: []string{"rev-parse", "HEAD"}, ReadOnly: true})
	if err != nil {
		return cur, internal(err)
	}
	head := strings.TrimSpace(string(out))
	upd, err := w.deps.Store.UpdateWorkspace(cur.WorkspaceID, func(r *store.Workspace) error {
		r.HeadSHA, r.UpdatedAt = head, w.now()
		return nil
	})
	if err != nil {
		return cur, internal(err)
	}
	return upd, nil
}

// RetiredRefusal is the typed refusal of a run bound to a workspace that
// is retired or being retired (the jobs coordinator answers
// subagent.relaunch with it too).
func RetiredRefusal(id string, state protocol.WorkspaceState) error {
	return refuse(protocol.RefusalRetired, id, fmt.Sprintf("workspace %s is %s: no run may start in it", id, state))
}

// broadcast sends workspace events from a goroutine (the Hub is safe for
// concurrent use).
func (w *worker) broadcast(events [][]byte) {
	if w.deps.Hub == nil {
		return
	}
	for _, ev := range events {
		w.deps.Hub.Broadcast(ev)
	}
}

// diffStat is the workspace's diff totals (workspace.diff's stats, which
// are exact whatever the byte cap; the hunks are not kept).
func (w *worker) diffStat(ctx context.Context, id string) (protocol.DiffStats, error) {
	one := int64(1)
	d := w.diff(ctx, &protocol.WorkspaceDiff{WorkspaceID: id, MaxBytes: &one})
	if d.err != nil {
		return protocol.DiffStats{}, d.err
	}
	data, ok := d.data.(protocol.WorkspaceDiffData)
	if !ok {
		return protocol.DiffStats{}, protocol.Errorf(protocol.CodeInternal, "diff answered %T", d.data)
	}
	return data.Stats, nil
}
