package runner_test

import (
	"errors"
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

// TestRunnerRunsClaimedRuns: one node with room for one run takes three
// queued runs one after another (never two at once): each goes starting,
// active, completed; its file is committed under Shard's identity and
// pushed to its branch on the remote, and the terminal record carries the
// final text, usage, diff stat and pushed head.
func TestRunnerRunsClaimedRuns(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-a", 3, nil)
	host := newFakeHost(false)
	n := startNode(t, js, "n2", "1", 1, host)

	for i, key := range keys {
		r := waitRun(t, parent, key, "its end", terminal)
		if r.State != protocol.RunCompleted || r.Node != "n2" || r.Incarnation != "1" || r.Error != "" {
			t.Fatalf("run %s ended %+v", key, r)
		}
		if r.StartedAt == 0 || r.EndedAt < r.StartedAt || r.LeaseUntil != 0 || r.ClaimedAt == 0 {
			t.Errorf("run %s times: %+v", key, r)
		}
		if !strings.HasPrefix(r.FinalText, "wrote file-") || r.Usage == nil || r.Usage.Input != 3 {
			t.Errorf("run %s final text %q usage %+v", key, r.FinalText, r.Usage)
		}
		if r.Git == nil || r.Git.Head == "" || r.Git.Head == o.base {
			t.Fatalf("run %s pushed no commit: %+v", key, r.Git)
		}
		if r.Workspace == nil || r.Workspace.Branch != r.Git.Branch || r.Workspace.DiffStat == nil ||
			*r.Workspace.DiffStat != (protocol.DiffStats{Files: 1, Additions: 1}) {
			t.Errorf("run %s workspace %+v", key, r.Workspace)
		}
		// The branch on the remote holds the file, in one commit of
		// Shard's own on the base.
		file := "file-" + string(rune('0'+i)) + ".txt"
		if got := o.show(r.Git.Branch, file); got != "written by run-"+string(rune('0'+i))+"\n" {
			t.Errorf("%s on %s: %q", file, r.Git.Branch, got)
		}
		if head := o.git(o.bare, "rev-parse", "refs/heads/"+r.Git.Branch); head != r.Git.Head {
			t.Errorf("remote %s at %s, record says %s", r.Git.Branch, head, r.Git.Head)
		}
		if who := o.git(o.bare, "log", "-1", "--format=%an <%ae>|%cn|%P", r.Git.Head); who != "Shard <shard@localhost>|Shard|"+o.base {
			t.Errorf("commit %s: %q", r.Git.Head, who)
		}
	}
	if host.max() != 1 {
		t.Errorf("%d leases at once on a node with room for 1", host.max())
	}
	// Its cache and worktrees are the owner's alone.
	for _, d := range []string{n.root, n.root + "/repos", n.root + "/worktrees"} {
		if fi, err := statMode(d); err != nil || fi != 0o700 {
			t.Errorf("%s: mode %o, %v", d, fi, err)
		}
	}
	if q, err := parent.Claims.Keys(t.Context(), ""); err != nil || len(q) != 0 {
		t.Errorf("claim queue after: %v %v", q, err)
	}
}

// TestRunnersShareWork: three nodes with room for one run each and six
// queued runs whose leases wait: each node holds exactly one run at a
// time, three nodes take runs, and when the leases end the others are
// claimed until all six completed.
func TestRunnersShareWork(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-s", 6, nil)
	hosts := []*fakeHost{newFakeHost(true), newFakeHost(true), newFakeHost(true)}
	for i, h := range hosts {
		startNode(t, js, []string{"n1", "n2", "n3"}[i], "1", 1, h)
	}
	byNode := map[string]int{}
	for done := 0; done < 6; {
		// Three leases run (one per node); end them.
		var live []string
		for _, h := range hosts {
			select {
			case id := <-h.started:
				live = append(live, id)
				h.lease(id).end(runnerOutcome())
			case <-time.After(bound):
				t.Fatalf("a node started no run (%d done)", done)
			}
		}
		done += len(live)
	}
	for _, key := range keys {
		r := waitRun(t, parent, key, "its end", terminal)
		if r.State != protocol.RunCompleted {
			t.Fatalf("%s: %+v", key, r)
		}
		byNode[r.Node]++
	}
	for i, h := range hosts {
		if h.max() != 1 {
			t.Errorf("node %d held %d leases at once, capacity 1", i+1, h.max())
		}
	}
	if len(byNode) != 3 || byNode["n1"]+byNode["n2"]+byNode["n3"] != 6 {
		t.Errorf("runs by node: %v", byNode)
	}
}

// TestRunnerStopRequested: a stop asked by the parent's node
// (StopRequestedAt, written as a compare-and-set) stops the lease, and
// the run ends cancelled with its stage; what the child wrote so far is
// still pushed.
func TestRunnerStopRequested(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-c", 1, nil)
	host := newFakeHost(true)
	startNode(t, js, "n3", "1", 2, host)
	<-host.started
	waitRun(t, parent, keys[0], "active", func(r records.RunRecord) bool { return r.State == protocol.RunActive })
	for {
		e, err := parent.Runs.Get(t.Context(), keys[0])
		if err != nil {
			t.Fatal(err)
		}
		e.Value.StopRequestedAt = time.Now().UnixMilli()
		if _, err = parent.Runs.Update(t.Context(), keys[0], e.Value, e.Revision); err == nil {
			break
		}
	}
	r := waitRun(t, parent, keys[0], "its end", terminal)
	if r.State != protocol.RunCancelled || r.StopStage != "abort" || r.Error != "aborted" || r.StopRequestedAt == 0 {
		t.Fatalf("stopped run: %+v", r)
	}
	if r.Git.Head == "" || o.show(r.Git.Branch, "file-0.txt") == "" {
		t.Errorf("the stopped run's work was not pushed: %+v", r.Git)
	}
}

// TestRunnerTimeout: a run whose lease outlives its timeout is stopped
// and ends timed_out; so does a run the parent's node stopped at its
// deadline (the parent keeps the deadline too, and may act first).
func TestRunnerTimeout(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-t", 2, func(i int) records.RunRecord {
		return records.RunRecord{Task: "write slow.txt", TimeoutMs: []int64{300, 3_600_000}[i], QueuedAt: int64(i)}
	})
	host := newFakeHost(true)
	startNode(t, js, "n1", "1", 2, host)
	r := waitRun(t, parent, keys[0], "its end", terminal)
	if r.State != protocol.RunTimedOut || r.Error != "deadline exceeded" || r.Deadline == 0 {
		t.Fatalf("timed out run: %+v", r)
	}
	a := waitRun(t, parent, keys[1], "active", func(r records.RunRecord) bool { return r.State == protocol.RunActive })
	for {
		e, err := parent.Runs.Get(t.Context(), keys[1])
		if err != nil {
			t.Fatal(err)
		}
		e.Value.StopRequestedAt = a.Deadline // the parent's node's deadline fired
		if _, err = parent.Runs.Update(t.Context(), keys[1], e.Value, e.Revision); err == nil {
			break
		}
	}
	if r := waitRun(t, parent, keys[1], "its end", terminal); r.State != protocol.RunTimedOut || r.Error != "deadline exceeded" {
		t.Fatalf("run stopped at its deadline: %+v", r)
	}
}

// TestRunnerFailures: a run whose worktree cannot be made (its base is
// not on the remote), one whose child cannot be hosted, and one whose
// push the remote refuses (its branch moved there meanwhile) each end
// failed with an error saying why; none is left unfinished.
func TestRunnerFailures(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-f", 3, func(i int) records.RunRecord {
		return records.RunRecord{RunID: "x", Task: "write f.txt", QueuedAt: int64(i + 1)}
	})
	// run-0: a base the remote does not have.
	e, err := parent.Runs.Get(t.Context(), keys[0])
	if err != nil {
		t.Fatal(err)
	}
	e.Value.Git.Base = strings.Repeat("ab", 20)
	if _, err := parent.Runs.Update(t.Context(), keys[0], e.Value, e.Revision); err != nil {
		t.Fatal(err)
	}
	host := newFakeHost(true)
	host.failOn = "run-1"
	startNode(t, js, "n2", "1", 3, host)
	// run-2: its branch moves on the remote while it runs.
	if id := <-host.started; id != "run-2" {
		t.Fatalf("started %s", id)
	}
	o.git(o.work, "commit", "-q", "--allow-empty", "-m", "someone else")
	o.git(o.work, "push", "-q", "-f", "origin", "HEAD:refs/heads/shard/job-f-run-2")
	host.lease("run-2").end(runnerOutcome())

	want := map[string]string{
		keys[0]: "cannot make the run's worktree: runner: the base commit is not on the remote",
		keys[1]: "cannot host the child: no runtime for run-1",
		keys[2]: "cannot push the run's branch: git ",
	}
	for _, key := range keys {
		r := waitRun(t, parent, key, "its end", terminal)
		if r.State != protocol.RunFailed || !strings.HasPrefix(r.Error, want[key]) || key == keys[2] && !strings.Contains(r.Error, "[rejected]") {
			t.Errorf("%s: state %s error %q, want failed %q…", key, r.State, r.Error, want[key])
		}
	}
}

// TestRunnerGivesUpALostRun: a run of this node interrupted by a survivor
// (this incarnation declared dead) has its lease stopped, and the node
// writes nothing more into it.
func TestRunnerGivesUpALostRun(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-l", 1, nil)
	host := newFakeHost(true)
	startNode(t, js, "n3", "7", 1, host)
	<-host.started
	waitRun(t, parent, keys[0], "active", func(r records.RunRecord) bool { return r.State == protocol.RunActive })
	got, err := parent.InterruptNodeRuns(t.Context(), "n3", "7")
	if err != nil || len(got) != 1 {
		t.Fatalf("interrupt: %v %v", got, err)
	}
	l := host.lease("run-0")
	select {
	case o := <-l.ended:
		if !o.Cancelled {
			t.Fatalf("lease ended %+v", o)
		}
	case <-time.After(bound):
		t.Fatal("the lost run's lease was not stopped")
	}
	e, err := parent.Runs.Get(t.Context(), keys[0])
	if err != nil || e.Revision != got[0].Revision || e.Value.State != protocol.RunInterrupted {
		t.Fatalf("the lost run was written after its interruption: %+v rev %d (interrupted at %d), %v", e.Value, e.Revision, got[0].Revision, err)
	}
}

// TestRunnerInterruptPrevious: a node that starts again as a new
// incarnation interrupts the runs its previous incarnation held, once:
// a second call finds nothing; others' runs are untouched.
func TestRunnerInterruptPrevious(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-r", 2, nil)
	for i, key := range keys {
		e, err := parent.Runs.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		e.Value.Node, e.Value.Incarnation, e.Value.State = []string{"n1", "n2"}[i], "4", protocol.RunActive
		if _, err := parent.Runs.Update(t.Context(), key, e.Value, e.Revision); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, js, "n1", "5", 1, newFakeHost(true))
	got, err := n.r.InterruptPrevious(t.Context(), "4")
	if err != nil || len(got) != 1 || got[0].Key != keys[0] || got[0].Value.State != protocol.RunInterrupted {
		t.Fatalf("interrupt previous: %+v %v", got, err)
	}
	if again, err := n.r.InterruptPrevious(t.Context(), "4"); err != nil || len(again) != 0 {
		t.Fatalf("a second time: %+v %v", again, err)
	}
	if e, err := parent.Runs.Get(t.Context(), keys[1]); err != nil || e.Value.State != protocol.RunActive {
		t.Fatalf("n2's run: %+v %v", e.Value, err)
	}
	if held, err := n.r.HeldBy(t.Context(), "4"); err != nil || len(held) != 1 || held[0].Key != keys[0] || held[0].Value.State != protocol.RunInterrupted {
		t.Fatalf("held by incarnation 4: %+v %v", held, err)
	}
}

// TestGitRetire: the worktree of an interrupted run is removed when it is
// provably the node's (under its root, listed by its cache), after what
// the child changed was committed onto the run's branch in the cache;
// a run the node never made a worktree for, or one whose directory is
// not a worktree of its cache, is left alone.
func TestGitRetire(t *testing.T) {
	o := newOrigin(t)
	g := &runner.Git{Root: filepath.Join(t.TempDir(), "runs"), Node: "n1"}
	run := records.RunRecord{RunID: "run-1", JobID: "job-1", Name: "t", Git: o.branch("shard/job-1-run-1")}
	ws, err := g.Prepare(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Dir != g.WorktreeOf("run-1") {
		t.Fatalf("worktree %s", ws.Dir)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "half.txt"), []byte("half done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory in the worktrees' place that is no worktree of a cache.
	stranger := records.RunRecord{RunID: "run-2", JobID: "job-1", Git: run.Git}
	if err := os.MkdirAll(g.WorktreeOf("run-2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if gone, err := g.Retire(t.Context(), stranger); err != nil || gone {
		t.Fatalf("retire a stranger: %v %v", gone, err)
	}
	if _, err := os.Stat(g.WorktreeOf("run-2")); err != nil {
		t.Fatalf("the stranger's directory: %v", err)
	}
	if gone, err := g.Retire(t.Context(), run); err != nil || !gone {
		t.Fatalf("retire: %v %v", gone, err)
	}
	if _, err := os.Stat(ws.Dir); !os.IsNotExist(err) {
		t.Fatalf("the worktree is still there: %v", err)
	}
	if got := o.git(ws.Cache, "show", "refs/heads/shard/job-1-run-1:half.txt"); got != "half done" {
		t.Fatalf("the child's work in the cache: %q", got)
	}
	if o.show("shard/job-1-run-1", "half.txt") != "" {
		t.Fatal("a retired run's work was pushed")
	}
	if gone, err := g.Retire(t.Context(), run); err != nil || gone {
		t.Fatalf("retire again: %v %v", gone, err)
	}
}

// TestRunnerRidesOutNoQuorum: the run's end cannot be written while the
// cluster has no quorum (here: its one server is down); the node says so
// and tries again, and once the server is back the run ends completed,
// its branch pushed.
func TestRunnerRidesOutNoQuorum(t *testing.T) {
	js, srv := startNATSServer(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-q", 1, nil)
	host := newFakeHost(true)
	said := make(chan string, 64)
	startNodeWith(t, js, "n2", "1", 1, host, slog.New(logSignal{said}), records.Options{Timeout: 300 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond})
	<-host.started
	waitRun(t, parent, keys[0], "active", func(r records.RunRecord) bool { return r.State == protocol.RunActive })
	srv.stop()
	host.lease("run-0").end(runnerOutcome())
	for msg := range said {
		if msg == "cluster: run record not written; retrying" {
			break
		}
	}
	srv.start()
	r := waitRun(t, parent, keys[0], "its end", terminal)
	if r.State != protocol.RunCompleted || r.Git.Head == "" || o.show(r.Git.Branch, "file-0.txt") == "" {
		t.Fatalf("run after the outage: %+v", r)
	}
}

// TestRunnerStopStuck: a stop whose escalation goes on (the child ignored
// the abort) shows its stage in the record while the run is still live,
// and the run ends cancelled with the stage that ended it.
func TestRunnerStopStuck(t *testing.T) {
	js := startNATS(t)
	parent := openRecords(t, js)
	o := newOrigin(t)
	keys := queue(t, parent, o, "job-k", 1, nil)
	host := newFakeHost(true)
	host.stuck = true
	startNode(t, js, "n3", "1", 1, host)
	<-host.started
	waitRun(t, parent, keys[0], "active", func(r records.RunRecord) bool { return r.State == protocol.RunActive })
	for {
		e, err := parent.Runs.Get(t.Context(), keys[0])
		if err != nil {
			t.Fatal(err)
		}
		e.Value.StopRequestedAt, e.Value.StopStage = time.Now().UnixMilli(), "abort"
		if _, err = parent.Runs.Update(t.Context(), keys[0], e.Value, e.Revision); err == nil {
			break
		}
	}
	waitRun(t, parent, keys[0], "the term stage while live", func(r records.RunRecord) bool {
		return r.State == protocol.RunActive && r.StopStage == "term"
	})
	host.lease("run-0").end(runner.Outcome{Cancelled: true, StopStage: "kill", Error: "runtime exited (signal: killed)"})
	if r := waitRun(t, parent, keys[0], "its end", terminal); r.State != protocol.RunCancelled || r.StopStage != "kill" {
		t.Fatalf("stuck stop's end: %+v", r)
	}
}

// TestGitResume: a relaunch (a run pinned here, naming the child's
// worktree) goes on in the worktree the child's first run made, on its
// branch as pushed, and its push follows that work; a release or retire
// of the first run meanwhile leaves it to the relaunch; once that
// worktree was retired, it is made again at the same path from what the
// cache kept, and once it was released and its cache pruned, from the
// remote.
func TestGitResume(t *testing.T) {
	o := newOrigin(t)
	g := &runner.Git{Root: filepath.Join(t.TempDir(), "runs"), Node: "n1"}
	first := records.RunRecord{RunID: "run-1", JobID: "job-1", Name: "t", Git: o.branch("shard/job-1-run-1")}
	ws, err := g.Prepare(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "one.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pushed1, err := g.Finish(t.Context(), first, ws)
	if err != nil {
		t.Fatal(err)
	}
	again := records.RunRecord{RunID: "run-2", JobID: "job-2", Name: "t", Git: first.Git, Host: "n1", Worktree: "run-1"}
	ws2, err := g.Resume(t.Context(), again)
	if err != nil || ws2.Dir != ws.Dir {
		t.Fatalf("resume: %+v %v, want worktree %s", ws2, err, ws.Dir)
	}
	// The first run released (or retired) only now, the relaunch working
	// in the worktree already: it is the relaunch's, and stays.
	if gone, err := g.Release(t.Context(), first, pushed1.Head); gone || err == nil || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("release of the first run while the relaunch works in its worktree: %v %v", gone, err)
	}
	if gone, err := g.Retire(t.Context(), first); gone || err != nil {
		t.Fatalf("retire of the first run while the relaunch works in its worktree: %v %v", gone, err)
	}
	if _, err := os.Stat(filepath.Join(ws2.Dir, "one.txt")); err != nil {
		t.Fatalf("the relaunch's worktree: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ws2.Dir, "two.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pushed, err := g.Finish(t.Context(), again, ws2)
	if err != nil {
		t.Fatal(err)
	}
	if o.show("shard/job-1-run-1", "one.txt") != "one\n" || o.show("shard/job-1-run-1", "two.txt") != "two\n" {
		t.Fatal("the branch on the remote lacks the first run's or the relaunch's work")
	}
	if pushed.DiffStat == nil || pushed.DiffStat.Files != 2 {
		t.Fatalf("the relaunch's diff stat = %+v, want the workspace's two files", pushed.DiffStat)
	}
	// Retired after an interruption: made again, with what it held.
	if err := os.WriteFile(filepath.Join(ws2.Dir, "three.txt"), []byte("three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Leave(ws2)
	if gone, err := g.Retire(t.Context(), again); err != nil || !gone {
		t.Fatalf("retire: %v %v", gone, err)
	}
	third := records.RunRecord{RunID: "run-3", JobID: "job-3", Name: "t", Git: first.Git, Host: "n1", Worktree: "run-1"}
	ws3, err := g.Resume(t.Context(), third)
	if err != nil || ws3.Dir != ws.Dir {
		t.Fatalf("resume after a retire: %+v %v", ws3, err)
	}
	for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
		if _, err := os.Stat(filepath.Join(ws3.Dir, f)); err != nil {
			t.Fatalf("%s in the worktree made again: %v", f, err)
		}
	}
	// Released once its push went through, and its cache pruned as idle:
	// the next relaunch makes both again from the remote.
	pushed3, err := g.Finish(t.Context(), third, ws3)
	if err != nil {
		t.Fatal(err)
	}
	g.Leave(ws3)
	if gone, err := g.Release(t.Context(), third, pushed3.Head); err != nil || !gone {
		t.Fatalf("release: %v %v", gone, err)
	}
	if gone, err := g.Prune(t.Context(), time.Hour, time.Now().Add(2*time.Hour)); err != nil || len(gone) != 1 {
		t.Fatalf("prune of the idle cache: %v %v", gone, err)
	}
	fourth := records.RunRecord{RunID: "run-4", JobID: "job-4", Name: "t", Git: first.Git, Host: "n1", Worktree: "run-1"}
	ws4, err := g.Resume(t.Context(), fourth)
	if err != nil || ws4.Dir != ws.Dir {
		t.Fatalf("resume after the cache was pruned: %+v %v", ws4, err)
	}
	for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
		if _, err := os.Stat(filepath.Join(ws4.Dir, f)); err != nil {
			t.Fatalf("%s in the worktree made from the remote: %v", f, err)
		}
	}
	bad := third
	bad.Worktree = "../x"
	if _, err := g.Resume(t.Context(), bad); !errors.Is(err, runner.ErrBadPlace) {
		t.Fatalf("resume of a bad worktree name: %v", err)
	}
}

// TestGitWorktreeIsARepository: a run's worktree is a repository of its
// own, its main checkout on the run's branch at the base and its origin
// the shared remote, so the child's own isolated runs can branch from it
// and go to the remote as anywhere runs.
func TestGitWorktreeIsARepository(t *testing.T) {
	o := newOrigin(t)
	g := &runner.Git{Root: filepath.Join(t.TempDir(), "runs"), Node: "n1"}
	run := records.RunRecord{RunID: "run-1", JobID: "job-1", Name: "t", Git: o.branch("shard/job-1-run-1")}
	ws, err := g.Prepare(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.git(ws.Dir, "remote", "get-url", "origin"); got != o.bare {
		t.Fatalf("the worktree's origin %q, want the remote %q", got, o.bare)
	}
	if got := o.git(ws.Dir, "rev-parse", "--is-bare-repository", "HEAD") + " " + o.git(ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"); got != "false\n"+o.base+" shard/job-1-run-1" {
		t.Fatalf("the worktree's repository: %q", got)
	}
	main, _, _ := strings.Cut(o.git(ws.Dir, "worktree", "list", "--porcelain"), "\n")
	if !strings.HasSuffix(main, "worktrees/run-1") {
		t.Fatalf("the worktree is not its repository's main checkout: %q", main)
	}
	// It borrows the cache's objects: the cache never gcs them away.
	if got := o.git(ws.Cache, "config", "gc.auto") + " " + o.git(ws.Cache, "config", "receive.autogc"); got != "0 false" {
		t.Fatalf("the cache's gc settings: %q", got)
	}
}

// TestGitRetireLinked: a worktree an earlier build made (a linked worktree
// of the cache) is still retired, its work kept in the cache.
func TestGitRetireLinked(t *testing.T) {
	o := newOrigin(t)
	g := &runner.Git{Root: filepath.Join(t.TempDir(), "runs"), Node: "n1"}
	run := records.RunRecord{RunID: "run-1", JobID: "job-1", Name: "t", Git: o.branch("shard/job-1-run-1")}
	ws, err := g.Prepare(t.Context(), run) // makes the cache
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ws.Dir); err != nil {
		t.Fatal(err)
	}
	o.git(ws.Cache, "worktree", "add", "--quiet", "-B", run.Git.Branch, ws.Dir, o.base)
	if err := os.WriteFile(filepath.Join(ws.Dir, "half.txt"), []byte("half done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if gone, err := g.Retire(t.Context(), run); err != nil || !gone {
		t.Fatalf("retire: %v %v", gone, err)
	}
	if _, err := os.Stat(ws.Dir); !os.IsNotExist(err) {
		t.Fatalf("the worktree is still there: %v", err)
	}
	if got := o.git(ws.Cache, "show", "refs/heads/shard/job-1-run-1:half.txt"); got != "half done" {
		t.Fatalf("the child's work in the cache: %q", got)
	}
}
