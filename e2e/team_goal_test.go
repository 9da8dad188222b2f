//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// board follows one goal's board from the team_* events of a connection,
// seeded from team.goal.show, so a test waits on what the daemon announced
// rather than on time.
type board struct {
	t      *testing.T
	c      *client.Conn
	goalID string

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	goal      protocol.TeamGoal
	tasks     map[string]protocol.TeamTask
	decisions map[string]protocol.TeamDecision
	feed      []protocol.TeamFeedItem
}

// followBoard dials d and follows goalID's board ("" until set with track).
func followBoard(t *testing.T, d *daemon) *board {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	b := &board{t: t, c: c, changed: make(chan struct{}),
		tasks: map[string]protocol.TeamTask{}, decisions: map[string]protocol.TeamDecision{}}
	go b.read()
	return b
}

func (b *board) read() {
	for e := range b.c.Events() {
		var upd func()
		switch e.Msg.Head().Type {
		case protocol.TypeTeamGoalChanged:
			var m protocol.TeamGoalChanged
			if json.Unmarshal(e.Raw, &m) == nil {
				upd = func() {
					if m.Goal.GoalID == b.goalID && m.Goal.UpdatedAt >= b.goal.UpdatedAt {
						b.goal = m.Goal
					}
				}
			}
		case protocol.TypeTeamTaskChanged:
			var m protocol.TeamTaskChanged
			if json.Unmarshal(e.Raw, &m) == nil {
				upd = func() {
					if old, ok := b.tasks[m.Task.TaskID]; !ok || m.Task.Revision >= old.Revision {
						b.tasks[m.Task.TaskID] = m.Task
					}
				}
			}
		case protocol.TypeTeamDecisionChanged:
			var m protocol.TeamDecisionChanged
			if json.Unmarshal(e.Raw, &m) == nil {
				upd = func() {
					if old, ok := b.decisions[m.Decision.DecisionID]; !ok || m.Decision.UpdatedAt >= old.UpdatedAt {
						b.decisions[m.Decision.DecisionID] = m.Decision
					}
				}
			}
		case protocol.TypeTeamFeedAdded:
			var m protocol.TeamFeedAdded
			if json.Unmarshal(e.Raw, &m) == nil {
				upd = func() { b.feed = append(b.feed, m.Item) }
			}
		}
		if upd != nil {
			b.mu.Lock()
			upd()
			close(b.changed)
			b.changed = make(chan struct{})
			b.mu.Unlock()
		}
	}
}

// track follows goalID from now on, reading its board as it is.
func (b *board) track(goalID string) {
	b.mu.Lock()
	b.goalID = goalID
	b.mu.Unlock()
	b.refresh()
}

// refresh reads the whole board (team.goal.show): what happened before
// this connection followed it.
func (b *board) refresh() {
	b.t.Helper()
	b.mu.Lock()
	id := b.goalID
	b.mu.Unlock()
	var show protocol.TeamGoalShowData
	call(b.t, b.c, &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: id}, &show)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.goal = show.Goal
	for _, tk := range show.Tasks {
		if old, ok := b.tasks[tk.TaskID]; !ok || tk.Revision >= old.Revision {
			b.tasks[tk.TaskID] = tk
		}
	}
	for _, d := range show.Decisions {
		if old, ok := b.decisions[d.DecisionID]; !ok || d.UpdatedAt >= old.UpdatedAt {
			b.decisions[d.DecisionID] = d
		}
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// view is a copy of the board for a predicate.
type view struct {
	goal      protocol.TeamGoal
	byTitle   map[string]protocol.TeamTask
	decisions []protocol.TeamDecision
}

// open returns the open decision of kind for the task titled title.
func (v view) open(kind, title string) (protocol.TeamDecision, bool) {
	tk := v.byTitle[title]
	for _, d := range v.decisions {
		if d.Kind == kind && d.State == protocol.DecisionOpen && d.TaskID == tk.TaskID && tk.TaskID != "" {
			return d, true
		}
	}
	return protocol.TeamDecision{}, false
}

func (b *board) snapshot() (view, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := view{goal: b.goal, byTitle: map[string]protocol.TeamTask{}}
	for _, tk := range b.tasks {
		if tk.GoalID == b.goalID {
			v.byTitle[tk.Title] = tk
		}
	}
	for _, d := range b.decisions {
		if d.GoalID == b.goalID {
			v.decisions = append(v.decisions, d)
		}
	}
	slices.SortFunc(v.decisions, func(a, b protocol.TeamDecision) int { return strings.Compare(a.DecisionID, b.DecisionID) })
	return v, b.changed
}

// await waits until pred holds of the board. Meanwhile it answers "Allow
// once" to every open permission decision allow accepts (the person
// letting workers write), from this board's connection.
func (b *board) await(what string, allow func(v view, d protocol.TeamDecision) bool, pred func(v view) bool) view {
	b.t.Helper()
	deadline := time.After(90 * time.Second)
	answered := map[string]bool{}
	for {
		v, changed := b.snapshot()
		if pred(v) {
			return v
		}
		for _, d := range v.decisions {
			if d.Kind == protocol.DecisionKindPermission && d.State == protocol.DecisionOpen && !answered[d.DecisionID] && allow != nil && allow(v, d) {
				answered[d.DecisionID] = true
				var out protocol.TeamDecisionData
				call(b.t, b.c, &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: d.DecisionID, Option: protocol.OptionAllowOnce}, &out)
			}
		}
		select {
		case <-changed:
		case <-deadline:
			b.t.Fatalf("waiting for %s; the board:\n%s", what, v.dump())
		}
	}
}

func (v view) dump() string {
	var s strings.Builder
	fmt.Fprintf(&s, "goal %s %s %.2f\n", v.goal.GoalID, v.goal.Status, v.goal.Progress)
	for title, tk := range v.byTitle {
		fmt.Fprintf(&s, "  task %s %s %s blocked=%q deps=%v\n", title, tk.TaskID, tk.State, tk.BlockedReason, tk.Deps)
	}
	for _, d := range v.decisions {
		fmt.Fprintf(&s, "  decision %s %s task=%s %s refused=%q\n", d.DecisionID, d.Kind, d.TaskID, d.State, d.RefusedReason)
	}
	return s.String()
}

// everyone allows every permission decision.
func everyone(view, protocol.TeamDecision) bool { return true }

// simWrite is a sim directive that writes path with content.
func simWrite(path, content string) string {
	args, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return "sim: tool write " + string(args)
}

// TestTeamGoalFromSubmissionToDone is the team's whole loop, as a person
// drives it, against the real shardd, its runtime and real git: one goal
// with three tasks (two parallel, one depending on both) planned by the
// sim lead; workers write files in their own worktrees and ask permission
// (decisions answered "Allow once"); one merge decision is answered
// "Request changes" and the worker revises on its branch; shardd is killed
// with SIGKILL while that revision waits on its permission, and comes back
// with the board intact (the interrupted task blocked, never replayed; the
// other task's merge decision still open); the merges are answered from two
// clients (the wire and shardctl); the main checkout ends with all three
// changes, every worktree is retired, and the goal is done.
func TestTeamGoalFromSubmissionToDone(t *testing.T) {
	repo := wsRepo(t)
	home := newHome(t)
	flags := []string{"--team.max-workers", "2", "--team.ci-command", "test -f README"}
	d := startDaemonAt(t, home, flags...)
	b := followBoard(t, d)

	goalText := "Three files, the third after the first two.\n\n" +
		"- alpha: " + simWrite("alpha.txt", "alpha\n") + "\n" +
		"- beta: " + simWrite("beta.txt", "beta\n") + "\n" +
		"- gamma: " + simWrite("gamma.txt", "gamma\n") + " (after 1, 2)\n" +
		"  " + simWrite("README", "hello, gamma\n") + "\n"
	var sub protocol.TeamGoalData
	call(t, b.c, &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: goalText, Cwd: repo}, &sub)
	b.track(sub.Goal.GoalID)

	// The sim lead plans three tasks, gamma after alpha and beta.
	v := b.await("the plan", nil, func(v view) bool { return len(v.byTitle) == 3 })
	alpha, beta, gamma := v.byTitle["alpha"], v.byTitle["beta"], v.byTitle["gamma"]
	if got := slices.Sorted(slices.Values(gamma.Deps)); !slices.Equal(got, slices.Sorted(slices.Values([]string{alpha.TaskID, beta.TaskID}))) {
		t.Fatalf("gamma's deps = %v, want alpha and beta (%s, %s)", gamma.Deps, alpha.TaskID, beta.TaskID)
	}

	// Both parallel tasks reach review, each with a merge decision; gamma
	// waits for them.
	v = b.await("alpha and beta in review", everyone, func(v view) bool {
		_, a := v.open(protocol.DecisionKindMerge, "alpha")
		_, b := v.open(protocol.DecisionKindMerge, "beta")
		return a && b
	})
	if g := v.byTitle["gamma"]; g.State != protocol.TaskTodo {
		t.Fatalf("gamma is %s while its dependencies are in review", g.State)
	}
	alpha = v.byTitle["alpha"]
	if alpha.Branch == "" || alpha.Worktree == "" || alpha.Worktree == v.byTitle["beta"].Worktree || alpha.CI.Status != protocol.CIPass {
		t.Fatalf("alpha's workspace: branch %q worktree %q (beta's %q), ci %+v", alpha.Branch, alpha.Worktree, v.byTitle["beta"].Worktree, alpha.CI)
	}
	if !exists(t, filepath.Join(alpha.Worktree, "alpha.txt")) || exists(t, filepath.Join(repo, "alpha.txt")) {
		t.Fatalf("alpha.txt should be in alpha's worktree only")
	}
	if alpha.Diff == nil || alpha.Diff.Files != 1 || alpha.Diff.Additions != 1 {
		t.Fatalf("alpha's diff stat = %+v, want one file, one line added", alpha.Diff)
	}

	// Request changes on alpha: the same worker revises on its branch. Its
	// revision asks permission; the daemon is killed while it waits.
	ma, _ := v.open(protocol.DecisionKindMerge, "alpha")
	var ans protocol.TeamDecisionData
	call(t, b.c, &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: ma.DecisionID,
		Option: protocol.OptionRequestChanges, Text: simWrite("alpha.txt", "alpha, revised\n")}, &ans)
	if ans.Decision.State != protocol.DecisionAnswered || ans.Decision.Answer == nil || ans.Decision.Answer.Option != protocol.OptionRequestChanges || ans.Decision.Answer.At == 0 {
		t.Fatalf("Request changes answered %+v", ans.Decision)
	}
	v = b.await("alpha's revision asking permission", nil, func(v view) bool {
		_, asks := v.open(protocol.DecisionKindPermission, "alpha")
		return v.byTitle["alpha"].State == protocol.TaskDoing && v.byTitle["alpha"].Assignee == alpha.Assignee && asks
	})
	d.kill()
	d.waitExit(t, 20*time.Second)

	d = startDaemonAt(t, home, flags...)
	b2 := followBoard(t, d)
	b2.track(sub.Goal.GoalID)
	v = b2.await("the board after the restart", nil, func(v view) bool {
		return v.byTitle["alpha"].State == protocol.TaskBlocked
	})
	if len(v.byTitle) != 3 || v.byTitle["beta"].State != protocol.TaskReview || v.byTitle["gamma"].State != protocol.TaskTodo {
		t.Fatalf("the board after SIGKILL:\n%s", v.dump())
	}
	if !strings.Contains(v.byTitle["alpha"].BlockedReason, "interrupted") {
		t.Fatalf("alpha blocked for %q, want an interruption", v.byTitle["alpha"].BlockedReason)
	}
	if _, ok := v.open(protocol.DecisionKindMerge, "beta"); !ok {
		t.Fatalf("beta's merge decision is not open after the restart:\n%s", v.dump())
	}
	if _, ok := v.open(protocol.DecisionKindPermission, "alpha"); ok {
		t.Fatalf("the permission decision of a runtime that died is still open:\n%s", v.dump())
	}
	if got := readFile(t, filepath.Join(alpha.Worktree, "alpha.txt")); got != "alpha\n" {
		t.Fatalf("alpha.txt after the kill = %q: the interrupted revision must not have written", got)
	}

	// Retry alpha: it runs again on its branch and reaches review.
	var act protocol.TeamTaskData
	call(t, b2.c, &protocol.TeamTaskAction{Header: protocol.Header{Type: protocol.TypeTeamTaskAction}, TaskID: alpha.TaskID, Action: protocol.TaskActionRetry}, &act)
	v = b2.await("alpha back in review", everyone, func(v view) bool {
		_, ok := v.open(protocol.DecisionKindMerge, "alpha")
		return ok
	})
	if again := v.byTitle["alpha"]; again.Revision <= alpha.Revision || again.CreatedAt != alpha.CreatedAt || again.CreatedAt == 0 {
		t.Fatalf("alpha's revision %d → %d, created_at %d → %d: a card changes revision, never creation time", alpha.Revision, again.Revision, alpha.CreatedAt, again.CreatedAt)
	}
	if v.byTitle["alpha"].Worktree != alpha.Worktree || v.byTitle["alpha"].Branch != alpha.Branch {
		t.Fatalf("the retry moved alpha to %s (%s), want its own worktree %s", v.byTitle["alpha"].Worktree, v.byTitle["alpha"].Branch, alpha.Worktree)
	}

	// Merges from two clients: alpha from shardctl, beta from the wire.
	ma, _ = v.open(protocol.DecisionKindMerge, "alpha")
	d.mustCtl("", "team", "answer", ma.DecisionID, protocol.OptionMerge)
	mb, _ := v.open(protocol.DecisionKindMerge, "beta")
	zero := 0
	call(t, b2.c, &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: mb.DecisionID, Index: &zero}, &ans)
	if ans.Decision.State != protocol.DecisionAnswered || ans.Decision.Answer.Option != protocol.OptionMerge {
		t.Fatalf("beta's merge answered %+v", ans.Decision)
	}

	// gamma starts once both are merged, branches from the merged main and
	// reaches review; merged from shardctl by number.
	v = b2.await("gamma in review", everyone, func(v view) bool {
		_, ok := v.open(protocol.DecisionKindMerge, "gamma")
		return ok
	})
	for _, f := range []string{"alpha.txt", "beta.txt"} {
		if !exists(t, filepath.Join(v.byTitle["gamma"].Worktree, f)) {
			t.Errorf("gamma's worktree lacks %s: it did not branch after the merges", f)
		}
	}
	if g := v.byTitle["gamma"].Diff; g == nil || g.Files != 2 || g.Additions != 2 || g.Deletions != 1 {
		t.Fatalf("gamma's diff stat = %+v, want 2 files, +2 -1", g)
	}
	mg, _ := v.open(protocol.DecisionKindMerge, "gamma")
	d.mustCtl("", "team", "answer", mg.DecisionID, "1")
	v = b2.await("the goal done", nil, func(v view) bool { return v.goal.Status == protocol.GoalDone })
	for title, tk := range v.byTitle {
		if tk.State != protocol.TaskDone {
			t.Errorf("task %s is %s", title, tk.State)
		}
	}
	if v.goal.Progress != 1 {
		t.Errorf("goal progress %v, want 1", v.goal.Progress)
	}

	// The main checkout holds all three changes, clean; every worktree is
	// retired and gone.
	for f, want := range map[string]string{"alpha.txt": "alpha\n", "beta.txt": "beta\n", "gamma.txt": "gamma\n", "README": "hello, gamma\n"} {
		if got := readFile(t, filepath.Join(repo, f)); got != want {
			t.Errorf("%s in the main checkout = %q, want %q", f, got, want)
		}
	}
	if st := wsGit(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the main checkout is not clean:\n%s", st)
	}
	if wts := wsGit(t, repo, "worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", wts)
	}
	var wl protocol.WorkspaceListData
	call(t, b2.c, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}, &wl)
	for _, ws := range wl.Workspaces {
		if ws.State != protocol.WorkspaceStateRetired {
			t.Errorf("workspace %s (%s) is %s", ws.WorkspaceID, ws.Branch, ws.State)
		}
	}
	out := d.mustCtl("", "team", "show", sub.Goal.GoalID)
	if !strings.Contains(out.stdout, "done") {
		t.Errorf("shardctl team show:\n%s", out.stdout)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
