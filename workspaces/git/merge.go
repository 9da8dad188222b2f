package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MergeStrategy is how Client.Merge brings a workspace branch into its
// integration target. The values are the wire's `strategy` strings of
// workspace.merge.
type MergeStrategy string

// The strategies of workspace.merge.
const (
	// MergeCommit always records a merge commit (parents: target head,
	// branch head), even when the branch could be fast-forwarded: the
	// target's history then shows where a workspace was merged, like
	// `git merge --no-ff`.
	MergeCommit MergeStrategy = "merge"
	// MergeSquash records one commit on the target (parent: target head)
	// whose tree is the merge of the branch, i.e. the branch's combined
	// change; the branch itself is left untouched (ProveMerged then holds
	// by its squash or merge-adds-nothing proof).
	MergeSquash MergeStrategy = "squash"
	// MergeRebase replays the branch's commits onto the target (merge
	// commits of the branch are linearized away, commits already upstream
	// are dropped, as `git rebase` does), moves the branch to the result
	// and fast-forwards the target to it.
	MergeRebase MergeStrategy = "rebase"
)

// MergeReason is why Merge refused. The values are the wire's `reason`
// strings in a workspace.merge refusal.
type MergeReason string

// Merge refusal reasons, in the order Merge tests them.
const (
	// MergeReasonOperationInProgress: a rebase, merge, cherry-pick, revert
	// or bisect is under way in the main checkout or in the branch's
	// worktree (Detail names it). errors.Is(err, ErrOperationInProgress)
	// holds too.
	MergeReasonOperationInProgress MergeReason = "operation_in_progress"
	// MergeReasonWrongBranch: the main checkout does not have the target
	// checked out (Detail "detached" when it has no branch at all); Note
	// is the branch it is on.
	MergeReasonWrongBranch MergeReason = "wrong_branch"
	// MergeReasonMainDirty: the main checkout has staged, unstaged or
	// unmerged changes (Detail "changes"), or untracked files the merge
	// would overwrite (Detail "untracked_overwritten"). Other untracked
	// files are allowed: the merge does not touch them. Ignored files are
	// not looked at (git itself treats them as expendable).
	MergeReasonMainDirty MergeReason = "main_dirty"
	// MergeReasonWorkspaceDirty: strategy rebase only: the branch's
	// worktree has uncommitted changes, so it could not be moved to the
	// rebased branch without touching them.
	MergeReasonWorkspaceDirty MergeReason = "workspace_dirty"
	// MergeReasonNothingToMerge: the branch already adds nothing to the
	// target (ProveMerged holds; Detail is the proof kind), or a rebase
	// dropped every commit as already upstream.
	MergeReasonNothingToMerge MergeReason = "nothing_to_merge"
	// MergeReasonNoIdentity: neither user.name nor user.email (both are
	// needed) is configured for the repository. Merge never invents an
	// author: git's fallback (login@hostname) would put a made-up address
	// into shared history.
	MergeReasonNoIdentity MergeReason = "no_identity"
	// MergeReasonConflict: the merge (or one step of the rebase) conflicts;
	// Paths lists the conflicting paths (bounded), Count how many.
	MergeReasonConflict MergeReason = "merge_conflict"
)

// Sentinels matching each MergeReason, for errors.Is. They live here, not
// in errors.go, because this file is the merge layer's own.
var (
	ErrWrongBranch    = errors.New("git: main checkout not on the integration target")
	ErrMainDirty      = errors.New("git: main checkout dirty")
	ErrWorkspaceDirty = errors.New("git: workspace worktree dirty")
	ErrNothingToMerge = errors.New("git: nothing to merge")
	ErrNoIdentity     = errors.New("git: no committer identity configured")
	ErrMergeConflict  = errors.New("git: merge conflict")
	// ErrUnknownStrategy: the strategy is not merge, squash or rebase.
	ErrUnknownStrategy = errors.New("git: unknown merge strategy")
	// ErrTargetMoved: the target or the branch moved while Merge ran (an
	// agent committed outside the repository lock); nothing was changed,
	// retry.
	ErrTargetMoved = errors.New("git: target or branch moved during merge")
)

func (r MergeReason) sentinel() error {
	switch r {
	case MergeReasonOperationInProgress:
		return ErrOperationInProgress
	case MergeReasonWrongBranch:
		return ErrWrongBranch
	case MergeReasonMainDirty:
		return ErrMainDirty
	case MergeReasonWorkspaceDirty:
		return ErrWorkspaceDirty
	case MergeReasonNothingToMerge:
		return ErrNothingToMerge
	case MergeReasonNoIdentity:
		return ErrNoIdentity
	case MergeReasonConflict:
		return ErrMergeConflict
	}
	return nil
}

// MergeRefusal is a typed refusal of Merge; nothing was changed when it is
// returned. errors.Is(err, ErrMergeConflict) (etc.) holds for the matching
// Reason; errors.As gives the detail.
type MergeRefusal struct {
	Reason MergeReason
	// Detail is a short machine-friendly sub-reason, e.g. "detached",
	// "changes", "untracked_overwritten", "rebase", or a ProofKind.
	Detail string
	// Paths lists up to maxRefusalPaths offending paths (conflicting,
	// dirty), relative to the checkout root.
	Paths []string
	// Count is the number of offending paths (may exceed len(Paths)).
	Count int
	// Note is human text (the branch the main checkout is on, the proof's
	// explanation); never parse it.
	Note string
}

func (r *MergeRefusal) Error() string {
	msg := "git: cannot merge: " + string(r.Reason)
	if r.Detail != "" {
		msg += " (" + r.Detail + ")"
	}
	if r.Count > 0 {
		msg += fmt.Sprintf(": %d path(s)", r.Count)
		if len(r.Paths) > 0 {
			msg += " " + strings.Join(r.Paths, ", ")
		}
	}
	return msg
}

// Is matches the Reason's sentinel.
func (r *MergeRefusal) Is(target error) bool {
	s := r.Reason.sentinel()
	return s != nil && target == s
}

func mergeRefusal(r MergeReason, detail string, paths []string, note string) *MergeRefusal {
	ref := &MergeRefusal{Reason: r, Detail: detail, Count: len(paths), Note: note}
	if len(paths) > maxRefusalPaths {
		paths = paths[:maxRefusalPaths]
	}
	ref.Paths = paths
	return ref
}

// maxMergeCommits bounds MergeResult.Commits.
const maxMergeCommits = 1000

// MergeResult is what a successful Merge did.
type MergeResult struct {
	Strategy       MergeStrategy
	Branch, Target string
	// TargetBefore and TargetHead are the target's head before and after.
	TargetBefore, TargetHead string
	// BranchBefore and BranchHead are the branch's head before and after;
	// they differ only for MergeRebase.
	BranchBefore, BranchHead string
	// Commits are the commits the target gained, newest first, at most
	// maxMergeCommits (1,000): the merge commit, the squash commit, or the
	// rebased commits. CommitCount is their full number.
	Commits     []string
	CommitCount int
	// Proof is ProveMerged(branch, target) after the merge: the evidence a
	// later retire with delete_if_merged will find.
	Proof Proof
}

// Merge merges branch (a workspace branch) into target, the integration
// branch checked out in the main checkout (repo.Root), with strategy.
// message is the commit message for MergeCommit and MergeSquash ("" means
// "Merge branch '<branch>' into <target>" / "Squash <branch>"); MergeRebase
// keeps the branch's own messages and ignores it.
//
// Hold Locks for repo.CommonDir around the call: Merge is several git
// steps. Refusals (*MergeRefusal) come before any change, in this order:
// operation_in_progress, wrong_branch, main_dirty, workspace_dirty (rebase),
// nothing_to_merge, no_identity, merge_conflict.
//
// The scheme never leaves conflict state in the main checkout or in the
// workspace:
//
//   - The result commit is built without any working tree. For merge and
//     squash, `git merge-tree --write-tree` computes the merged tree (and
//     lists the conflicting paths: a conflict is refused before anything
//     is written except unreachable objects) and `git commit-tree` makes
//     the commit. For rebase, `git rebase` runs in a temporary detached
//     worktree outside the repository; a conflict there is recorded,
//     aborted (`rebase --abort`) and the temporary worktree removed, so
//     neither the workspace's worktree nor the branch ref is touched.
//   - Only then is the main checkout moved, with `git merge --ff-only
//     <result>`: a fast-forward never produces conflicts, refuses rather
//     than overwrite local changes, and fails (changing nothing) if the
//     target moved meanwhile, because the result's parent is the target
//     head Merge saw.
//   - For rebase the branch is moved last, compare-and-swap against the
//     head Merge rebased (`update-ref`), or, when the branch is checked
//     out in a (clean) worktree, with `reset --keep` there after checking
//     its HEAD. If that last step fails the target already holds the
//     rebased commits and the branch is at its old head; the error says
//     so and ProveMerged still holds (the simulated merge adds nothing).
//
// A process killed mid-rebase leaves at most a detached worktree named
// shard-rebase-*/wt under os.TempDir(), holding no branch: ListWorktrees
// shows it and `git worktree prune` drops it once the directory is gone;
// the main checkout, the workspace and every branch are untouched until
// the fast-forward, which is one git step. Repository hooks still run as
// git runs them (post-checkout in the temporary worktree, post-merge in
// the main checkout); pre-rebase is skipped (--no-verify).
//
// Identity: commits use the repository's configured user.name and
// user.email, with user.useConfigOnly so git never guesses one; none
// configured is refused (no_identity) rather than invented.
func (c *Client) Merge(ctx context.Context, repo Repo, branch, target string, strategy MergeStrategy, message string) (MergeResult, error) {
	res := MergeResult{Strategy: strategy, Branch: branch, Target: target}
	fail := func(err error) (MergeResult, error) {
		return res, fmt.Errorf("merge %s into %s: %w", branch, target, err)
	}
	switch strategy {
	case MergeCommit, MergeSquash, MergeRebase:
	default:
		return fail(fmt.Errorf("%q: %w", strategy, ErrUnknownStrategy))
	}
	var err error
	if res.BranchBefore, err = c.BranchHead(ctx, repo, branch); err != nil {
		return fail(err)
	}
	if res.TargetBefore, err = c.BranchHead(ctx, repo, target); err != nil {
		return fail(fmt.Errorf("target: %w", err))
	}
	res.BranchHead = res.BranchBefore
	b, t, dir := res.BranchBefore, res.TargetBefore, repo.Root

	// 1. Operations in progress: the main checkout, then the branch's.
	if op := inProgress(repo.CommonDir); op != "" {
		return fail(mergeRefusal(MergeReasonOperationInProgress, op, nil, repo.Root))
	}
	list, err := c.ListWorktrees(ctx, dir)
	if err != nil {
		return fail(err)
	}
	if len(list) == 0 || list[0].Bare {
		return fail(ErrBareRepository)
	}
	main := list[0]
	var branchWT *Worktree
	for i := range list[1:] {
		if w := list[1+i]; w.Branch == branch && !w.Prunable {
			branchWT = &list[1+i]
			break
		}
	}
	if branchWT != nil {
		gd, err := c.read(ctx, branchWT.Path, "rev-parse", "--absolute-git-dir")
		if err != nil {
			return fail(err)
		}
		if op := inProgress(canonical(line(gd))); op != "" {
			return fail(mergeRefusal(MergeReasonOperationInProgress, op, nil, branchWT.Path))
		}
	}
	// 2. The main checkout is on the target, at the head we resolved.
	if main.Branch != target {
		detail := ""
		if main.Branch == "" {
			detail = "detached"
		}
		return fail(mergeRefusal(MergeReasonWrongBranch, detail, nil, main.Branch))
	}
	if main.HEAD != t {
		return fail(ErrTargetMoved)
	}
	// 3. The main checkout has no changes a fast-forward could touch.
	st, err := c.Status(ctx, dir)
	if err != nil {
		return fail(err)
	}
	if changed := (Status{Staged: st.Staged, Unstaged: st.Unstaged, Unmerged: st.Unmerged}); !changed.Clean() {
		return fail(mergeRefusal(MergeReasonMainDirty, "changes", changed.Paths(), ""))
	}
	// 4. Rebase moves the branch: its worktree must be clean.
	if strategy == MergeRebase && branchWT != nil {
		wst, err := c.Status(ctx, branchWT.Path)
		if err != nil {
			return fail(err)
		}
		if !wst.Clean() {
			return fail(mergeRefusal(MergeReasonWorkspaceDirty, "", wst.Paths(), branchWT.Path))
		}
	}
	// 5. Nothing to merge.
	if pre, err := c.ProveMerged(ctx, repo, branch, target); err != nil {
		return fail(err)
	} else if pre.Held() {
		return fail(mergeRefusal(MergeReasonNothingToMerge, string(pre.Kind), nil, ""))
	}
	// 6. Identity.
	if err := c.requireIdentity(ctx, dir); err != nil {
		return fail(err)
	}
	// 7. The combined merge must be clean, whatever the strategy: a rebase
	// whose combined result conflicts conflicts in some step too.
	tree, conflicts, err := c.mergeTree(ctx, dir, t, b)
	if err != nil {
		return fail(err)
	}
	if len(conflicts) > 0 {
		return fail(mergeRefusal(MergeReasonConflict, "", conflicts, ""))
	}

	// Build the result commit without touching any checkout.
	var result string
	switch strategy {
	case MergeCommit:
		if message == "" {
			message = fmt.Sprintf("Merge branch '%s' into %s", branch, target)
		}
		result, err = c.commitTree(ctx, dir, tree, message, t, b)
	case MergeSquash:
		if message == "" {
			message = "Squash " + branch
		}
		result, err = c.commitTree(ctx, dir, tree, message, t)
	case MergeRebase:
		result, err = c.rebaseDetached(ctx, repo, b, t)
		if err == nil && result == t {
			return fail(mergeRefusal(MergeReasonNothingToMerge, "commits_upstream", nil, ""))
		}
	}
	if err != nil {
		return fail(err)
	}
	// Untracked files in the main checkout that the fast-forward would
	// overwrite are refused before it (git would refuse too, but this way
	// the caller gets the paths).
	if len(st.Untracked) > 0 {
		out, err := c.read(ctx, dir, "diff", "--name-only", "-z", "--no-renames", t, result)
		if err != nil {
			return fail(err)
		}
		if hit := overlapping(st.Untracked, splitNUL(out)); len(hit) > 0 {
			return fail(mergeRefusal(MergeReasonMainDirty, "untracked_overwritten", hit, ""))
		}
	}
	// A rebase must find the branch where it rebased it from.
	if strategy == MergeRebase {
		if h, err := c.BranchHead(ctx, repo, branch); err != nil {
			return fail(err)
		} else if h != b {
			return fail(ErrTargetMoved)
		}
	}
	// Move the main checkout: a fast-forward, nothing else.
	if _, err := c.run(ctx, dir, "merge", "--ff-only", "--no-stat", "-q", result); err != nil {
		if h, herr := c.BranchHead(ctx, repo, target); herr == nil && h != t && h != result {
			return fail(fmt.Errorf("%w: %v", ErrTargetMoved, err))
		}
		return fail(err)
	}
	res.TargetHead = result
	if strategy == MergeRebase {
		if err := c.moveBranch(ctx, repo, branch, branchWT, b, result); err != nil {
			return fail(fmt.Errorf("target fast-forwarded to %s but the branch stays at %s: %w", result, b, err))
		}
		res.BranchHead = result
	}
	if res.CommitCount, err = c.count(ctx, dir, t+".."+result); err != nil {
		return fail(err)
	}
	out, err := c.read(ctx, dir, "rev-list", fmt.Sprintf("--max-count=%d", maxMergeCommits), t+".."+result)
	if err != nil {
		return fail(err)
	}
	res.Commits = strings.Fields(string(out))
	if res.Proof, err = c.ProveMerged(ctx, repo, branch, target); err != nil {
		return fail(err)
	}
	return res, nil
}

// requireIdentity refuses (no_identity) unless user.name and user.email are
// configured (any scope git reads for the repository).
func (c *Client) requireIdentity(ctx context.Context, dir string) error {
	for _, key := range []string{"user.name", "user.email"} {
		out, err := c.read(ctx, dir, "config", "--get", key)
		if err != nil && exitCode(err) != 1 {
			return err
		}
		if err != nil || line(out) == "" {
			return mergeRefusal(MergeReasonNoIdentity, key, nil, "")
		}
	}
	return nil
}

// mergeTree runs `git merge-tree --write-tree --name-only -z --no-messages
// t b`: the merged tree, and the conflicting paths (nil when clean). The
// output is "<tree>\0<path>\0..." (paths only on exit 1).
func (c *Client) mergeTree(ctx context.Context, dir, t, b string) (tree string, conflicts []string, err error) {
	out, err := c.read(ctx, dir, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", t, b)
	code := exitCode(err)
	if err != nil && code != 1 {
		return "", nil, fmt.Errorf("merge-tree (git >= 2.38 needed): %w", err)
	}
	recs := splitNUL(out)
	if len(recs) == 0 {
		return "", nil, fmt.Errorf("merge-tree: empty output")
	}
	tree = string(recs[0])
	if code == 1 {
		seen := map[string]bool{}
		for _, r := range recs[1:] {
			if len(r) == 0 {
				break
			}
			if p := string(r); !seen[p] {
				seen[p] = true
				conflicts = append(conflicts, p)
			}
		}
		if len(conflicts) == 0 {
			return "", nil, errConflictNoPaths
		}
	}
	return tree, conflicts, nil
}

// errConflictNoPaths: merge-tree reported a conflict but named no path
// (should not happen); treated as a git failure, not a success.
var errConflictNoPaths = errors.New("git: merge-tree reported a conflict without paths")

// identityFlags make git refuse rather than guess an identity.
var identityFlags = []string{"-c", "user.useConfigOnly=true", "-c", "commit.gpgsign=false"}

// commitTree writes a commit of tree with the given parents.
func (c *Client) commitTree(ctx context.Context, dir, tree, message string, parents ...string) (string, error) {
	args := append(append([]string{}, identityFlags...), "commit-tree", tree)
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := c.r.Run(ctx, Invocation{Dir: dir, Args: args, Stdin: []byte(message)})
	if err != nil {
		return "", fmt.Errorf("commit-tree: %w", err)
	}
	return line(out), nil
}

// rebaseDetached rebases commit b onto t in a temporary detached worktree
// outside the repository and returns the rebased head. On a conflict it
// aborts the rebase and returns a merge_conflict refusal with the
// conflicting paths; the temporary worktree is always removed (with a
// context that outlives a cancelled ctx).
func (c *Client) rebaseDetached(ctx context.Context, repo Repo, b, t string) (head string, err error) {
	tmp, err := os.MkdirTemp("", "shard-rebase-")
	if err != nil {
		return "", fmt.Errorf("rebase: %w", err)
	}
	path := filepath.Join(canonical(tmp), "wt")
	defer func() {
		cctx := context.WithoutCancel(ctx)
		if _, rerr := c.run(cctx, repo.Root, "worktree", "remove", "--force", "--", path); rerr != nil {
			_ = os.RemoveAll(tmp)
			_, _ = c.run(cctx, repo.Root, "worktree", "prune")
		}
		_ = os.RemoveAll(tmp)
	}()
	if _, err := c.run(ctx, repo.Root, "worktree", "add", "--detach", "--", path, b); err != nil {
		return "", fmt.Errorf("rebase: temporary worktree: %w", err)
	}
	args := append(append([]string{}, identityFlags...), "rebase", "--no-autostash", "--no-verify", "-q", t)
	if _, err := c.run(ctx, path, args...); err != nil {
		out, derr := c.read(context.WithoutCancel(ctx), path, "diff", "--name-only", "-z", "--diff-filter=U")
		var paths []string
		for _, p := range splitNUL(out) {
			paths = append(paths, string(p))
		}
		_, aerr := c.run(context.WithoutCancel(ctx), path, "rebase", "--abort")
		if derr == nil && len(paths) > 0 {
			if aerr != nil {
				return "", fmt.Errorf("rebase: abort: %w", aerr)
			}
			return "", mergeRefusal(MergeReasonConflict, "rebase", paths, "")
		}
		return "", fmt.Errorf("rebase: %w", err)
	}
	out, err := c.read(ctx, path, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("rebase: %w", err)
	}
	return line(out), nil
}

// moveBranch points branch at to, from from: in its worktree with `reset
// --keep` (after checking that worktree's HEAD), else with a
// compare-and-swap update-ref.
func (c *Client) moveBranch(ctx context.Context, repo Repo, branch string, wt *Worktree, from, to string) error {
	msg := "shard: rebase " + branch + " onto its integration target"
	if wt == nil {
		_, err := c.run(ctx, repo.Root, "update-ref", "-m", msg, "refs/heads/"+branch, to, from)
		return err
	}
	out, err := c.read(ctx, wt.Path, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if line(out) != from {
		return ErrTargetMoved
	}
	_, err = c.run(ctx, wt.Path, "reset", "--keep", "-q", to)
	return err
}

// overlapping returns the untracked paths a change to paths would touch:
// the same path, or one inside the other (a file where the merge needs a
// directory, or the reverse).
func overlapping(untracked []string, changed [][]byte) []string {
	var hit []string
	for _, u := range untracked {
		for _, cb := range changed {
			p := string(cb)
			if u == p || strings.HasPrefix(u, p+"/") || strings.HasPrefix(p, u+"/") {
				hit = append(hit, u)
				break
			}
		}
	}
	return hit
}
