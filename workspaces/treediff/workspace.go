package treediff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/protocol"
)

// RunFunc runs git with args in dir, with env added to the process
// environment (KEY=VALUE entries; nil for none), and returns its standard
// output. A non-zero exit is an error. It is how this package reaches git
// without depending on workspaces/git: that package's runner, or
// ExecRunner, fits behind it. It must be safe for concurrent use if the
// caller diffs concurrently.
type RunFunc func(ctx context.Context, dir string, env []string, args ...string) ([]byte, error)

// ExecRunner returns a RunFunc that runs the git binary at bin (""
// means "git" on PATH) directly, never through a shell, with
// GIT_TERMINAL_PROMPT=0 (never wait for credentials), LC_ALL=C (stable,
// parseable messages) and GIT_OPTIONAL_LOCKS=0 (a read never takes the
// index lock another git process might want), and without inherited
// variables such as GIT_DIR that would point it away from dir (isRepoEnv);
// the env argument may still set them. ctx bounds the run: it is
// killed when ctx ends. The error of a failed run carries git's stderr
// (its first 4 KiB) and wraps the *exec.ExitError.
func ExecRunner(bin string, forks *procs.ForkGate) RunFunc {
	if bin == "" {
		bin = "git"
	}
	return func(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.Env = append(inheritedEnv(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
		cmd.Env = append(cmd.Env, env...)
		// A killed git's children (hooks are not run here, but a
		// credential helper could be) must not keep the pipes open forever.
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := forks.Run(cmd); err != nil {
			msg := stderr.Bytes()
			if len(msg) > 4096 {
				msg = msg[:4096]
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, fmt.Errorf("git %s: %w (%w)", firstArg(args), ctxErr, err)
			}
			if m := strings.TrimSpace(string(msg)); m != "" {
				return nil, fmt.Errorf("git %s: %w: %s", firstArg(args), err, m)
			}
			return nil, fmt.Errorf("git %s: %w", firstArg(args), err)
		}
		return stdout.Bytes(), nil
	}
}

// isRepoEnv reports whether k is a variable that points git at a
// repository, index or object store other than dir's. A daemon started
// from a git hook inherits some of them; passed on, they would make git
// ignore dir.
func isRepoEnv(k string) bool {
	switch k {
	case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
		"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX":
		return true
	}
	return false
}

// inheritedEnv is the process environment without the isRepoEnv variables.
func inheritedEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !isRepoEnv(k) {
			out = append(out, kv)
		}
	}
	return out
}

// firstArg names a git invocation in errors without its (possibly long)
// arguments.
func firstArg(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++ // the option's value
		case !strings.HasPrefix(a, "-"):
			return a
		}
	}
	return ""
}

// DiffArgs returns the flags Workspace passes to `git diff`, before the base:
// no colour, no external diff or textconv driver (config must not change
// the bytes Parse reads), rename detection, submodules as one
// "Subproject commit" line, three lines of context, the a/ b/ prefixes
// Parse strips whatever diff.noprefix or diff.mnemonicPrefix say, and
// paths from the repository root whatever diff.relative says. Exported so
// that a caller (shardctl's unified view, a test) runs the same diff; a
// fresh slice each call, so no caller can change another's.
func DiffArgs() []string {
	return []string{
		"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames",
		"--submodule=short", "-U3", "--src-prefix=a/", "--dst-prefix=b/", "--no-relative",
	}
}

// Workspace diffs the worktree at dir against base (a commit: the caller
// computes the merge-base with the integration target), including staged,
// unstaged and untracked changes, and parses the result within lim.
//
// How untracked files get in: Workspace copies the worktree's index into a
// temporary directory, records every untracked, non-ignored file in that
// copy as intent-to-add (`git add -N`, which hashes no content), and runs
// `git diff <base>` with GIT_INDEX_FILE pointing at the copy. That is one
// git diff of the working tree against base, so git's binary detection,
// .gitattributes, and rename detection (a file moved with plain mv is a
// rename, not a delete and an add) apply to untracked files exactly as to
// tracked ones; the real index is never written, and the object database
// gains at most git's empty blob (what an intent-to-add entry points at),
// never the untracked content. The alternative, rendering untracked files
// by hand next to `git diff <base>`, would duplicate git's binary
// heuristics and lose renames.
// Untracked nested repositories ("dir/" entries of ls-files) are left out:
// their content belongs to another repository.
//
// Errors carry protocol codes: INVALID_REQUEST wrapping ErrBadBase for a
// base that is not a commit, INTERNAL_ERROR for a failed git run or output
// Parse calls malformed (the partial Result is not returned then).
func Workspace(ctx context.Context, run RunFunc, dir, base string, lim Limits) (*Result, error) {
	if base == "" || strings.HasPrefix(base, "-") {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "diff: base %q: %w", base, ErrBadBase)
	}
	out, err := run(ctx, dir, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", base+"^{commit}")
	if err != nil {
		if ctx.Err() != nil {
			return nil, protocol.Errorf(protocol.CodeTimeout, "diff: resolve base %q: %w", base, err)
		}
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "diff: base %q: %w (%w)", base, ErrBadBase, err)
	}
	// Diff against the commit just resolved, so a ref that moves meanwhile
	// cannot make the diff disagree with the check.
	sha := strings.TrimSpace(string(out))
	tmp, err := os.MkdirTemp("", "shard-diff-*")
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "diff: temporary index: %w", err)
	}
	defer os.RemoveAll(tmp)
	index := filepath.Join(tmp, "index")
	if err := copyIndex(ctx, run, dir, index); err != nil {
		return nil, gitErr(ctx, "copy index", err)
	}
	env := []string{"GIT_INDEX_FILE=" + index, "GIT_LITERAL_PATHSPECS=1"}
	out, err = run(ctx, dir, env, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, gitErr(ctx, "list untracked files", err)
	}
	var list bytes.Buffer
	untracked := map[string]bool{}
	for _, name := range bytes.Split(out, []byte{0}) {
		if len(name) == 0 || name[len(name)-1] == '/' {
			continue
		}
		untracked[string(name)] = true
		list.Write(name)
		list.WriteByte(0)
	}
	if list.Len() > 0 {
		listFile := filepath.Join(tmp, "untracked")
		if err := os.WriteFile(listFile, list.Bytes(), 0o600); err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "diff: list untracked files: %w", err)
		}
		if _, err := run(ctx, dir, env, "add", "--intent-to-add", "--pathspec-from-file="+listFile, "--pathspec-file-nul"); err != nil {
			return nil, gitErr(ctx, "add untracked files to the temporary index", err)
		}
	}
	args := append(DiffArgs(), sha, "--")
	out, err = run(ctx, dir, env, args...)
	if err != nil {
		return nil, gitErr(ctx, "diff", err)
	}
	res, err := Parse(out, lim)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "diff: parse git diff output: %w", err)
	}
	for i := range res.Files {
		// An added file git did not track before this diff (a rename of
		// a tracked file to an untracked name stays a rename).
		if f := &res.Files[i]; f.Status == StatusAdded && untracked[f.Path] {
			f.Untracked = true
		}
	}
	return res, nil
}

// copyIndex copies the worktree's index (wherever git keeps it: a linked
// worktree's is under the common dir) to dst, so the temporary index starts
// with the real one's entries and stat data. A worktree without an index
// yet leaves dst absent, which git reads as empty: every tracked file then
// shows through the intent-to-add step, with the same diff.
//
// The copy keeps the index's mtime: git re-reads the content of an entry
// whose stat data matches only when the entry is "racily clean" (its mtime
// not older than the index file's), and a file rewritten with the same
// size in the same second as the index was written (an agent's edit right
// after the worktree's checkout) is found only that way. A copy stamped
// now would hide that edit.
func copyIndex(ctx context.Context, run RunFunc, dir, dst string) error {
	out, err := run(ctx, dir, nil, "rev-parse", "--git-path", "index")
	if err != nil {
		return err
	}
	src := strings.TrimRight(string(out), "\n")
	if !filepath.IsAbs(src) {
		src = filepath.Join(dir, src)
	}
	data, err := os.ReadFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// gitErr wraps a failed git step with TIMEOUT when ctx ended it and
// INTERNAL_ERROR otherwise.
func gitErr(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return protocol.Errorf(protocol.CodeTimeout, "diff: %s: %w", step, err)
	}
	return protocol.Errorf(protocol.CodeInternal, "diff: %s: %w", step, err)
}
