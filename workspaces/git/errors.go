package git

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for the refusals of Inspect and the worktree lifecycle. Each is
// checked with errors.Is; the workspace actor maps them onto protocol codes
// and typed refusal data (`{kind, workspace_id, reason, …}`), this package
// knows nothing of the wire.
var (
	// ErrNotRepository: the directory is not inside a git work tree (or does
	// not exist). workspace.create refuses it.
	ErrNotRepository = errors.New("git: not a git repository")
	// ErrBareRepository: the repository has no main checkout to branch from.
	ErrBareRepository = errors.New("git: bare repository")
	// ErrNoCommits: the repository has no commit yet, so there is no HEAD to
	// branch a worktree from.
	ErrNoCommits = errors.New("git: repository has no commits")
	// ErrOperationInProgress: a rebase, merge, cherry-pick, revert or bisect
	// is under way; see *OperationError for which one.
	ErrOperationInProgress = errors.New("git: operation in progress")
	// ErrDetachedHEAD: the main checkout has no branch checked out where one
	// is needed (the default integration target).
	ErrDetachedHEAD = errors.New("git: detached HEAD")
	// ErrInvalidBranchName: `git check-ref-format --branch` rejects the name.
	ErrInvalidBranchName = errors.New("git: invalid branch name")
	// ErrBranchExists: workspace.create never reuses an existing branch.
	ErrBranchExists = errors.New("git: branch exists")
	// ErrBranchNotFound: the branch has no ref (deleted or never created).
	ErrBranchNotFound = errors.New("git: branch not found")
	// ErrBranchCheckedOut: a branch still checked out in some worktree is
	// not deleted (git would leave that worktree on an unborn branch).
	ErrBranchCheckedOut = errors.New("git: branch checked out in a worktree")
	// ErrBranchMoved: the branch head is not the commit the caller proved
	// or confirmed; nothing was deleted.
	ErrBranchMoved = errors.New("git: branch moved since it was checked")
	// ErrRefUnknown: a base_ref or integration target does not name a commit.
	ErrRefUnknown = errors.New("git: unknown ref")
	// ErrPathTaken: the worktree path exists or is registered as a worktree.
	ErrPathTaken = errors.New("git: worktree path taken")
	// ErrPathNotAbsolute: worktree paths are always absolute, so the record
	// means the same thing whatever the daemon's cwd.
	ErrPathNotAbsolute = errors.New("git: worktree path not absolute")
	// ErrNotProven: DeleteBranch was called with neither a merge proof nor
	// an explicit confirmation.
	ErrNotProven = errors.New("git: branch deletion neither proven nor confirmed")
	// ErrOutputTooLarge: a git command wrote more than Exec.MaxOutput bytes.
	ErrOutputTooLarge = errors.New("git: output too large")
)

// Error is a failed git invocation: it did not start, exited non-zero, or was
// ended by its context (then errors.Is(err, context.DeadlineExceeded) holds).
// It is what every Runner returns on failure, so callers branch on ExitCode
// (e.g. `merge-base --is-ancestor` exits 1 for "no") with errors.As.
type Error struct {
	// Args are the git arguments, with credentials in URLs redacted.
	Args []string
	// ExitCode is git's exit status, or -1 when git did not exit on its own
	// (not started, killed by the context).
	ExitCode int
	// Stderr is git's standard error, cut to maxStderr bytes.
	Stderr string
	// Err is the underlying cause: a context error, ErrOutputTooLarge, an
	// exec error, or *exec.ExitError.
	Err error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("git %s: exit %d", strings.Join(e.Args, " "), e.ExitCode)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	if e.Err != nil && e.ExitCode < 0 {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes the cause so errors.Is(err, context.DeadlineExceeded) works.
func (e *Error) Unwrap() error { return e.Err }

// exitCode reports git's exit status if err is an *Error that exited, else -1.
func exitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// OperationError says which operation is in progress in which checkout.
// errors.Is(err, ErrOperationInProgress) holds.
type OperationError struct {
	// Op is "rebase", "merge", "cherry-pick", "revert" or "bisect".
	Op string
	// Worktree is the checkout whose git dir holds the state file.
	Worktree string
}

func (e *OperationError) Error() string {
	return fmt.Sprintf("git: %s in progress in %s", e.Op, e.Worktree)
}

// Is makes errors.Is(err, ErrOperationInProgress) hold.
func (e *OperationError) Is(target error) bool { return target == ErrOperationInProgress }

// Reason is why a worktree may not be retired. The values are the wire's
// `reason` strings in a workspace.retire refusal.
type Reason string

// Retire refusal reasons, in the order CheckRetire tests them.
const (
	// ReasonMissingAuthority: the repository or the worktree is gone or was
	// moved; the path is no longer a worktree of the recorded common dir.
	ReasonMissingAuthority Reason = "missing_authority"
	// ReasonUnsafe: the path is not the worktree we created (another
	// repository's, a plain directory, the main checkout, a worktree whose
	// gitdir links disagree, or one switched off the recorded branch).
	ReasonUnsafe Reason = "unsafe"
	// ReasonLocked: `git worktree lock` was used; git refuses to remove it.
	ReasonLocked Reason = "locked"
	// ReasonSubmodules: initialized submodules; git refuses to remove the
	// worktree without --force, which would lose their work.
	ReasonSubmodules Reason = "submodules"
	// ReasonDirty: staged, unstaged, unmerged or untracked files.
	ReasonDirty Reason = "dirty"
)

// Sentinels matching each Reason, so callers may use errors.Is.
var (
	ErrMissingAuthority = errors.New("git: missing authority")
	ErrUnsafe           = errors.New("git: unsafe worktree")
	ErrLocked           = errors.New("git: worktree locked")
	ErrSubmodules       = errors.New("git: initialized submodules")
	ErrDirty            = errors.New("git: worktree dirty")
)

func (r Reason) sentinel() error {
	switch r {
	case ReasonMissingAuthority:
		return ErrMissingAuthority
	case ReasonUnsafe:
		return ErrUnsafe
	case ReasonLocked:
		return ErrLocked
	case ReasonSubmodules:
		return ErrSubmodules
	case ReasonDirty:
		return ErrDirty
	}
	return nil
}

// Refusal is a typed refusal to retire a worktree. errors.Is(err, ErrDirty)
// (etc.) holds for the matching Reason; errors.As gives the detail.
type Refusal struct {
	Reason Reason
	// Detail is a short machine-friendly sub-reason, e.g. "worktree_gone",
	// "repository_gone", "not_a_worktree", "branch_switched".
	Detail string
	// Paths lists up to maxRefusalPaths offending paths (dirty files,
	// submodules), relative to the worktree.
	Paths []string
	// Count is the number of offending paths (may exceed len(Paths)).
	Count int
	// Note is human text from git or the user, e.g. the lock reason given
	// to `git worktree lock --reason`; never parse it.
	Note string
}

func (r *Refusal) Error() string {
	msg := "git: cannot retire worktree: " + string(r.Reason)
	if r.Detail != "" {
		msg += " (" + r.Detail + ")"
	}
	if r.Count > 0 {
		msg += fmt.Sprintf(": %d path(s)", r.Count)
	}
	return msg
}

// Is matches the Reason's sentinel.
func (r *Refusal) Is(target error) bool {
	s := r.Reason.sentinel()
	return s != nil && target == s
}
