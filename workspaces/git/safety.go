package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxRefusalPaths bounds Refusal.Paths so a refusal stays a small message.
const maxRefusalPaths = 20

// Status is a parsed `git status --porcelain=v2 -z --untracked-files=all`.
// Paths are relative to the worktree root. A path may be both staged and
// unstaged.
type Status struct {
	Staged    []string
	Unstaged  []string
	Unmerged  []string
	Untracked []string
}

// Clean reports a worktree with nothing a removal could lose (ignored files
// excepted: they are build output by definition).
func (s Status) Clean() bool {
	return len(s.Staged)+len(s.Unstaged)+len(s.Unmerged)+len(s.Untracked) == 0
}

// Paths is every dirty path once, in status order.
func (s Status) Paths() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range [][]string{s.Unmerged, s.Staged, s.Unstaged, s.Untracked} {
		for _, p := range l {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// Status reports the worktree at dir, read-only (GIT_OPTIONAL_LOCKS=0, so
// it never takes the index lock from a working agent).
func (c *Client) Status(ctx context.Context, dir string) (Status, error) {
	out, err := c.read(ctx, dir, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignore-submodules=none")
	if err != nil {
		return Status{}, fmt.Errorf("status %s: %w", dir, err)
	}
	return parseStatus(out)
}

// parseStatus parses porcelain v2 -z records:
//
//	1 XY sub mH mI mW hH hI path
//	2 XY sub mH mI mW hH hI Xscore path NUL origPath
//	u XY sub m1 m2 m3 mW h1 h2 h3 path
//	? path
//	! path
//	# header
func parseStatus(out []byte) (Status, error) {
	var s Status
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		r := string(recs[i])
		if r == "" {
			continue
		}
		var fields []string
		switch r[0] {
		case '#', '!':
			continue
		case '?':
			s.Untracked = append(s.Untracked, strings.TrimPrefix(r, "? "))
			continue
		case '1':
			fields = strings.SplitN(r, " ", 9)
		case '2':
			fields = strings.SplitN(r, " ", 10)
			i++ // the original path follows in its own NUL field
		case 'u':
			fields = strings.SplitN(r, " ", 11)
			if len(fields) == 11 {
				s.Unmerged = append(s.Unmerged, fields[10])
				continue
			}
		}
		if len(fields) < 9 || len(fields[1]) != 2 {
			return Status{}, fmt.Errorf("status: unparsable record %q", r)
		}
		path := fields[len(fields)-1]
		if fields[1][0] != '.' {
			s.Staged = append(s.Staged, path)
		}
		if fields[1][1] != '.' {
			s.Unstaged = append(s.Unstaged, path)
		}
	}
	return s, nil
}

// Recorded is what the workspace record remembers of a worktree it created.
type Recorded struct {
	// Path is the canonical worktree root returned by CreateWorktree.
	Path string
	// Branch is the branch created for it.
	Branch string
}

// RetireCheck is what CheckRetire saw, for the record and the tombstone.
type RetireCheck struct {
	Worktree Worktree
	Status   Status
}

// CheckRetire decides whether the worktree rec may be removed without losing
// work, refusing with a *Refusal in this order (cheap and decisive first):
//
//  1. missing_authority: the common dir is gone, the main checkout no
//     longer resolves to it (repository moved), or the worktree directory
//     is gone (deleted or moved behind our back);
//  2. unsafe: the path is not a worktree of this common dir, is the main
//     checkout, its .git file and the admin dir's gitdir file do not point
//     at each other, or it has left the recorded branch (a detached HEAD's
//     commits would be lost with the worktree);
//  3. locked;
//  4. submodules: an initialized submodule (its own .git inside);
//  5. dirty: staged, unstaged, unmerged or untracked files.
//
// Other errors are git failures (e.g. a timeout), not refusals.
func (c *Client) CheckRetire(ctx context.Context, repo Repo, rec Recorded) (RetireCheck, error) {
	var chk RetireCheck
	refuse := func(r Reason, detail string, paths []string, note ...string) (RetireCheck, error) {
		ref := &Refusal{Reason: r, Detail: detail, Count: len(paths), Note: strings.Join(note, "")}
		if len(paths) > maxRefusalPaths {
			paths = paths[:maxRefusalPaths]
		}
		ref.Paths = paths
		return chk, fmt.Errorf("retire %s: %w", rec.Path, ref)
	}
	if fi, err := os.Stat(repo.CommonDir); err != nil || !fi.IsDir() {
		return refuse(ReasonMissingAuthority, "repository_gone", nil)
	}
	out, err := c.read(ctx, repo.Root, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil || canonical(line(out)) != canonical(repo.CommonDir) {
		if err != nil && exitCode(err) < 0 && ctx.Err() != nil {
			return chk, fmt.Errorf("retire %s: %w", rec.Path, err)
		}
		return refuse(ReasonMissingAuthority, "repository_moved", nil)
	}
	path := canonical(rec.Path)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return refuse(ReasonMissingAuthority, "worktree_gone", nil)
	} else if err != nil {
		return chk, fmt.Errorf("retire %s: %w", rec.Path, err)
	}
	list, err := c.ListWorktrees(ctx, repo.Root)
	if err != nil {
		return chk, fmt.Errorf("retire %s: %w", rec.Path, err)
	}
	wt, ok := findWorktree(list, path)
	if !ok {
		return refuse(ReasonUnsafe, "not_a_worktree", nil)
	}
	chk.Worktree = wt
	if wt.Main || wt.Bare {
		return refuse(ReasonUnsafe, "main_checkout", nil)
	}
	if !linkedBack(path, repo.CommonDir) {
		return refuse(ReasonUnsafe, "gitdir_mismatch", nil)
	}
	if wt.Branch != rec.Branch {
		return refuse(ReasonUnsafe, "branch_switched", nil)
	}
	if wt.Locked {
		return refuse(ReasonLocked, "", nil, wt.LockReason)
	}
	subs, err := c.initializedSubmodules(ctx, path)
	if err != nil {
		return chk, fmt.Errorf("retire %s: %w", rec.Path, err)
	}
	if len(subs) > 0 {
		return refuse(ReasonSubmodules, "", subs)
	}
	st, err := c.Status(ctx, path)
	if err != nil {
		return chk, fmt.Errorf("retire %s: %w", rec.Path, err)
	}
	chk.Status = st
	if !st.Clean() {
		return refuse(ReasonDirty, "", st.Paths())
	}
	return chk, nil
}

// linkedBack checks the two halves of a linked worktree's identity: path/.git
// is a file "gitdir: <commonDir>/worktrees/<name>", and that admin dir's
// gitdir file names path/.git. A directory that merely sits at the recorded
// path, or a worktree re-created for another repository, fails.
func linkedBack(path, commonDir string) bool {
	b, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return false
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return false
	}
	admin = strings.TrimSpace(admin)
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(path, admin)
	}
	admin = canonical(admin)
	if filepath.Dir(admin) != filepath.Join(canonical(commonDir), "worktrees") {
		return false
	}
	back, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if err != nil {
		return false
	}
	bp := strings.TrimSpace(string(back))
	if !filepath.IsAbs(bp) {
		bp = filepath.Join(admin, bp)
	}
	return canonical(bp) == filepath.Join(path, ".git")
}

// initializedSubmodules lists gitlinks (mode 160000) of the worktree whose
// directory holds a .git, i.e. submodules that were initialized and checked
// out and whose own work a forced removal would delete.
func (c *Client) initializedSubmodules(ctx context.Context, dir string) ([]string, error) {
	out, err := c.read(ctx, dir, "ls-files", "-z", "--stage")
	if err != nil {
		return nil, fmt.Errorf("submodules: %w", err)
	}
	var subs []string
	for _, rec := range splitNUL(out) {
		meta, p, ok := strings.Cut(string(rec), "\t")
		if !ok || !strings.HasPrefix(meta, "160000 ") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, p, ".git")); err == nil {
			subs = append(subs, p)
		}
	}
	return subs, nil
}
