package treediff

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// repo is a real git repository in t.TempDir() for tests.
type repo struct {
	t   *testing.T
	dir string
	run RunFunc
}

// newRepo makes an empty repository on branch main with one empty commit.
func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir(), run: ExecRunner("", nil)}
	r.git("init", "-q", "-b", "main")
	r.git("commit", "-q", "--allow-empty", "-m", "root")
	return r
}

// git runs git in the repository and returns its trimmed output; any
// failure fails the test.
func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := r.run(context.Background(), r.dir, nil, args...)
	if err != nil {
		r.t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// write creates or replaces a file (and its directories).
func (r *repo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// commitAll stages everything and commits; it returns the new head.
func (r *repo) commitAll(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// stagedDiff stages everything and returns the raw `git diff --cached`
// of the index against HEAD, with Workspace's flags.
func (r *repo) stagedDiff(extra ...string) []byte {
	r.t.Helper()
	r.git("add", "-A")
	args := append(append(extra, DiffArgs()...), "--cached", "HEAD", "--")
	out, err := r.run(context.Background(), r.dir, nil, args...)
	if err != nil {
		r.t.Fatalf("git diff: %v", err)
	}
	return out
}

// lines numbers n lines "line 1".."line n", each with a newline.
func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// mv renames a tracked file with git mv, making the target's directory.
func (r *repo) mv(from, to string) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Join(r.dir, filepath.Dir(to)), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.git("mv", from, to)
}
