package team_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/team"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, actortest.LeakOptions()...) }

// fakeLink stands in for the daemon: subagent.create starts a run whose
// subagent.wait answers once the test ends it; it records how many runs
// were live at once.
type fakeLink struct {
	mu       sync.Mutex
	next     int
	live     int
	maxLive  int
	created  []string // task texts, in start order
	ends     map[string]chan protocol.RunState
	started  chan string // run ids, as created
	failText string      // a task text whose create fails
}

func newFakeLink() *fakeLink {
	return &fakeLink{ends: map[string]chan protocol.RunState{}, started: make(chan string, 16)}
}

func (f *fakeLink) Call(ctx context.Context, cmd protocol.Typed, data any) error {
	switch m := cmd.(type) {
	case *protocol.AgentStatusCmd:
		return encode(data, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: m.AgentID}}})
	case *protocol.SubagentCreate:
		f.mu.Lock()
		if m.Task == f.failText {
			f.mu.Unlock()
			return protocol.Errorf(protocol.CodeConflict, "no worker for you")
		}
		f.next++
		run := fmt.Sprintf("run-%d", f.next)
		f.created = append(f.created, m.Task)
		f.ends[run] = make(chan protocol.RunState, 1)
		f.live++
		f.maxLive = max(f.maxLive, f.live)
		f.mu.Unlock()
		f.started <- run
		return encode(data, protocol.SubagentCreateData{JobID: "job-" + run, Runs: []protocol.CreatedRun{{RunID: run, AgentID: "agent-" + run}}})
	case *protocol.SubagentWait:
		f.mu.Lock()
		end := f.ends[m.Handles[0]]
		f.mu.Unlock()
		select {
		case st := <-end:
			f.mu.Lock()
			f.live--
			f.mu.Unlock()
			return encode(data, protocol.SubagentWaitData{Runs: []protocol.RunSnapshot{{RunID: m.Handles[0], State: st, Error: "boom"}}})
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeLink) Prompt(context.Context, string, string, string) error { return nil }

// text is the task text run was created with.
func (f *fakeLink) text(run string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int
	fmt.Sscanf(run, "run-%d", &n)
	return f.created[n-1]
}

func (f *fakeLink) end(run string, st protocol.RunState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends[run] <- st
}

func encode(data, v any) error {
	if data == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, data)
}

// events reads the coordinator's broadcasts.
type events struct{ o *outbox.Outbox }

// harness runs a coordinator on a real store with the fake link.
func harness(t *testing.T, maxWorkers int) (*store.Store, *fakeLink, *actor.ActorSystem, *actor.PID, *events) {
	t.Helper()
	hub := outbox.NewHub()
	ev := &events{o: outbox.New(outbox.Limits{})}
	hub.Add(ev.o)
	st, err := store.Open(filepath.Join(t.TempDir(), "shard.db"), store.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	link := newFakeLink()
	group := &xsync.Group{}
	sys := actortest.NewSystem()
	pid, err := sys.Root.SpawnNamed(team.Props(team.Deps{Store: st, Group: group, Hub: hub, Link: link, MaxWorkers: maxWorkers}), "team")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		group.Close()
		_ = st.Close()
	})
	return st, link, sys, pid, ev
}

// waitDecision returns the open decision of task id, reading the
// broadcasts until it is announced.
func (ev *events) waitDecision(t *testing.T, st *store.Store, taskID string) store.Decision {
	t.Helper()
	find := func() (store.Decision, bool) {
		ds, err := st.OpenDecisions()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.TaskID == taskID {
				return d, true
			}
		}
		return store.Decision{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	for {
		if d, ok := find(); ok {
			return d
		}
		if _, ok := ev.o.Next(ctx); !ok {
			t.Fatalf("no decision of task %s announced", taskID)
		}
	}
}

// waitTask reads the broadcasts until task id is announced in state, and
// returns the task as stored. Every event read is checked for a prompt.
func (ev *events) waitTask(t *testing.T, st *store.Store, id string, state store.TaskState) store.Task {
	t.Helper()
	if task, err := st.GetTask(id); err == nil && task.State == state {
		return task // announced before: its event was read past
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	for {
		recs, ok := ev.o.Next(ctx)
		if !ok {
			t.Fatalf("task %s never announced %s", id, state)
		}
		for _, rec := range recs {
			if bytes.Contains(rec, []byte("prompt-zz")) {
				t.Fatalf("a task's prompt was broadcast: %s", rec)
			}
			var e protocol.TeamTaskChanged
			if json.Unmarshal(rec, &e) == nil && e.Type == protocol.TypeTeamTaskChanged && e.Task.TaskID == id && e.Task.State == string(state) {
				task, err := st.GetTask(id)
				if err != nil {
					t.Fatal(err)
				}
				return task
			}
		}
	}
}

// TestSchedulerKeepsToMaxWorkersAndPriority: of four ready tasks with two
// workers, the two of the highest priority start first, never more than
// two runs are live, each completed run puts its task in review with a
// merge decision, and a failed run blocks its task with the reason.
func TestSchedulerKeepsToMaxWorkersAndPriority(t *testing.T) {
	st, link, sys, pid, ev := harness(t, 2)
	g, err := st.CreateGoal(store.Goal{Text: "g", Status: store.GoalActive, LeadAgentID: "agent-lead", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := st.CreateTasks([]store.Task{
		{GoalID: g.GoalID, Title: "low", Prompt: "prompt-zz-low", State: store.TaskTodo},
		{GoalID: g.GoalID, Title: "high", Prompt: "prompt-zz-high", State: store.TaskTodo, Priority: 5},
		{GoalID: g.GoalID, Title: "mid", Prompt: "prompt-zz-mid", State: store.TaskTodo, Priority: 3},
		{GoalID: g.GoalID, Title: "low2", Prompt: "prompt-zz-low2", State: store.TaskTodo},
	})
	if err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(pid, &team.Ready{})
	first := []string{<-link.started, <-link.started}
	highRun, midRun := first[0], first[1]
	if link.text(highRun) != "prompt-zz-high" {
		highRun, midRun = midRun, highRun
	}
	if link.text(highRun) != "prompt-zz-high" || link.text(midRun) != "prompt-zz-mid" {
		t.Fatalf("first started = %s, %s; want the two highest priorities", link.text(first[0]), link.text(first[1]))
	}
	link.end(highRun, protocol.RunCompleted)
	third := <-link.started
	link.end(midRun, protocol.RunFailed)
	fourth := <-link.started
	link.end(third, protocol.RunCompleted)
	link.end(fourth, protocol.RunCompleted)

	high := ev.waitTask(t, st, ts[1].TaskID, store.TaskReview)
	mid := ev.waitTask(t, st, ts[2].TaskID, store.TaskBlocked)
	ev.waitTask(t, st, ts[0].TaskID, store.TaskReview)
	ev.waitTask(t, st, ts[3].TaskID, store.TaskReview)
	if high.JobID != "job-"+highRun || high.Assignee != "agent-"+highRun {
		t.Fatalf("high = %+v", high)
	}
	if mid.BlockedReason != "its worker's run failed: boom" {
		t.Fatalf("mid blocked = %q", mid.BlockedReason)
	}
	for _, id := range []string{ts[0].TaskID, ts[1].TaskID, ts[3].TaskID} {
		if d := ev.waitDecision(t, st, id); d.Kind != store.DecisionMerge || d.State != store.DecisionOpen || len(d.Options) != 3 {
			t.Fatalf("decision of %s = %+v", id, d)
		}
	}
	link.mu.Lock()
	defer link.mu.Unlock()
	if link.maxLive > 2 {
		t.Fatalf("%d runs were live at once, team.max_workers is 2", link.maxLive)
	}
}

// TestAStartThatFailsBlocksTheTask: a worker the daemon refuses to start
// leaves its task blocked with the refusal; the others still run.
func TestAStartThatFailsBlocksTheTask(t *testing.T) {
	st, link, sys, pid, ev := harness(t, 3)
	link.failText = "prompt-zz-bad"
	g, err := st.CreateGoal(store.Goal{Text: "g", Status: store.GoalActive, LeadAgentID: "agent-lead", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := st.CreateTasks([]store.Task{
		{GoalID: g.GoalID, Title: "bad", Prompt: "prompt-zz-bad", State: store.TaskTodo, Priority: 1},
		{GoalID: g.GoalID, Title: "good", Prompt: "prompt-zz-good", State: store.TaskTodo},
	})
	if err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(pid, &team.Ready{})
	run := <-link.started
	bad := ev.waitTask(t, st, ts[0].TaskID, store.TaskBlocked)
	if bad.BlockedReason != "the worker could not start: no worker for you" {
		t.Fatalf("blocked reason = %q", bad.BlockedReason)
	}
	link.end(run, protocol.RunCompleted)
	ev.waitTask(t, st, ts[1].TaskID, store.TaskReview)
}
