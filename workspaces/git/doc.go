// Package git is the git layer of Shard's workspaces: the operations the
// workspace actor needs to give every agent its own worktree and to retire
// it without losing work. It is pure Go over the real git binary (exec'd,
// never through a shell, with a timeout, GIT_TERMINAL_PROMPT=0, LC_ALL=C,
// no pager or editor, stdin from /dev/null), behind a small Runner
// interface; it holds no actor, no store and no package state.
//
// What it offers:
//
//   - Client.Inspect resolves the repository of a cwd (main checkout root,
//     common dir, current branch, HEAD) and refuses a non-repository, a bare
//     repository, one without commits, and one in the middle of a rebase,
//     merge, cherry-pick, revert or bisect.
//   - Client.CreateWorktree / RemoveWorktree / ListWorktrees / BranchHead /
//     DeleteBranch, and BranchName for generated "shard/<slug>-<suffix>"
//     names. Locks serializes them per repository (common dir): a create is
//     several git steps plus a durable record, which git's own locks do not
//     cover.
//   - Client.CheckRetire refuses, with a typed *Refusal, a worktree whose
//     removal could lose work or touch something not ours, in this order:
//     missing_authority, unsafe, locked, submodules, dirty.
//   - Client.ProveMerged proves a branch adds nothing to its integration
//     target before DeleteBranch may delete it (see the proof order below).
//   - Client.Merge merges, squashes or rebases a branch into the target
//     checked out in the main checkout, refusing (typed *MergeRefusal) a
//     dirty main checkout, the wrong branch or a conflict before anything
//     changes; the main checkout only ever moves by a fast-forward to a
//     commit built without a working tree (merge.go).
//
// # Merge proofs
//
// ProveMerged tries the proofs cheapest first and returns which one held:
//
//  1. same commit (branch head == target head);
//  2. ancestor (`merge-base --is-ancestor branch target`): merged normally
//     or fast-forwarded;
//  3. empty three-dot diff (`diff merge-base branch` is empty, i.e.
//     `diff target...branch`);
//  4. identical trees (branch^{tree} == target^{tree});
//  5. a simulated merge adds nothing (`merge-tree --write-tree target
//     branch` is clean and yields target's tree; git >= 2.38): rebased and
//     merged, cherry-picked;
//  6. squash-merged: the `patch-id --stable` of the branch's combined change
//     since the merge-base equals that of one of the newest MaxSquashScan
//     (1,000) non-merge target commits since the merge-base.
//
// Otherwise the Proof is Unproven with a Reason, and deletion needs the
// user's explicit confirmation. DeleteBranch deletes only with a held proof
// or a confirmation, and only if the branch still points at the commit that
// was checked (an atomic compare-and-delete), so work added after the
// check is never lost.
//
// Git 2.36 or newer is required (`worktree list -z`); the merge-tree proof
// needs 2.38 and is skipped, not failed, on older git.
//
// Crash consistency is the caller's: CreateWorktree is `worktree add -b`,
// one git step that creates the branch and then the checkout, so a kill in
// between can leave the branch alone or a worktree without a record. The
// workspace actor reconciles at startup with ListWorktrees, BranchHead and
// CheckRetire (a worktree is swept only if CheckRetire passes).
//
// Errors: a failed git command is an *Error (args, exit code, bounded
// stderr; it wraps context errors, so a timeout satisfies errors.Is(err,
// context.DeadlineExceeded)). Refusals are sentinels (ErrNotRepository,
// ErrBranchExists, ErrRefUnknown, ErrPathTaken, …), *OperationError and
// *Refusal, all matched with errors.Is / errors.As. This package does not
// know protocol codes; the workspace actor maps refusals onto CONFLICT /
// INVALID_REQUEST / NOT_FOUND and typed refusal data, using Reason's
// strings as the wire's `reason`.
package git
