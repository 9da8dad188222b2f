package git

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Client is the git layer the workspace actor uses: every operation goes
// through one Runner. It holds no state besides the Runner, so it is safe
// for concurrent use; serialize per repository with Locks.
type Client struct {
	r Runner
	// squashScan overrides MaxSquashScan when > 0 (tests).
	squashScan int
}

// New returns a Client over r; nil r means a zero Exec (real git, defaults).
func New(r Runner) *Client {
	if r == nil {
		r = &Exec{}
	}
	return &Client{r: r}
}

// Runner returns the Runner the client uses (so the diff layer can share it).
func (c *Client) Runner() Runner { return c.r }

func (c *Client) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return c.r.Run(ctx, Invocation{Dir: dir, Args: args})
}

func (c *Client) read(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return c.r.Run(ctx, Invocation{Dir: dir, Args: args, ReadOnly: true})
}

// line is the first line of out, trimmed.
func line(out []byte) string {
	s, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(s)
}

// Repo is a repository as seen from one directory inside it.
type Repo struct {
	// Root is the main checkout's root: the repository_cwd clients see. It
	// is taken from the main worktree entry git derives from the common
	// dir, so it is the same from every linked worktree.
	Root string
	// Worktree is the root of the checkout containing the inspected cwd
	// (Root itself, or a linked worktree).
	Worktree string
	// CommonDir is the shared git dir (usually Root/.git). It is the key for
	// Locks and for checking worktree ownership; the daemon may record it,
	// but it must never appear in a wire projection.
	CommonDir string
	// CurrentBranch is the short name of the branch checked out in the main
	// checkout (the default integration target); "" when detached.
	CurrentBranch string
	// HEAD is the commit checked out in the main checkout (the default
	// base_ref).
	HEAD string
}

// RequireBranch returns CurrentBranch, or ErrDetachedHEAD when the main
// checkout is detached and a branch is needed (integration target default).
func (r Repo) RequireBranch() (string, error) {
	if r.CurrentBranch == "" {
		return "", fmt.Errorf("main checkout %s: %w", r.Root, ErrDetachedHEAD)
	}
	return r.CurrentBranch, nil
}

// Inspect resolves the repository containing cwd and refuses what a new
// workspace cannot start from: not a repository (ErrNotRepository), bare
// (ErrBareRepository), no commits (ErrNoCommits), and a rebase, merge,
// cherry-pick, revert or bisect in progress in the main checkout or in the
// checkout of cwd (*OperationError). A detached main checkout is not refused
// here (a base_ref can still be given); use Repo.RequireBranch.
func (c *Client) Inspect(ctx context.Context, cwd string) (Repo, error) {
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, ErrNotRepository)
	}
	out, err := c.read(ctx, cwd, "rev-parse", "--path-format=absolute",
		"--is-bare-repository", "--is-inside-work-tree", "--git-common-dir", "--absolute-git-dir")
	if err != nil {
		if exitCode(err) == 128 {
			return Repo{}, fmt.Errorf("inspect %s: %w", cwd, ErrNotRepository)
		}
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 4 {
		return Repo{}, fmt.Errorf("inspect %s: unexpected rev-parse output %q", cwd, out)
	}
	if f[0] == "true" {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, ErrBareRepository)
	}
	if f[1] != "true" {
		// Inside .git or another git dir: there is no work tree here.
		return Repo{}, fmt.Errorf("inspect %s: not inside a work tree: %w", cwd, ErrNotRepository)
	}
	common, gitDir := canonical(f[2]), canonical(f[3])
	top, err := c.read(ctx, cwd, "rev-parse", "--show-toplevel")
	if err != nil {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, err)
	}
	wts, err := c.ListWorktrees(ctx, cwd)
	if err != nil {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, err)
	}
	if len(wts) == 0 {
		return Repo{}, fmt.Errorf("inspect %s: no worktrees listed: %w", cwd, ErrNotRepository)
	}
	main := wts[0]
	if main.Bare {
		// A bare repository with linked worktrees: no main checkout.
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, ErrBareRepository)
	}
	repo := Repo{
		Root:          main.Path,
		Worktree:      canonical(line(top)),
		CommonDir:     common,
		CurrentBranch: main.Branch,
		HEAD:          main.HEAD,
	}
	if repo.HEAD == "" || strings.Trim(repo.HEAD, "0") == "" {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, ErrNoCommits)
	}
	// The main checkout's git dir is the common dir.
	if op := inProgress(common); op != "" {
		return Repo{}, fmt.Errorf("inspect %s: %w", cwd, &OperationError{Op: op, Worktree: repo.Root})
	}
	if gitDir != common {
		if op := inProgress(gitDir); op != "" {
			return Repo{}, fmt.Errorf("inspect %s: %w", cwd, &OperationError{Op: op, Worktree: repo.Worktree})
		}
	}
	return repo, nil
}

// inProgress names the operation whose state file is in gitDir, or "".
// These are the files git itself (wt-status.c) checks.
func inProgress(gitDir string) string {
	checks := []struct{ file, op string }{
		{"rebase-merge", "rebase"},
		{"rebase-apply", "rebase"}, // also `git am`
		{"MERGE_HEAD", "merge"},
		{"CHERRY_PICK_HEAD", "cherry-pick"},
		{"REVERT_HEAD", "revert"},
		{"sequencer", "cherry-pick"},
		{"BISECT_LOG", "bisect"},
	}
	for _, c := range checks {
		if _, err := os.Lstat(filepath.Join(gitDir, c.file)); err == nil {
			return c.op
		}
	}
	return ""
}

// canonical is p absolute, cleaned and with symlinks resolved when it exists,
// so paths from git and from records compare equal (/tmp vs /private/tmp).
func canonical(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	// A missing path: resolve its nearest existing parent.
	dir, base := filepath.Split(p)
	if dir != "" && dir != p {
		if r, err := filepath.EvalSymlinks(filepath.Clean(dir)); err == nil {
			return filepath.Join(r, base)
		}
	}
	return filepath.Clean(p)
}

// ResolveCommit returns the full commit id rev names, or ErrRefUnknown.
func (c *Client) ResolveCommit(ctx context.Context, dir, rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("resolve %q: %w", rev, ErrRefUnknown)
	}
	out, err := c.read(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		if exitCode(err) >= 0 {
			return "", fmt.Errorf("resolve %q: %w", rev, ErrRefUnknown)
		}
		return "", fmt.Errorf("resolve %q: %w", rev, err)
	}
	return line(out), nil
}

// tree returns the tree id of rev.
func (c *Client) tree(ctx context.Context, dir, rev string) (string, error) {
	out, err := c.read(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("tree of %s: %w", rev, err)
	}
	return line(out), nil
}

// splitNUL splits NUL-terminated records.
func splitNUL(b []byte) [][]byte {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b, []byte{0})
}
