//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// teamTimeout bounds a team's step: a worker's run, its review, a merge.
const teamTimeout = 60 * time.Second

// teamEvents records a connection's events from the moment it is dialled,
// so a test can wait for a team_* event it learns it needs later while the
// client's reader never stalls.
type teamEvents struct {
	c       *client.Conn
	mu      sync.Mutex
	evs     []protocol.Typed
	changed chan struct{}
	done    chan struct{}
}

// watchTeam dials d and records its events until the test ends.
func watchTeam(t *testing.T, d *daemon) *teamEvents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatalf("dial %s: %v", d.socket(), err)
	}
	w := &teamEvents{c: c, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ev := range c.Events() {
			w.mu.Lock()
			w.evs = append(w.evs, ev.Msg)
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-w.done
	})
	return w
}

// wait returns the first recorded event that match accepts, waiting for
// it as events come.
func (w *teamEvents) wait(t *testing.T, what string, match func(protocol.Typed) bool) protocol.Typed {
	t.Helper()
	timer := time.NewTimer(teamTimeout)
	defer timer.Stop()
	seen := 0
	for {
		w.mu.Lock()
		evs := w.evs[seen:]
		w.mu.Unlock()
		for _, m := range evs {
			if match(m) {
				return m
			}
		}
		seen += len(evs)
		select {
		case <-w.changed:
		case <-w.done:
			t.Fatalf("connection lost waiting for %s: %v", what, w.c.Err())
		case <-timer.C:
			t.Fatalf("no %s within %s; the team's events:\n%s", what, teamTimeout, w.dump())
		}
	}
}

// dump lists the team events recorded, one line each, for a failure.
func (w *teamEvents) dump() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, m := range w.evs {
		switch e := m.(type) {
		case *protocol.TeamGoalChanged:
			fmt.Fprintf(&b, "goal %s %s lead=%s\n", e.Goal.GoalID, e.Goal.Status, e.Goal.LeadAgentID)
		case *protocol.TeamTaskChanged:
			fmt.Fprintf(&b, "task %s %s %q %s\n", e.Task.TaskID, e.Task.State, e.Task.BlockedReason, e.Task.Branch)
		case *protocol.TeamDecisionChanged:
			fmt.Fprintf(&b, "decision %s %s %s %q\n", e.Decision.DecisionID, e.Decision.Kind, e.Decision.State, e.Decision.RefusedReason)
		case *protocol.TeamFeedAdded:
			fmt.Fprintf(&b, "feed %s %q\n", e.Item.Kind, e.Item.Text)
		}
	}
	return b.String()
}

// task waits for the task titled title of goal to be on the board.
func (w *teamEvents) task(t *testing.T, goal, title string) protocol.TeamTask {
	t.Helper()
	return w.wait(t, "task "+title, func(m protocol.Typed) bool {
		e, ok := m.(*protocol.TeamTaskChanged)
		return ok && e.Task.GoalID == goal && e.Task.Title == title
	}).(*protocol.TeamTaskChanged).Task
}

// openDecision waits for an open decision of kind of task, other than
// skip.
func (w *teamEvents) openDecision(t *testing.T, taskID, kind, skip string) protocol.TeamDecision {
	t.Helper()
	m := w.wait(t, "a "+kind+" decision of "+taskID, func(m protocol.Typed) bool {
		e, ok := m.(*protocol.TeamDecisionChanged)
		return ok && e.Decision.TaskID == taskID && e.Decision.Kind == kind &&
			e.Decision.State == protocol.DecisionOpen && e.Decision.DecisionID != skip
	})
	return m.(*protocol.TeamDecisionChanged).Decision
}

// TestShardctlTeamGoalToMerge drives a team through shardctl against the
// real daemon, its sim runtime and a real repository: a goal submitted in
// the repository gets a lead, which plans its task (the sim lead reads it
// out of the goal's text); the task runs in a worktree of its own; its worker's write
// is a permission decision answered with "team answer … 'Allow once'"; the
// task comes to review; "team show" prints the board and the merge
// decision; the decision asked without an option is printed with its
// options (exit 2); "Request changes" sends the feedback back to the same
// worker, which asks again (allowed by number) and comes back with a new
// merge decision; answered by its number, it merges into the main checkout
// and the task is done; a second answer is CONFLICT. "team watch" rang at
// each decision and "team feed --follow" followed every step.
func TestShardctlTeamGoalToMerge(t *testing.T) {
	t.Parallel()
	repo := wsRepo(t)
	d := startDaemon(t)
	w := watchTeam(t, d)

	// Outside a repository: the daemon's refusal, exit 1.
	r := d.ctlCode(1, "team", "submit", "--cwd", shortTemp(t), "nothing")
	if !strings.HasPrefix(r.stderr, "shardctl: INVALID_REQUEST: ") {
		t.Errorf("submit outside a repository: %q", r.stderr)
	}
	// The sim lead plans the goal's "- title: prompt" lines as tasks.
	r = d.mustCtl("", "team", "submit", "--cwd", repo, "Add a file called a.txt.\n\n"+
		`- add a.txt: sim: tool write {"path":"a.txt","content":"first\n"}`)
	goal := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(goal, "goal-") {
		t.Fatalf("submit printed %q", r.stdout)
	}
	watch := startProc(t, d.ctlCmd("team", "watch", goal))
	follow := startProc(t, d.ctlCmd("team", "feed", "--follow", "--goal", goal))
	task := w.task(t, goal, "add a.txt").TaskID

	// The worker's write asks: a permission decision, answered by label.
	perm := w.openDecision(t, task, protocol.DecisionKindPermission, "")
	r = d.mustCtl("", "team", "decisions", "--goal", goal)
	if !strings.Contains(r.stdout, "permission") || !strings.Contains(r.stdout, "1) Allow once, 2) Always allow for this agent, 3) Deny") {
		t.Errorf("team decisions:\n%s", r.stdout)
	}
	// The watch surfaced it (the bell, and how to answer) before it is answered.
	eventually(t, 10*time.Second, "the watch surfaced the permission decision", func() bool {
		out := watch.stdout.String()
		return strings.Contains(out, "\a") && strings.Contains(out, "1 decision waits on you: shardctl team answer "+perm.DecisionID)
	})
	r = d.mustCtl("", "team", "answer", perm.DecisionID, "Allow once")
	if !strings.Contains(r.stdout, perm.DecisionID+" answered: Allow once") {
		t.Errorf("allow printed %q", r.stdout)
	}
	first := w.openDecision(t, task, protocol.DecisionKindMerge, "")

	r = d.mustCtl("", "team", "show", goal)
	for _, want := range []string{"Goal:        " + goal, "REVIEW (1)", "add a.txt", "OPEN DECISIONS (1)",
		"merge of #1", `Merge "add a.txt"?`, "options: 1) Merge, 2) Request changes, 3) Reject"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("team show lacks %q:\n%s", want, r.stdout)
		}
	}
	// The change under review, as the board points to it.
	var board protocol.TeamGoalShowData
	decode(t, d.mustCtl("", "team", "show", goal, "-o", "json"), &board)
	ws := board.Tasks[0].WorkspaceID
	if !strings.Contains(r.stdout, "the change: shardctl ws diff "+ws) {
		t.Errorf("team show does not point to the change:\n%s", r.stdout)
	}
	if r := d.mustCtl("", "ws", "diff", ws); !strings.Contains(r.stdout, "+first") {
		t.Errorf("ws diff of the task's workspace:\n%s", r.stdout)
	}
	r = d.mustCtl("", "team", "decisions")
	if !strings.Contains(r.stdout, first.DecisionID[:len("decision-")+12]) || !strings.Contains(r.stdout, "1) Merge, 2) Request changes, 3) Reject") {
		t.Errorf("team decisions:\n%s", r.stdout)
	}
	r = d.ctlCode(2, "team", "answer", first.DecisionID)
	if !strings.Contains(r.stdout, "options: 1) Merge, 2) Request changes, 3) Reject") || !strings.Contains(r.stderr, "needs an option") {
		t.Errorf("answer without an option: stdout %q stderr %q", r.stdout, r.stderr)
	}

	// Request changes: the words go back to the same worker, on its branch.
	r = d.mustCtl("", "team", "answer", first.DecisionID, "request changes", "--text", `sim: tool write {"path":"a.txt","content":"second\n"}`)
	if !strings.Contains(r.stdout, first.DecisionID+" answered: Request changes") {
		t.Errorf("request changes printed %q", r.stdout)
	}
	// The worker writes again: asked again, allowed by number.
	perm2 := w.openDecision(t, task, protocol.DecisionKindPermission, perm.DecisionID)
	d.mustCtl("", "team", "answer", perm2.DecisionID, "1")
	second := w.openDecision(t, task, protocol.DecisionKindMerge, first.DecisionID)

	// Merge, by its number, with the decision's id shortened.
	r = d.mustCtl("", "team", "answer", second.DecisionID[:len("decision-")+20], "1")
	if !strings.Contains(r.stdout, second.DecisionID+" answered: Merge") {
		t.Errorf("merge printed %q", r.stdout)
	}
	w.wait(t, "the task done", func(m protocol.Typed) bool {
		e, ok := m.(*protocol.TeamTaskChanged)
		return ok && e.Task.TaskID == task && e.Task.State == protocol.TaskDone
	})
	if b, err := os.ReadFile(filepath.Join(repo, "a.txt")); err != nil || string(b) != "second\n" {
		t.Errorf("main checkout's a.txt = %q, %v", b, err)
	}
	r = d.ctlCode(1, "team", "answer", second.DecisionID, "Merge")
	if !strings.HasPrefix(r.stderr, "shardctl: CONFLICT: ") {
		t.Errorf("a second answer: %q", r.stderr)
	}

	r = d.mustCtl("", "team", "show", goal, "--all")
	for _, want := range []string{"Status:      done, 100% done (1/1 tasks)", "DONE (1)", "add a.txt", "DECISIONS (4)", "answered: Allow once",
		"answered: Request changes", "answered: Merge"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("team show --all lacks %q:\n%s", want, r.stdout)
		}
	}
	r = d.mustCtl("", "team", "goals")
	if !strings.Contains(r.stdout, "1/1") {
		t.Errorf("team goals:\n%s", r.stdout)
	}
	r = d.mustCtl("", "team", "feed", "--goal", goal)
	if !strings.Contains(r.stdout, "add a.txt: ready for review") {
		t.Errorf("team feed:\n%s", r.stdout)
	}

	// The live views saw it all: the watch drew the board done; the feed
	// followed every step.
	eventually(t, 10*time.Second, "the watch drew the task done", func() bool {
		return strings.Contains(watch.stdout.String(), "DONE (1)")
	})
	eventually(t, 10*time.Second, "the feed followed the merge", func() bool {
		return strings.Contains(follow.stdout.String(), "merge")
	})
	for name, p := range map[string]*proc{"watch": watch, "feed --follow": follow} {
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if st := p.waitExit(t, 10*time.Second); st.ExitCode() != 0 {
			t.Errorf("%s: %v; stderr %s", name, st, p.stderr.String())
		}
	}
	if out := follow.stdout.String(); strings.Count(out, "add a.txt: ready for review") != 2 || strings.Contains(out, "sim:") {
		t.Errorf("feed --follow:\n%s", out)
	}
}

// TestShardctlTeamSteering drives the rest of the team's verbs against the
// real daemon: memory notes written (one from stdin), listed and removed;
// a message to the lead lands in the feed; a task whose worker fails is
// blocked with the reason, prioritized and retried (back to the board);
// a task waiting on it is cancelled; the goal is cancelled, and what was
// cancelled stays on the board (--all).
func TestShardctlTeamSteering(t *testing.T) {
	t.Parallel()
	repo := wsRepo(t)
	d := startDaemon(t)
	w := watchTeam(t, d)
	// The plan from stdin: the second task waits on the first, which fails.
	goal := strings.TrimSpace(d.mustCtl("Steer me.\n- doomed: sim: fail the compiler exploded\n- after it: sim: say later (after 1)\n",
		"team", "submit", "--cwd", repo, "-f", "-").stdout)

	id := strings.TrimSpace(d.mustCtl("", "team", "memory", "put", "style", "--title", "Style", "--body", "Tabs, not spaces.").stdout)
	d.mustCtl("Use make.\nNever go build by hand.\n", "team", "memory", "put", "build", "-f", "-")
	r := d.mustCtl("", "team", "memory")
	for _, want := range []string{"style", "Tabs, not spaces.", "build", "Use make. …"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("team memory lacks %q:\n%s", want, r.stdout)
		}
	}
	var mem protocol.TeamMemoryListData
	decode(t, d.mustCtl("", "team", "memory", "--scope", "shared", "-o", "json"), &mem)
	if len(mem.Entries) != 2 {
		t.Errorf("memory = %+v", mem)
	}
	d.mustCtl("", "team", "memory", "rm", id)
	if r := d.mustCtl("", "team", "memory"); strings.Contains(r.stdout, "Tabs") {
		t.Errorf("removed note still listed:\n%s", r.stdout)
	}

	item := strings.TrimSpace(d.mustCtl("", "team", "message", "user", "a note for the person", "--goal", goal).stdout)
	if !strings.HasPrefix(item, "feed-") {
		t.Errorf("message printed %q", item)
	}

	doomed, after := w.task(t, goal, "doomed").TaskID, w.task(t, goal, "after it").TaskID
	blocked := func(m protocol.Typed) bool {
		e, ok := m.(*protocol.TeamTaskChanged)
		return ok && e.Task.TaskID == doomed && e.Task.State == protocol.TaskBlocked
	}
	w.wait(t, "the failing task blocked", blocked)
	r = d.mustCtl("", "team", "show", goal)
	if !strings.Contains(r.stdout, "BLOCKED (1)") || !strings.Contains(r.stdout, "compiler exploded") || !strings.Contains(r.stdout, "TODO (1)") {
		t.Errorf("team show:\n%s", r.stdout)
	}
	r = d.mustCtl("", "team", "task", doomed, "prioritize", "5")
	if !strings.Contains(r.stdout, "priority 5") {
		t.Errorf("prioritize printed %q", r.stdout)
	}
	r = d.mustCtl("", "team", "task", doomed, "retry")
	if !strings.HasPrefix(r.stdout, doomed+" todo") && !strings.HasPrefix(r.stdout, doomed+" doing") {
		t.Errorf("retry printed %q", r.stdout)
	}
	r = d.ctlCode(1, "team", "task", after, "retry")
	if !strings.HasPrefix(r.stderr, "shardctl: CONFLICT: ") {
		t.Errorf("retry of a todo task: %q", r.stderr)
	}
	r = d.mustCtl("", "team", "task", after, "cancel")
	if !strings.HasPrefix(r.stdout, after+" cancelled") {
		t.Errorf("cancel printed %q", r.stdout)
	}

	r = d.mustCtl("", "team", "cancel", goal)
	if r.stdout != goal+" cancelled\n" {
		t.Errorf("cancel printed %q", r.stdout)
	}
	r = d.ctlCode(1, "team", "cancel", goal)
	if !strings.HasPrefix(r.stderr, "shardctl: CONFLICT: ") {
		t.Errorf("a second cancel: %q", r.stderr)
	}
	r = d.mustCtl("", "team", "show", goal, "--all")
	if !strings.Contains(r.stdout, "Status:      cancelled") || !strings.Contains(r.stdout, "CANCELLED (") || !strings.Contains(r.stdout, "after it") {
		t.Errorf("team show --all:\n%s", r.stdout)
	}
	r = d.mustCtl("", "team", "feed", "--goal", goal, "-n", "200")
	if !strings.Contains(r.stdout, "user -> user a note for the person") && !strings.Contains(r.stdout, "a note for the person") {
		t.Errorf("team feed:\n%s", r.stdout)
	}
	if r := d.mustCtl("", "team", "goals", "--open"); strings.Contains(r.stdout, goal[:len("goal-")+12]) {
		t.Errorf("a cancelled goal listed open:\n%s", r.stdout)
	}
	d.ctlCode(1, "team", "show", "goal-nope")
}

// TestShardctlTeamWatchSurvivesSIGKILL: "team watch" follows the board
// across a daemon killed with SIGKILL mid-run: it reconnects to the
// restarted daemon and draws the board as it came back — the task whose
// run the crash interrupted blocked with the reason, never replayed — and
// "team task retry" puts it back on the board.
func TestShardctlTeamWatchSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	repo := wsRepo(t)
	home := newHome(t)
	d := startDaemonAt(t, home)
	w := watchTeam(t, d)
	goal := strings.TrimSpace(d.mustCtl("", "team", "submit", "--cwd", repo, "Be slow.\n- slow: sim: sleep 60000").stdout)
	task := w.task(t, goal, "slow").TaskID
	w.wait(t, "the task doing", func(m protocol.Typed) bool {
		e, ok := m.(*protocol.TeamTaskChanged)
		return ok && e.Task.TaskID == task && e.Task.State == protocol.TaskDoing
	})
	watch := startProc(t, d.ctlCmd("team", "watch", goal))
	eventually(t, 10*time.Second, "the watch drew the task doing", func() bool {
		return strings.Contains(watch.stdout.String(), "DOING (1)")
	})

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 10*time.Second)
	eventually(t, 10*time.Second, "the watch saw the connection lost", func() bool {
		return strings.Contains(watch.stderr.String(), "reconnecting")
	})
	d2 := startDaemonAt(t, home)
	eventually(t, 30*time.Second, "the watch drew the board after the restart", func() bool {
		return strings.Contains(watch.stderr.String(), "shardctl: reconnected") &&
			strings.Contains(watch.stdout.String(), "interrupted by a daemon restart")
	})
	r := d2.mustCtl("", "team", "show", goal)
	if !strings.Contains(r.stdout, "BLOCKED (1)") || !strings.Contains(r.stdout, "slow") {
		t.Errorf("team show after the restart:\n%s", r.stdout)
	}
	r = d2.mustCtl("", "team", "task", task, "retry")
	if !strings.HasPrefix(r.stdout, task+" todo") && !strings.HasPrefix(r.stdout, task+" doing") {
		t.Errorf("retry printed %q", r.stdout)
	}
	if err := watch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if st := watch.waitExit(t, 10*time.Second); st.ExitCode() != 0 {
		t.Errorf("watch: %v; stderr %s", st, watch.stderr.String())
	}
	d2.mustCtl("", "team", "cancel", goal)
}
