package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Worktree is one entry of `git worktree list --porcelain`.
type Worktree struct {
	// Path is the worktree root as git records it (canonical).
	Path string
	// HEAD is the checked-out commit ("" for an unborn or bare entry).
	HEAD string
	// Branch is the short branch name; "" when detached or bare.
	Branch   string
	Detached bool
	Bare     bool
	// Main is true for the first entry, the main checkout.
	Main bool
	// Locked and LockReason: `git worktree lock [--reason]`.
	Locked     bool
	LockReason string
	// Prunable and PrunableReason: git considers the entry stale (e.g. its
	// directory is gone).
	Prunable       bool
	PrunableReason string
}

// ListWorktrees lists the worktrees of the repository containing dir, main
// checkout first.
func (c *Client) ListWorktrees(ctx context.Context, dir string) ([]Worktree, error) {
	out, err := c.read(ctx, dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return parseWorktrees(out), nil
}

// parseWorktrees parses `worktree list --porcelain -z`: NUL-terminated
// attribute lines, records separated by an empty line (a lone NUL).
func parseWorktrees(out []byte) []Worktree {
	var (
		list []Worktree
		cur  *Worktree
	)
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(f, " ")
		if key == "worktree" {
			if val == "" { // git never writes it; an entry without a path names nothing
				cur = nil
				continue
			}
			list = append(list, Worktree{Path: canonical(val), Main: len(list) == 0})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.HEAD = val
		case "branch":
			cur.Branch = strings.TrimPrefix(val, "refs/heads/")
		case "detached":
			cur.Detached = true
		case "bare":
			cur.Bare = true
		case "locked":
			cur.Locked, cur.LockReason = true, val
		case "prunable":
			cur.Prunable, cur.PrunableReason = true, val
		}
	}
	return list
}

// findWorktree returns the entry for path (compared canonically).
func findWorktree(list []Worktree, path string) (Worktree, bool) {
	p := canonical(path)
	for _, w := range list {
		if w.Path == p {
			return w, true
		}
	}
	return Worktree{}, false
}

// CheckBranchName validates name with `git check-ref-format --branch`;
// names starting with "-" are refused too (they would read as options), as
// are "@{-N}" forms, which --branch would expand instead of reject.
func (c *Client) CheckBranchName(ctx context.Context, dir, name string) error {
	if name == "" || strings.HasPrefix(name, "-") || strings.Contains(name, "@{") {
		return fmt.Errorf("branch %q: %w", name, ErrInvalidBranchName)
	}
	out, err := c.read(ctx, dir, "check-ref-format", "--branch", name)
	if err != nil {
		if exitCode(err) >= 0 {
			return fmt.Errorf("branch %q: %w", name, ErrInvalidBranchName)
		}
		return fmt.Errorf("branch %q: %w", name, err)
	}
	if line(out) != name {
		return fmt.Errorf("branch %q: expands to %q: %w", name, line(out), ErrInvalidBranchName)
	}
	return nil
}

// BranchPrefix is the namespace of generated branch names.
const BranchPrefix = "shard/"

const maxSlug = 40

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// BranchName is the generated branch name for a workspace:
// "shard/<label-slug>-<suffix>" (or "shard/<suffix>" without a usable
// label). suffix should be short and unique (e.g. the tail of the workspace
// id); it is slugged too. The slug keeps [a-z0-9], joins the rest with "-"
// and is cut to 40 bytes, so the result always passes CheckBranchName for a
// non-empty suffix.
func BranchName(label, suffix string) string {
	slug := func(s string, max int) string {
		s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
		if len(s) > max {
			s = strings.TrimRight(s[:max], "-")
		}
		return s
	}
	l, sfx := slug(label, maxSlug), slug(suffix, maxSlug)
	switch {
	case l == "" && sfx == "":
		return BranchPrefix + "workspace"
	case l == "":
		return BranchPrefix + sfx
	case sfx == "":
		return BranchPrefix + l
	}
	return BranchPrefix + l + "-" + sfx
}

// BranchHead returns the commit refs/heads/<branch> points at, or
// ErrBranchNotFound.
func (c *Client) BranchHead(ctx context.Context, repo Repo, branch string) (string, error) {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return "", fmt.Errorf("branch %q: %w", branch, ErrBranchNotFound)
	}
	out, err := c.read(ctx, repo.Root, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		if exitCode(err) >= 0 {
			return "", fmt.Errorf("branch %q: %w", branch, ErrBranchNotFound)
		}
		return "", fmt.Errorf("branch %q: %w", branch, err)
	}
	return line(out), nil
}

// Created describes a worktree CreateWorktree made.
type Created struct {
	// Path is the canonical worktree root (record this one).
	Path   string
	Branch string
	// Base is the commit the branch was created at (base fingerprint).
	Base string
}

// CreateWorktree creates branch at baseRef ("" means the main checkout's
// HEAD) and checks it out in a new worktree at path. It refuses, before
// changing anything: ErrInvalidBranchName, ErrBranchExists, ErrRefUnknown
// (baseRef), ErrPathNotAbsolute, ErrPathTaken (path exists, even as an
// empty directory, or is registered as a worktree). The parent of path is
// created. Hold Locks for repo.CommonDir around the call and the record.
func (c *Client) CreateWorktree(ctx context.Context, repo Repo, path, branch, baseRef string) (Created, error) {
	if !filepath.IsAbs(path) {
		return Created{}, fmt.Errorf("create worktree %s: %w", path, ErrPathNotAbsolute)
	}
	if err := c.CheckBranchName(ctx, repo.Root, branch); err != nil {
		return Created{}, fmt.Errorf("create worktree: %w", err)
	}
	if _, err := c.BranchHead(ctx, repo, branch); err == nil {
		return Created{}, fmt.Errorf("create worktree: branch %q: %w", branch, ErrBranchExists)
	} else if !errors.Is(err, ErrBranchNotFound) {
		return Created{}, fmt.Errorf("create worktree: %w", err)
	}
	if baseRef == "" {
		baseRef = "HEAD"
	}
	base, err := c.ResolveCommit(ctx, repo.Root, baseRef)
	if err != nil {
		return Created{}, fmt.Errorf("create worktree: base_ref: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Created{}, fmt.Errorf("create worktree: %w", err)
	}
	path = canonical(path)
	if _, err := os.Lstat(path); err == nil {
		return Created{}, fmt.Errorf("create worktree %s: %w", path, ErrPathTaken)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Created{}, fmt.Errorf("create worktree %s: %w", path, err)
	}
	list, err := c.ListWorktrees(ctx, repo.Root)
	if err != nil {
		return Created{}, fmt.Errorf("create worktree: %w", err)
	}
	if _, ok := findWorktree(list, path); ok {
		return Created{}, fmt.Errorf("create worktree %s: registered: %w", path, ErrPathTaken)
	}
	if _, err := c.run(ctx, repo.Root, "worktree", "add", "--no-track", "-b", branch, "--", path, base); err != nil {
		return Created{}, fmt.Errorf("create worktree %s: %w", path, err)
	}
	return Created{Path: path, Branch: branch, Base: base}, nil
}

// RemoveWorktree removes the worktree at path and its administrative files.
// Without force git itself refuses a dirty, locked or submodule-holding
// worktree: a second guard behind CheckRetire. A worktree whose directory
// was deleted behind our back is unregistered the same way.
func (c *Client) RemoveWorktree(ctx context.Context, repo Repo, path string, force bool) error {
	args := []string{"worktree", "remove"}
	if force {
		args = append(args, "--force")
	}
	args = append(args, "--", canonical(path))
	if _, err := c.run(ctx, repo.Root, args...); err != nil {
		return fmt.Errorf("remove worktree %s: %w", path, err)
	}
	return nil
}

// Deletion is the evidence DeleteBranch requires: a held Proof, or the
// user's explicit confirmation (workspace.retire with delete_confirmed).
type Deletion struct {
	Proof     Proof
	Confirmed bool
}

// DeleteBranch deletes refs/heads/<branch> only if why holds (else
// ErrNotProven), no worktree has it checked out (ErrBranchCheckedOut), and
// it still points at expectHead, the head the proof or confirmation was
// about (ErrBranchMoved). The compare is atomic: `git update-ref -d` with
// the old value, so commits added after the check are never lost. This is
// `git branch -D` semantics made safe; the branch's config section is
// removed afterwards, best effort. The caller's tombstone keeps
// (branch, expectHead) so `git branch <name> <sha>` undoes it.
func (c *Client) DeleteBranch(ctx context.Context, repo Repo, branch, expectHead string, why Deletion) error {
	if !why.Confirmed && !why.Proof.Held() {
		return fmt.Errorf("delete branch %q: %w", branch, ErrNotProven)
	}
	if expectHead == "" {
		return fmt.Errorf("delete branch %q: no expected head: %w", branch, ErrBranchMoved)
	}
	if why.Proof.Held() && !why.Confirmed && why.Proof.BranchHead != expectHead {
		return fmt.Errorf("delete branch %q: proof is about %s, not %s: %w", branch, why.Proof.BranchHead, expectHead, ErrBranchMoved)
	}
	head, err := c.BranchHead(ctx, repo, branch)
	if err != nil {
		return fmt.Errorf("delete branch: %w", err)
	}
	if head != expectHead {
		return fmt.Errorf("delete branch %q: at %s, expected %s: %w", branch, head, expectHead, ErrBranchMoved)
	}
	list, err := c.ListWorktrees(ctx, repo.Root)
	if err != nil {
		return fmt.Errorf("delete branch: %w", err)
	}
	for _, w := range list {
		if w.Branch == branch {
			return fmt.Errorf("delete branch %q: in %s: %w", branch, w.Path, ErrBranchCheckedOut)
		}
	}
	if _, err := c.run(ctx, repo.Root, "update-ref", "-d", "refs/heads/"+branch, expectHead); err != nil {
		if h, herr := c.BranchHead(ctx, repo, branch); herr == nil && h != expectHead {
			return fmt.Errorf("delete branch %q: %w", branch, ErrBranchMoved)
		}
		return fmt.Errorf("delete branch %q: %w", branch, err)
	}
	// Exit 5 (no such section) is the common case; other failures leave
	// only stale config behind.
	_, _ = c.run(ctx, repo.Root, "config", "--local", "--remove-section", "branch."+branch)
	return nil
}
