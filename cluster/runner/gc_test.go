package runner_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/runner"
	"github.com/shard-dev/shard/protocol"
)

// waitSaid waits until the runner logged msg n times.
func waitSaid(t *testing.T, said <-chan string, msg string, n int) {
	t.Helper()
	timeout := time.After(bound)
	for n > 0 {
		select {
		case m := <-said:
			if m == msg {
				n--
			}
		case <-timeout:
			t.Fatalf("the runner did not say %q", msg)
		}
	}
}

const (
	saidRetired = "cluster: the run's worktree retired (its branch is on the remote)"
	saidKept    = "cluster: the run's worktree is kept: its branch was not pushed"
)

// TestRunnerRetiresPushedWorktrees: once a run's terminal record is
// written and its branch is on the remote, its worktree and its branch in
// the cache go; the cache stays until no run used it for the idle time,
// and then Prune removes it, and the next run fetches it again.
func TestRunnerRetiresPushedWorktrees(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-g", 2, nil)
	said := make(chan string, 64)
	n := startNodeWith(t, js, "n2", "1", 2, newFakeHost(false), slog.New(logSignal{said}), records.Options{})
	waitSaid(t, said, saidRetired, 2)
	var cache string
	for i, key := range keys {
		r := waitRun(t, parent, key, "its end", terminal)
		if r.State != protocol.RunCompleted || r.Git.Head == "" {
			t.Fatalf("%s: %+v", key, r)
		}
		if got := o.show(r.Git.Branch, "file-"+string(rune('0'+i))+".txt"); got == "" {
			t.Fatalf("%s: its work is not on the remote", key)
		}
		g := &runner.Git{Root: n.root}
		if _, err := os.Stat(g.WorktreeOf(r.RunID)); !os.IsNotExist(err) {
			t.Fatalf("%s: the worktree is still there: %v", key, err)
		}
	}
	caches, _ := filepath.Glob(filepath.Join(n.root, "repos", "*.git"))
	if len(caches) != 1 {
		t.Fatalf("caches %v", caches)
	}
	cache = caches[0]
	if refs := o.git(cache, "for-each-ref", "--format=%(refname)", "refs/heads/", "refs/remotes/"); refs != "" {
		t.Fatalf("the cache's branches after the runs: %q", refs)
	}
	if wts := o.git(cache, "worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 {
		t.Fatalf("the cache's worktrees after the runs: %q", wts)
	}

	g := &runner.Git{Root: n.root, Node: "n2"}
	if gone, err := g.Prune(t.Context(), time.Hour, time.Now().Add(30*time.Minute)); err != nil || len(gone) != 0 {
		t.Fatalf("prune of a cache used half an hour ago: %v %v", gone, err)
	}
	if gone, err := g.Prune(t.Context(), time.Hour, time.Now().Add(2*time.Hour)); err != nil || len(gone) != 1 || gone[0] != cache {
		t.Fatalf("prune of a cache unused for two hours: %v %v", gone, err)
	}
	if _, err := os.Stat(cache); !os.IsNotExist(err) {
		t.Fatalf("the pruned cache: %v", err)
	}
	// The next run of the repository makes its cache again.
	more := queue(t, parent, o, "job-h", 1, nil)
	if r := waitRun(t, parent, more[0], "its end", terminal); r.State != protocol.RunCompleted {
		t.Fatalf("a run after the prune: %+v", r)
	}
	waitSaid(t, said, saidRetired, 1)
}

// TestRunnerKeepsUnpushedWork: a run whose push the remote refuses keeps
// its worktree (its work is nowhere else) and says so, and Prune keeps
// its cache however old; so does a cache holding an interrupted run's
// work (Retire commits it onto a branch there, never pushed), and Release
// keeps a worktree holding changes the push did not take.
func TestRunnerKeepsUnpushedWork(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-u", 1, nil)
	host := newFakeHost(true)
	said := make(chan string, 64)
	n := startNodeWith(t, js, "n2", "1", 1, host, slog.New(logSignal{said}), records.Options{})
	<-host.started
	o.git(o.work, "commit", "-q", "--allow-empty", "-m", "someone else")
	o.git(o.work, "push", "-q", "-f", "origin", "HEAD:refs/heads/shard/job-u-run-0")
	host.lease("run-0").end(runnerOutcome())
	if r := waitRun(t, parent, keys[0], "its end", terminal); r.State != protocol.RunFailed {
		t.Fatalf("a run whose push was refused: %+v", r)
	}
	waitSaid(t, said, saidKept, 1)
	g := &runner.Git{Root: n.root, Node: "n2"}
	if got, err := os.ReadFile(filepath.Join(g.WorktreeOf("run-0"), "file-0.txt")); err != nil || string(got) != "written by run-0\n" {
		t.Fatalf("the unpushed run's worktree: %q %v", got, err)
	}
	far := time.Now().Add(365 * 24 * time.Hour)
	if gone, err := g.Prune(t.Context(), time.Hour, far); err != nil || len(gone) != 0 {
		t.Fatalf("prune of a cache with an unpushed worktree: %v %v", gone, err)
	}

	// An interrupted run's work, retired into its cache's branch.
	g2 := &runner.Git{Root: filepath.Join(t.TempDir(), "runs"), Node: "n1"}
	run := records.RunRecord{RunID: "run-9", JobID: "job-9", Name: "t", Git: o.branch("shard/job-9-run-9")}
	ws, err := g2.Prepare(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "half.txt"), []byte("half\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if gone, err := g2.Retire(t.Context(), run); err != nil || !gone {
		t.Fatalf("retire: %v %v", gone, err)
	}
	if gone, err := g2.Prune(t.Context(), time.Hour, far); err != nil || len(gone) != 0 {
		t.Fatalf("prune of a cache holding an interrupted run's work: %v %v", gone, err)
	}
	if got := o.git(ws.Cache, "show", "refs/heads/shard/job-9-run-9:half.txt"); got != "half" {
		t.Fatalf("the interrupted run's work in the cache: %q", got)
	}

	// A worktree with changes after its push is kept by Release.
	run2 := records.RunRecord{RunID: "run-8", JobID: "job-8", Name: "t", Git: o.branch("shard/job-8-run-8")}
	ws2, err := g2.Prepare(t.Context(), run2)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := g2.Finish(t.Context(), run2, ws2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws2.Dir, "late.txt"), []byte("late\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if gone, err := g2.Release(t.Context(), run2, pushed.Head); gone || err == nil || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("release of a worktree with unpushed changes: %v %v", gone, err)
	}
	if _, err := os.Stat(filepath.Join(ws2.Dir, "late.txt")); err != nil {
		t.Fatalf("the unpushed change: %v", err)
	}
	if err := os.Remove(filepath.Join(ws2.Dir, "late.txt")); err != nil {
		t.Fatal(err)
	}
	if gone, err := g2.Release(t.Context(), run2, pushed.Head); !gone || err != nil {
		t.Fatalf("release of the clean worktree: %v %v", gone, err)
	}
}
