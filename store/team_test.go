package store

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func mustGoal(t *testing.T, s *Store) Goal {
	t.Helper()
	limit := 2.5
	g, err := s.CreateGoal(Goal{Text: "add a --version flag", Status: GoalPlanning, LeadAgentID: "agent-lead", Cwd: "/repo", CostLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func taskIDs(ts []Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.TaskID)
	}
	return out
}

// A goal, its tasks, a decision, memory and feed come back as written, and
// survive a close and a reopen of the file.
func TestTeamRecordsRoundTripAndSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGoal(t, s)
	if !strings.HasPrefix(g.GoalID, "goal-") || g.Revision != 1 || g.CreatedAt == 0 {
		t.Fatalf("created goal %+v", g)
	}
	tasks, err := s.CreateTasks([]Task{
		{GoalID: g.GoalID, Title: "flag", State: TaskTodo, Prompt: "sim: edit main.go", Priority: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	tk := tasks[0]
	if _, err := s.UpdateTask(tk.TaskID, func(x *Task) error {
		x.State, x.Assignee, x.JobID, x.RunID = TaskReview, "agent-w", "job-1", "run-1"
		x.WorkspaceID, x.Branch, x.Worktree = "workspace-1", "shard/flag", "/wt/flag"
		x.Diff = &DiffStats{Files: 1, Additions: 3, Deletions: 1, Ahead: 1}
		x.CI = &CIResult{Status: CIPass, Summary: "ok"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d, err := s.CreateDecision(Decision{GoalID: g.GoalID, TaskID: tk.TaskID, Kind: DecisionMerge, Prompt: "merge flag?", Options: []string{"Merge", "Request changes", "Reject"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.PutMemory(MemoryEntry{Scope: MemoryScopeShared, Key: "conventions", Body: "# use cobra"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.AppendFeed(FeedItem{GoalID: g.GoalID, Kind: FeedPlan, Text: "planned 1 task", AgentID: "agent-lead"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	if got, err := s.GetGoal(g.GoalID); err != nil || got.Text != g.Text || got.CostLimit == nil || *got.CostLimit != 2.5 {
		t.Fatalf("GetGoal = %+v, %v", got, err)
	}
	got, err := s.GetTask(tk.TaskID)
	if err != nil || got.State != TaskReview || got.Prompt != "sim: edit main.go" || got.Diff.Additions != 3 || got.CI.Status != CIPass || got.Revision != 2 {
		t.Fatalf("GetTask = %+v, %v", got, err)
	}
	if got.Public().Prompt != "" {
		t.Fatal("Public keeps the private prompt")
	}
	if got, err := s.GetDecision(d.DecisionID); err != nil || got.State != DecisionOpen || len(got.Options) != 3 {
		t.Fatalf("GetDecision = %+v, %v", got, err)
	}
	if got, err := s.GetMemory(m.MemoryID); err != nil || got.Body != "# use cobra" {
		t.Fatalf("GetMemory = %+v, %v", got, err)
	}
	if items, next, err := s.Feed(g.GoalID, "", 10); err != nil || len(items) != 1 || items[0] != f || next != "" {
		t.Fatalf("Feed = %+v, %q, %v", items, next, err)
	}
	if open, err := s.OpenDecisions(); err != nil || len(open) != 1 || open[0].DecisionID != d.DecisionID {
		t.Fatalf("OpenDecisions = %+v, %v", open, err)
	}
}

// Unknown enum values, foreign ids and missing goals are refused at write.
func TestTeamValidation(t *testing.T) {
	s := openTest(t)
	g := mustGoal(t, s)
	for name, err := range map[string]error{
		"goal status": func() error { _, err := s.CreateGoal(Goal{Text: "x", Status: "weird"}); return err }(),
		"goal id":     func() error { _, err := s.CreateGoal(Goal{GoalID: "job-1", Text: "x", Status: GoalActive}); return err }(),
		"task state":  func() error { _, err := s.CreateTask(Task{GoalID: g.GoalID, Title: "x", State: "later"}); return err }(),
		"ci status": func() error {
			_, err := s.CreateTask(Task{GoalID: g.GoalID, Title: "x", State: TaskTodo, CI: &CIResult{Status: "green"}})
			return err
		}(),
		"decision kind": func() error { _, err := s.CreateDecision(Decision{GoalID: g.GoalID, Kind: "vote"}); return err }(),
		"dup option": func() error {
			_, err := s.CreateDecision(Decision{GoalID: g.GoalID, Kind: DecisionQuestion, Options: []string{"a", "a"}})
			return err
		}(),
		"feed kind":    func() error { _, err := s.AppendFeed(FeedItem{GoalID: g.GoalID, Kind: "gossip"}); return err }(),
		"memory scope": func() error { _, err := s.PutMemory(MemoryEntry{Key: "k"}); return err }(),
		"missing dep": func() error {
			_, err := s.CreateTask(Task{GoalID: g.GoalID, Title: "x", State: TaskTodo, Deps: []string{"task-nope"}})
			return err
		}(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.CreateTask(Task{GoalID: "goal-missing", Title: "x", State: TaskTodo}); !errors.Is(err, ErrNotFound) {
		t.Errorf("task of a missing goal: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateGoal(g.GoalID, func(x *Goal) error { x.Status = "paused"; return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("update to an unknown status: %v", err)
	}
	if tasks, err := s.ListTasks(g.GoalID); err != nil || len(tasks) != 0 {
		t.Fatalf("refused tasks were stored: %v, %v", tasks, err)
	}
}

// A dependency on another goal's task is refused, and so is a cycle, with
// the cycle named; nothing of a refused batch is stored.
func TestTaskDependencyCycleRefused(t *testing.T) {
	s := openTest(t)
	g, other := mustGoal(t, s), mustGoal(t, s)
	ts, err := s.CreateTasks([]Task{
		{TaskID: "task-a", GoalID: g.GoalID, Title: "a", State: TaskTodo},
		{TaskID: "task-b", GoalID: g.GoalID, Title: "b", State: TaskTodo, Deps: []string{"task-a"}},
		{TaskID: "task-c", GoalID: g.GoalID, Title: "c", State: TaskTodo, Deps: []string{"task-b"}},
	})
	if err != nil || len(ts) != 3 {
		t.Fatal(ts, err)
	}
	_, err = s.UpdateTask("task-a", func(x *Task) error { x.Deps = []string{"task-c"}; return nil })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "task-a → task-c → task-b → task-a") {
		t.Fatalf("cycle: err = %v", err)
	}
	if a, _ := s.GetTask("task-a"); len(a.Deps) != 0 || a.Revision != 1 {
		t.Fatalf("refused update was stored: %+v", a)
	}
	if _, err := s.UpdateTask("task-a", func(x *Task) error { x.Deps = []string{"task-a"}; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("self cycle: %v", err)
	}
	_, err = s.CreateTasks([]Task{
		{TaskID: "task-x", GoalID: other.GoalID, Title: "x", State: TaskTodo},
		{TaskID: "task-y", GoalID: other.GoalID, Title: "y", State: TaskTodo, Deps: []string{"task-a"}},
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("cross-goal dependency: %v", err)
	}
	if _, err := s.GetTask("task-x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("half a refused batch was stored: %v", err)
	}
}

// The diamond: two parallel tasks, one depending on both. ReadyTasks
// follows the board as tasks finish.
func TestReadyTasksDiamond(t *testing.T) {
	s := openTest(t)
	g := mustGoal(t, s)
	_, err := s.CreateTasks([]Task{
		{TaskID: "task-1", GoalID: g.GoalID, Title: "left", State: TaskTodo},
		{TaskID: "task-2", GoalID: g.GoalID, Title: "right", State: TaskTodo, Priority: 5},
		{TaskID: "task-3", GoalID: g.GoalID, Title: "join", State: TaskTodo, Deps: []string{"task-1", "task-2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ready := func(want ...string) {
		t.Helper()
		got, err := s.ReadyTasks(g.GoalID)
		if err != nil || !slices.Equal(taskIDs(got), want) {
			t.Fatalf("ReadyTasks = %v, %v; want %v", taskIDs(got), err, want)
		}
	}
	set := func(id string, st TaskState) {
		t.Helper()
		if _, err := s.UpdateTask(id, func(x *Task) error { x.State = st; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ready("task-2", "task-1") // priority first
	set("task-1", TaskDoing)
	ready("task-2")
	set("task-1", TaskDone)
	set("task-2", TaskReview)
	ready()
	set("task-2", TaskDone)
	ready("task-3")
	set("task-3", TaskDoing)
	ready()
}

// Indexes follow updates and deletes: the open-decisions index, memory by
// scope and key, and a deleted goal takes its tasks, decisions and feed.
func TestTeamIndexesFollowUpdatesAndDeletes(t *testing.T) {
	s := openTest(t)
	g, keep := mustGoal(t, s), mustGoal(t, s)
	if _, err := s.CreateTask(Task{TaskID: "task-g", GoalID: g.GoalID, Title: "g", State: TaskTodo}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTask(Task{TaskID: "task-k", GoalID: keep.GoalID, Title: "k", State: TaskTodo}); err != nil {
		t.Fatal(err)
	}
	d1, _ := s.CreateDecision(Decision{GoalID: g.GoalID, Kind: DecisionQuestion, Prompt: "which?", Options: []string{"a", "b"}})
	d2, _ := s.CreateDecision(Decision{GoalID: keep.GoalID, Kind: DecisionMerge, Prompt: "merge?", Options: []string{"Merge", "Reject"}})
	d3, _ := s.CreateDecision(Decision{GoalID: keep.GoalID, Kind: DecisionQuestion, Prompt: "why?"})
	openIDs := func() []string {
		open, err := s.OpenDecisions()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range open {
			out = append(out, d.DecisionID)
		}
		return out
	}
	if got := openIDs(); len(got) != 3 {
		t.Fatalf("open = %v", got)
	}
	idx := 1
	if d, err := s.AnswerDecision(d2.DecisionID, DecisionAnswer{Index: &idx, By: "web"}); err != nil || d.Answer.Option != "Reject" {
		t.Fatalf("answer by index: %+v, %v", d, err)
	}
	if _, err := s.AnswerDecision(d3.DecisionID, DecisionAnswer{Option: "nope"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown option: %v", err)
	}
	if _, err := s.AnswerDecision(d3.DecisionID, DecisionAnswer{Text: "because", By: "cli"}); err != nil {
		t.Fatal(err)
	}
	if got := openIDs(); !slices.Equal(got, []string{d1.DecisionID}) {
		t.Fatalf("open after answers = %v", got)
	}
	// A refused merge reopens the decision with its reason.
	if d, err := s.ReopenDecision(d2.DecisionID, "checkout is dirty"); err != nil || d.State != DecisionOpen || d.Answer != nil || d.RefusedReason != "checkout is dirty" {
		t.Fatalf("reopen: %+v, %v", d, err)
	}
	if got := openIDs(); len(got) != 2 {
		t.Fatalf("open after reopen = %v", got)
	}
	if _, err := s.UpdateDecision(d2.DecisionID, func(d *Decision) error { d.State = DecisionCancelled; return nil }); err != nil {
		t.Fatal(err)
	}

	// The open-goals index follows the status and the delete.
	openGoals := func() []string {
		t.Helper()
		gs, err := s.OpenGoals()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range gs {
			out = append(out, x.GoalID)
		}
		return out
	}
	if got := openGoals(); !slices.Equal(got, []string{g.GoalID, keep.GoalID}) {
		t.Fatalf("OpenGoals = %v", got)
	}
	if _, err := s.UpdateGoal(keep.GoalID, func(x *Goal) error { x.Status, x.EndedAt = GoalDone, 9; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := openGoals(); !slices.Equal(got, []string{g.GoalID}) {
		t.Fatalf("OpenGoals after done = %v", got)
	}
	if _, err := s.UpdateGoal(keep.GoalID, func(x *Goal) error { x.Status = GoalActive; return nil }); err != nil {
		t.Fatal(err)
	}

	// Memory: scope and key indexes follow a rename and a delete.
	m, _ := s.PutMemory(MemoryEntry{Scope: "agent-w", Key: "notes", Body: "one"})
	if again, err := s.PutMemory(MemoryEntry{Scope: "agent-w", Key: "notes", Body: "two"}); err != nil || again.MemoryID != m.MemoryID {
		t.Fatalf("put by key: %+v, %v", again, err)
	}
	other, _ := s.PutMemory(MemoryEntry{Scope: "agent-w", Key: "todo", Body: "x"})
	if _, err := s.UpdateMemory(other.MemoryID, func(x *MemoryEntry) error { x.Key = "notes"; return nil }); !errors.Is(err, ErrConflict) {
		t.Fatalf("key taken: %v", err)
	}
	if _, err := s.UpdateMemory(m.MemoryID, func(x *MemoryEntry) error { x.Key = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	if fresh, err := s.PutMemory(MemoryEntry{Scope: "agent-w", Key: "notes", Body: "new"}); err != nil || fresh.MemoryID == m.MemoryID {
		t.Fatalf("freed key: %+v, %v", fresh, err)
	}
	if list, _ := s.ListMemory("agent-w"); len(list) != 3 {
		t.Fatalf("ListMemory = %+v", list)
	}
	if list, _ := s.ListMemory(MemoryScopeShared); len(list) != 0 {
		t.Fatalf("shared memory = %+v", list)
	}
	if err := s.DeleteMemory(other.MemoryID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMemory(other.MemoryID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted memory: %v", err)
	}
	if _, err := s.PutMemory(MemoryEntry{Scope: "agent-w", Key: "todo"}); err != nil {
		t.Fatalf("key of a deleted entry: %v", err)
	}

	// Feed pages, newest first.
	var appended []string
	for range 5 {
		f, err := s.AppendFeed(FeedItem{GoalID: keep.GoalID, Kind: FeedTask, Text: "step"})
		if err != nil {
			t.Fatal(err)
		}
		appended = append(appended, f.FeedID)
	}
	if _, err := s.AppendFeed(FeedItem{GoalID: g.GoalID, Kind: FeedGoal, Text: "other goal"}); err != nil {
		t.Fatal(err)
	}
	var paged []string
	for cursor := ""; ; {
		items, next, err := s.Feed(keep.GoalID, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range items {
			paged = append(paged, f.FeedID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Reverse(appended)
	if !slices.Equal(paged, appended) {
		t.Fatalf("feed pages = %v, want %v", paged, appended)
	}

	// The team's latest, across goals and the team-wide feed, pages too.
	team, err := s.AppendFeed(FeedItem{Kind: FeedUser, Text: "hello team"})
	if err != nil {
		t.Fatal(err)
	}
	recent := func() []string {
		t.Helper()
		var out []string
		for cursor := ""; ; {
			items, next, err := s.RecentFeed(cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range items {
				out = append(out, f.FeedID)
			}
			if next == "" {
				return out
			}
			cursor = next
		}
	}
	if got := recent(); len(got) != 7 || got[0] != team.FeedID || !slices.Equal(got[2:], appended) {
		t.Fatalf("RecentFeed = %v; want %s, the other goal's item, then %v", got, team.FeedID, appended)
	}
	if items, _, _ := s.Feed("", "", 10); len(items) != 1 || items[0].Text != "hello team" {
		t.Fatalf("team-wide feed = %v", items)
	}

	// Deleting a goal removes its tasks, decisions and feed, not another's.
	if err := s.DeleteGoal(g.GoalID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetGoal(g.GoalID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted goal: %v", err)
	}
	if _, err := s.GetTask("task-g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("task of a deleted goal: %v", err)
	}
	if _, err := s.GetDecision(d1.DecisionID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decision of a deleted goal: %v", err)
	}
	if items, _, _ := s.Feed(g.GoalID, "", 10); len(items) != 0 {
		t.Fatalf("feed of a deleted goal: %v", items)
	}
	if got := openIDs(); len(got) != 0 {
		t.Fatalf("open after delete = %v", got)
	}
	if ts, _ := s.ListTasks(keep.GoalID); len(ts) != 1 {
		t.Fatalf("the other goal's tasks: %v", ts)
	}
	if ds, _ := s.ListDecisions(keep.GoalID); len(ds) != 2 {
		t.Fatalf("the other goal's decisions: %v", ds)
	}
	if items, _, _ := s.Feed(keep.GoalID, "", 10); len(items) != 5 {
		t.Fatalf("the other goal's feed: %v", items)
	}
	if got := openGoals(); !slices.Equal(got, []string{keep.GoalID}) {
		t.Fatalf("OpenGoals after delete = %v", got)
	}
	if got := recent(); len(got) != 6 || got[0] != team.FeedID || !slices.Equal(got[1:], appended) {
		t.Fatalf("RecentFeed after delete = %v", got)
	}
	if err := s.DeleteGoal(g.GoalID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// First answer wins: of many concurrent answers to one decision exactly
// one commits; every other is ErrConflict saying it was already answered.
func TestAnswerDecisionFirstWins(t *testing.T) {
	s := openTest(t)
	g := mustGoal(t, s)
	d, err := s.CreateDecision(Decision{GoalID: g.GoalID, Kind: DecisionMerge, Prompt: "merge?", Options: []string{"Merge", "Request changes", "Reject"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	won := make([]Decision, n)
	for i := range n {
		wg.Go(func() {
			won[i], errs[i] = s.AnswerDecision(d.DecisionID, DecisionAnswer{Option: d.Options[i%3], By: "client-" + string(rune('a'+i%26))})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("answers %d and %d both won", winner, i)
			}
			winner = i
		case !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already answered"):
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no answer won")
	}
	stored, err := s.GetDecision(d.DecisionID)
	if err != nil || stored.State != DecisionAnswered || *stored.Answer.Index != winner%3 || stored.Answer.By != won[winner].Answer.By {
		t.Fatalf("stored %+v (winner %d), %v", stored, winner, err)
	}
}

// A file from before the team buckets, opened read-only (nothing is
// created), reads as having no team records; opened for writing, it gets
// the buckets without a schema bump.
func TestTeamBucketsMissingReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{bucketGoals, bucketOpenGoals, bucketTasks, bucketTaskGoals, bucketDecisions, bucketGoalDecisions,
			bucketOpenDecisions, bucketMemory, bucketMemoryIDs, bucketMemoryKeys, bucketFeed, bucketFeedAll} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := ro.ListGoals(); err != nil || len(g) != 0 {
		t.Errorf("ListGoals = %v, %v", g, err)
	}
	if g, err := ro.OpenGoals(); err != nil || len(g) != 0 {
		t.Errorf("OpenGoals = %v, %v", g, err)
	}
	if ts, err := ro.ReadyTasks("goal-1"); err != nil || len(ts) != 0 {
		t.Errorf("ReadyTasks = %v, %v", ts, err)
	}
	if ds, err := ro.OpenDecisions(); err != nil || len(ds) != 0 {
		t.Errorf("OpenDecisions = %v, %v", ds, err)
	}
	if ds, err := ro.ListDecisions("goal-1"); err != nil || len(ds) != 0 {
		t.Errorf("ListDecisions = %v, %v", ds, err)
	}
	if ms, err := ro.ListMemory(MemoryScopeShared); err != nil || len(ms) != 0 {
		t.Errorf("ListMemory = %v, %v", ms, err)
	}
	if fs, _, err := ro.Feed("goal-1", "", 5); err != nil || len(fs) != 0 {
		t.Errorf("Feed = %v, %v", fs, err)
	}
	if fs, _, err := ro.RecentFeed("", 5); err != nil || len(fs) != 0 {
		t.Errorf("RecentFeed = %v, %v", fs, err)
	}
	for name, err := range map[string]error{
		"goal":     func() error { _, err := ro.GetGoal("goal-1"); return err }(),
		"task":     func() error { _, err := ro.GetTask("task-1"); return err }(),
		"decision": func() error { _, err := ro.GetDecision("decision-1"); return err }(),
		"memory":   func() error { _, err := ro.GetMemory("memory-1"); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Get %s = %v, want ErrNotFound", name, err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	rw := openAt(t, path)
	if v, err := rw.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Errorf("schema version = %d, %v; want %d (new buckets are no bump)", v, err, SchemaVersion)
	}
	g := mustGoal(t, rw)
	if _, err := rw.CreateDecision(Decision{GoalID: g.GoalID, TaskID: "task-elsewhere", Kind: DecisionMerge, Prompt: "merge?"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("decision about a task of no goal: %v, want ErrInvalid", err)
	}
}

// A goal created with a request id is created once: a repeat answers the
// first goal and writes nothing; deleting the goal frees the id.
func TestCreateGoalOnceByRequestID(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "shard.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, created, err := s.CreateGoalOnce(Goal{Text: "a", Status: GoalPlanning, RequestID: "req-1"})
	if err != nil || !created || first.RequestID != "req-1" {
		t.Fatalf("first = %+v, %v, %v", first, created, err)
	}
	again, created, err := s.CreateGoalOnce(Goal{Text: "b", Status: GoalPlanning, RequestID: "req-1"})
	if err != nil || created || again.GoalID != first.GoalID || again.Text != "a" {
		t.Fatalf("repeat = %+v, %v, %v; want the first goal", again, created, err)
	}
	if gs, _ := s.ListGoals(); len(gs) != 1 {
		t.Fatalf("goals = %+v, want one", gs)
	}
	other, created, err := s.CreateGoalOnce(Goal{Text: "c", Status: GoalPlanning})
	if err != nil || !created || other.GoalID == first.GoalID {
		t.Fatalf("without a request id = %+v, %v, %v", other, created, err)
	}
	if err := s.DeleteGoal(first.GoalID); err != nil {
		t.Fatal(err)
	}
	fresh, created, err := s.CreateGoalOnce(Goal{Text: "d", Status: GoalPlanning, RequestID: "req-1"})
	if err != nil || !created || fresh.GoalID == first.GoalID {
		t.Fatalf("after the delete = %+v, %v, %v", fresh, created, err)
	}
}

// AllMemory lists every scope's entries.
func TestAllMemory(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "shard.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range []MemoryEntry{{Scope: MemoryScopeShared, Key: "a", Body: "x"}, {Scope: "agent-1", Key: "b", Body: "y"}} {
		if _, err := s.PutMemory(m); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.AllMemory()
	if err != nil || len(all) != 2 {
		t.Fatalf("all memory = %+v, %v", all, err)
	}
}
