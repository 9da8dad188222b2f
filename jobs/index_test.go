package jobs

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// indexFixture stores, in a real store: parent p has children agent-a
// (alias ada; an old completed run and a live one) and agent-b (alias
// grace; one failed run); parent q has agent-c (alias ada too). job-1 has
// ended; job-2 and job-3 are live, indexed as load indexes them.
func indexFixture(t *testing.T) (*index, *store.Store) {
	t.Helper()
	st := openTestStore(t)
	for _, p := range []string{"agent-p", "agent-q"} {
		putParent(t, st, p)
	}
	child := func(id, parent string) store.Agent {
		return store.Agent{AgentID: id, SessionID: "sess-" + id, Cwd: "/w", ParentAgentID: parent, Depth: 1}
	}
	jobs := []struct {
		job     store.Job
		agents  []store.Agent
		aliases map[string]string
	}{
		{store.Job{JobID: "job-1", ParentAgentID: "agent-p", RequestID: "req", EndedAt: 5, Runs: []store.Run{
			{RunID: "run-1a", AgentID: "agent-a", State: protocol.RunCompleted, Task: "secret"},
			{RunID: "run-1b", AgentID: "agent-b", State: protocol.RunFailed},
		}}, []store.Agent{child("agent-a", "agent-p"), child("agent-b", "agent-p")}, map[string]string{"ada": "agent-a", "grace": "agent-b"}},
		{store.Job{JobID: "job-2", ParentAgentID: "agent-p", Runs: []store.Run{
			{RunID: "run-2a", AgentID: "agent-a", State: protocol.RunActive},
		}}, nil, nil},
		{store.Job{JobID: "job-3", ParentAgentID: "agent-q", Runs: []store.Run{
			{RunID: "run-3c", AgentID: "agent-c", State: protocol.RunQueued},
		}}, []store.Agent{child("agent-c", "agent-q")}, map[string]string{"ada": "agent-c"}},
	}
	x := newIndex(st)
	for _, j := range jobs {
		if _, err := st.CreateJob(j.job, j.agents, j.aliases); err != nil {
			t.Fatal(err)
		}
		if j.job.EndedAt == 0 {
			x.addLive(&j.job)
		}
	}
	return x, st
}

func TestIndexResolveRuns(t *testing.T) {
	x, _ := indexFixture(t)
	for _, tt := range []struct {
		name    string
		parent  string
		handles []string
		want    []string
		code    protocol.ErrorCode
	}{
		{"job handle: every run", "agent-p", []string{"job-1"}, []string{"run-1a", "run-1b"}, ""},
		{"run handle", "agent-p", []string{"run-1b"}, []string{"run-1b"}, ""},
		{"agent handle: the live run", "agent-p", []string{"agent-a"}, []string{"run-2a"}, ""},
		{"alias handle: the live run", "agent-p", []string{"Ada"}, []string{"run-2a"}, ""},
		{"alias of another parent", "agent-q", []string{"ada"}, []string{"run-3c"}, ""},
		{"agent with only terminal runs: the latest", "agent-p", []string{"grace"}, []string{"run-1b"}, ""},
		{"duplicates once, in order", "agent-p", []string{"run-2a", "job-2", "job-1", "ada"}, []string{"run-2a", "run-1a", "run-1b"}, ""},
		{"another parent's job", "agent-q", []string{"job-1"}, nil, protocol.CodeNotFound},
		{"another parent's run", "agent-q", []string{"run-1a"}, nil, protocol.CodeNotFound},
		{"another parent's agent", "agent-q", []string{"agent-a"}, nil, protocol.CodeNotFound},
		{"unknown alias", "agent-p", []string{"linus"}, nil, protocol.CodeNotFound},
		{"unknown job id", "agent-p", []string{"job-9"}, nil, protocol.CodeNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := x.resolveRuns(tt.parent, tt.handles)
			if tt.code != "" {
				if protocol.CodeOf(err) != tt.code {
					t.Fatalf("resolveRuns = %v, %v; want %s", got, err, tt.code)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("resolveRuns = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestIndexLiveRecentAndStored(t *testing.T) {
	x, _ := indexFixture(t)
	if r := x.currentRun("agent-a"); r == nil || r.RunID != "run-2a" {
		t.Fatalf("currentRun(agent-a) = %+v, want run-2a (nonterminal)", r)
	}
	if j := x.byRequest("agent-p", "req"); j == nil || j.JobID != "job-1" {
		t.Fatalf("byRequest = %+v", j)
	}
	if j := x.byRequest("agent-q", "req"); j != nil {
		t.Fatalf("byRequest of another parent = %+v", j)
	}
	// Only live jobs are held: job-1 was read from the store, into the LRU.
	if len(x.live) != 2 || x.live["job-1"] != nil || x.recent.get("job-1") == nil {
		t.Fatalf("live = %v, recent has job-1: %v; want job-2 and job-3 live, job-1 recent", x.live, x.recent.get("job-1") != nil)
	}
	// An update of a live job replaces its record and does not add its runs again.
	x.put(&store.Job{JobID: "job-2", ParentAgentID: "agent-p", Runs: []store.Run{
		{RunID: "run-2a", AgentID: "agent-a", State: protocol.RunCompleted},
	}})
	if got := x.liveAgent["agent-a"]; !reflect.DeepEqual(got, []string{"run-2a"}) {
		t.Fatalf("live runs of agent-a after an update = %v", got)
	}
	if r := x.liveRun("agent-a"); r != nil {
		t.Fatalf("liveRun after completion = %+v, want none", r)
	}
	// It ends: out of the live set, still found (LRU), as updated.
	x.retire("job-2")
	if x.live["job-2"] != nil || x.liveRuns["run-2a"] != "" || len(x.liveAgent["agent-a"]) != 0 {
		t.Fatal("a retired job is still live")
	}
	if r := x.currentRun("agent-a"); r == nil || r.RunID != "run-2a" || r.State != protocol.RunCompleted {
		t.Fatalf("currentRun after completion = %+v, want the latest run-2a, completed", r)
	}
	// Evicted from the LRU, it is read again from the store.
	x.recent.remove("job-2")
	if r := x.currentRun("agent-a"); r == nil || r.RunID != "run-2a" {
		t.Fatalf("currentRun from the store = %+v, want run-2a", r)
	}
	// A live job not stored yet (a relaunch committing) is its agent's
	// current run; the index keeps its own copy.
	j := store.Job{JobID: "job-4", ParentAgentID: "agent-p", Runs: []store.Run{{RunID: "run-4b", AgentID: "agent-b", State: protocol.RunQueued}}}
	x.addLive(&j)
	j.ParentAgentID = "changed"
	if x.job("job-4").ParentAgentID != "agent-p" {
		t.Fatal("the index shares the caller's record")
	}
	if r := x.currentRun("agent-b"); r == nil || r.RunID != "run-4b" {
		t.Fatalf("currentRun(agent-b) = %+v, want run-4b", r)
	}
	if got := x.parentJobs("agent-p", 50); len(got) != 3 || got[0].JobID != "job-4" || got[2].JobID != "job-1" {
		t.Fatalf("parentJobs = %v; want job-4 (live), job-2, job-1", got)
	}
	// forget (a failed commit) undoes addLive entirely.
	x.forget("job-4")
	if x.job("job-4") != nil || x.jobOf("run-4b") != "" {
		t.Fatal("forgotten job still indexed")
	}
	if r := x.currentRun("agent-b"); r == nil || r.RunID != "run-1b" {
		t.Fatalf("currentRun(agent-b) after forget = %+v, want run-1b", r)
	}
	if b := x.aliasBindings("ADA"); len(b) != 2 {
		t.Fatalf("aliasBindings(ADA) = %v; want agent-p's and agent-q's", b)
	}
}

// The LRU of finished jobs is bounded: reading more jobs than it holds
// keeps the most recent, and the others are read again on demand.
func TestIndexRecentIsBounded(t *testing.T) {
	x := newIndex(openTestStore(t))
	for i := range recentJobs + 10 {
		x.put(&store.Job{JobID: fmt.Sprintf("job-%05d", i)})
	}
	if n := x.recent.len(); n != recentJobs {
		t.Fatalf("LRU holds %d jobs, want %d", n, recentJobs)
	}
	if x.recent.get("job-00000") != nil || x.recent.get(fmt.Sprintf("job-%05d", recentJobs+9)) == nil {
		t.Fatal("the LRU evicted the wrong end")
	}
}

// TestIndexKeepsNoTaskText: the index's copy of a job leaves the runs'
// task text out (only job actors read it, from their own record), whether
// given live or read from the store, and the record given keeps it.
func TestIndexKeepsNoTaskText(t *testing.T) {
	x, _ := indexFixture(t)
	if got := x.job("job-1"); got.Runs[0].Task != "" {
		t.Errorf("task of a job read from the store = %q, want none", got.Runs[0].Task)
	}
	j := store.Job{JobID: "job-9", ParentAgentID: "agent-p", Runs: []store.Run{
		{RunID: "run-9", AgentID: "agent-a", Task: "a long task", FinalText: "done"},
	}}
	x.addLive(&j)
	got := x.job("job-9")
	if got.Runs[0].Task != "" {
		t.Errorf("indexed task = %q, want none", got.Runs[0].Task)
	}
	if got.Runs[0].FinalText != "done" {
		t.Errorf("indexed final text = %q, want kept", got.Runs[0].FinalText)
	}
	if j.Runs[0].Task != "a long task" {
		t.Errorf("the record given to the index lost its task: %q", j.Runs[0].Task)
	}
}

// TestIndexResolvesAChildOfAnotherNode: a child whose run was an anywhere
// run has no manifest on its parent's node (it lives where its run was
// claimed); its agent id still resolves for its parent, through the
// parent's job, and stays NOT_FOUND for any other parent.
func TestIndexResolvesAChildOfAnotherNode(t *testing.T) {
	x, st := indexFixture(t)
	j := store.Job{JobID: "job-4", ParentAgentID: "agent-p", EndedAt: 7, Runs: []store.Run{
		{RunID: "run-4r", AgentID: "agent-r", State: protocol.RunCompleted, Anywhere: true, Node: "n2"},
	}}
	if _, err := st.CreateJob(j, nil, map[string]string{"rosa": "agent-r"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"agent-r", "Rosa", "run-4r"} {
		if got, err := x.resolveAgent("agent-p", h); err != nil || got != "agent-r" {
			t.Fatalf("resolveAgent(agent-p, %s) = %q, %v; want agent-r", h, got, err)
		}
		if got, err := x.resolveAgent("agent-q", h); protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("resolveAgent(agent-q, %s) = %q, %v; want NOT_FOUND", h, got, err)
		}
	}
	if r := x.currentRun("agent-r"); r == nil || r.RunID != "run-4r" || !r.Anywhere {
		t.Fatalf("currentRun(agent-r) = %+v", r)
	}
}
