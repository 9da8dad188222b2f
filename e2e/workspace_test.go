//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// Exit codes of shardctl's workspace commands (cmd/shardctl/workspace.go).
const (
	wsExitRefused  = 8
	wsExitNotFound = 9
)

// wsGit runs git in dir with a fixed identity and no user or system config.
func wsGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// wsRepo makes a real repository on main with one commit and an identity
// of its own (the daemon's merge commits need one).
func wsRepo(t *testing.T) string {
	t.Helper()
	testhost.Tool(t, "git")
	dir := shortTemp(t)
	wsGit(t, dir, "init", "-q", "-b", "main")
	wsGit(t, dir, "config", "user.name", "t")
	wsGit(t, dir, "config", "user.email", "t@example.test")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wsGit(t, dir, "add", "README")
	wsGit(t, dir, "commit", "-q", "-m", "initial")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// TestShardctlWorkspaceReviewLoop drives the whole review loop through
// shardctl against the real daemon and a real repository: create, diff,
// a refused retire (unmerged; live when the runtime is up), merge, a proven retire, and the
// tombstone in show.
func TestShardctlWorkspaceReviewLoop(t *testing.T) {
	t.Parallel()
	repo := wsRepo(t)
	d := startDaemon(t)

	var cr protocol.WorkspaceCreateData
	decode(t, d.mustCtl("", "ws", "create", "--cwd", repo, "--label", "feature", "-o", "json"), &cr)
	ws := cr.Workspace
	if !strings.HasPrefix(ws.WorkspaceID, "workspace-") || cr.AgentID == "" || ws.IntegrationTarget != "main" || ws.RepositoryCwd != repo {
		t.Fatalf("create = %+v", cr)
	}
	if err := os.WriteFile(filepath.Join(ws.Cwd, "f.txt"), []byte("feature\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wsGit(t, ws.Cwd, "add", "f.txt")
	wsGit(t, ws.Cwd, "commit", "-q", "-m", "feature")

	r := d.mustCtl("", "ws", "ls")
	if !strings.Contains(r.stdout, ws.WorkspaceID[:len("workspace-")+8]) || !strings.Contains(r.stdout, ws.Branch) {
		t.Errorf("ls:\n%s", r.stdout)
	}
	r = d.mustCtl("", "ws", "diff", ws.WorkspaceID)
	for _, want := range []string{"diff --git a/f.txt b/f.txt", "--- /dev/null", "+++ b/f.txt", "@@ -0,0 +1 @@", "+feature"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("piped diff is colored:\n%q", r.stdout)
	}
	r = d.mustCtl("", "ws", "diff", ws.WorkspaceID, "--stat")
	if !strings.Contains(r.stdout, "1 file changed, 1 insertion(+), 0 deletions(-)") {
		t.Errorf("diff --stat:\n%s", r.stdout)
	}

	// A workspace whose agent runs is refused as live; whether the runtime
	// is up yet depends on the daemon's launch policy, so stop it first when
	// it is, and check the refusal then.
	runtime := func() protocol.RuntimeState {
		var v struct {
			Agent protocol.AgentInfo `json:"agent"`
		}
		decode(t, d.mustCtl("", "agents", "show", cr.AgentID, "-o", "json"), &v)
		return v.Agent.RuntimeState
	}
	if st := runtime(); st == protocol.RuntimeRunning || st == protocol.RuntimeStarting {
		r = d.ctlCode(wsExitRefused, "ws", "retire", ws.WorkspaceID, "--keep")
		if !strings.Contains(r.stderr, "refused: live:") {
			t.Errorf("live refusal: %q", r.stderr)
		}
		d.mustCtl("", "agents", "kill", "--force", cr.AgentID)
		eventually(t, 15*time.Second, "runtime stopped", func() bool {
			st := runtime()
			return st == protocol.RuntimeStopped || st == protocol.RuntimeFailed
		})
	}

	// Not merged yet: confirmation required, with the way to confirm.
	r = d.ctlCode(wsExitRefused, "ws", "retire", ws.WorkspaceID)
	if !strings.Contains(r.stderr, "refused: confirmation_required:") || !strings.Contains(r.stderr, "--force-delete") {
		t.Errorf("confirmation refusal: %q", r.stderr)
	}

	// Merge (squash by default), then retire proves it merged.
	before := wsGit(t, repo, "rev-parse", "HEAD")
	r = d.mustCtl("", "ws", "merge", ws.WorkspaceID)
	after := wsGit(t, repo, "rev-parse", "HEAD")
	if after == before || strings.TrimSpace(r.stdout) != after {
		t.Fatalf("merge printed %q; main %s → %s", r.stdout, before, after)
	}
	head := wsGit(t, ws.Cwd, "rev-parse", "HEAD")
	r = d.mustCtl("", "ws", "retire", ws.WorkspaceID)
	// Proven (same_tree here, as main has not moved since), not confirmed.
	if !strings.Contains(r.stdout, " deleted (") || strings.Contains(r.stdout, "(confirmed)") || !strings.Contains(r.stdout, "undo: git branch "+ws.Branch+" "+head) {
		t.Errorf("retire:\n%s", r.stdout)
	}
	r = d.mustCtl("", "ws", "show", ws.WorkspaceID)
	for _, want := range []string{"retired", "(deleted)", "git branch " + ws.Branch + " " + head} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := d.mustCtl("", "ws", "ls"); strings.Contains(r.stdout, ws.WorkspaceID[:len("workspace-")+8]) {
		t.Errorf("retired workspace listed without --all:\n%s", r.stdout)
	}
	d.ctlCode(wsExitNotFound, "ws", "show", "workspace-nope")
	r = d.ctlCode(wsExitRefused, "ws", "create", "--cwd", shortTemp(t))
	if !strings.Contains(r.stderr, "refused: not_a_repository:") {
		t.Errorf("not a repository: %q", r.stderr)
	}

	// A conflicting merge: refused with the path, main unchanged.
	var other protocol.WorkspaceCreateData
	decode(t, d.mustCtl("", "ws", "create", "--cwd", repo, "--label", "conflict", "-o", "json"), &other)
	if err := os.WriteFile(filepath.Join(other.Workspace.Cwd, "README"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Uncommitted: the retire is refused as dirty, listing the file.
	r = d.ctl("", "ws", "retire", other.Workspace.WorkspaceID, "--force-delete")
	if r.code != wsExitRefused || (!strings.Contains(r.stderr, "refused: dirty:") && !strings.Contains(r.stderr, "refused: live:")) {
		t.Errorf("dirty retire: exit %d stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "refused: dirty:") && !strings.Contains(r.stderr, "\n  README\n") {
		t.Errorf("dirty refusal lacks the path: %q", r.stderr)
	}
	wsGit(t, other.Workspace.Cwd, "commit", "-q", "-am", "theirs")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wsGit(t, repo, "commit", "-q", "-am", "ours")
	mainHead := wsGit(t, repo, "rev-parse", "HEAD")
	r = d.ctlCode(wsExitRefused, "ws", "merge", other.Workspace.WorkspaceID, "--strategy", "merge")
	if !strings.HasPrefix(r.stderr, "shardctl: refused: merge_conflict:") || !strings.Contains(r.stderr, "\n  README\n") || r.stdout != "" {
		t.Errorf("conflict: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if got := wsGit(t, repo, "rev-parse", "HEAD"); got != mainHead {
		t.Errorf("main moved on a refused merge: %s → %s", mainHead, got)
	}
}
