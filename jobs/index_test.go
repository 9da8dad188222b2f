package jobs

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// fakeDir is a directory over maps: manifests by id and a fakeBinder.
type fakeDir struct {
	fakeBinder
	agents map[string]store.Agent
}

func (d *fakeDir) GetAgent(id string) (store.Agent, error) {
	a, ok := d.agents[id]
	if !ok {
		return store.Agent{}, fmt.Errorf("%w: agent %q", store.ErrNotFound, id)
	}
	return a, nil
}

// indexFixture: parent p has children agent-a (alias ada; an old completed
// run and a live one) and agent-b (alias grace; one failed run); parent q
// has agent-c (alias ada too).
func indexFixture() (*index, *fakeDir) {
	d := &fakeDir{agents: map[string]store.Agent{
		"agent-p": {AgentID: "agent-p"}, "agent-q": {AgentID: "agent-q"},
		"agent-a": {AgentID: "agent-a", ParentAgentID: "agent-p"},
		"agent-b": {AgentID: "agent-b", ParentAgentID: "agent-p"},
		"agent-c": {AgentID: "agent-c", ParentAgentID: "agent-q"},
	}}
	d.bind("agent-p", "ada", "agent-a")
	d.bind("agent-p", "grace", "agent-b")
	d.bind("agent-q", "ada", "agent-c")
	x := newIndex(d)
	x.put(&store.Job{JobID: "job-1", ParentAgentID: "agent-p", RequestID: "req", Runs: []store.Run{
		{RunID: "run-1a", AgentID: "agent-a", State: protocol.RunCompleted},
		{RunID: "run-1b", AgentID: "agent-b", State: protocol.RunFailed},
	}})
	x.put(&store.Job{JobID: "job-2", ParentAgentID: "agent-p", Runs: []store.Run{
		{RunID: "run-2a", AgentID: "agent-a", State: protocol.RunActive},
	}})
	x.put(&store.Job{JobID: "job-3", ParentAgentID: "agent-q", Runs: []store.Run{
		{RunID: "run-3c", AgentID: "agent-c", State: protocol.RunQueued},
	}})
	return x, d
}

func TestIndexResolveRuns(t *testing.T) {
	x, _ := indexFixture()
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

func TestIndexPutForgetAndCurrentRun(t *testing.T) {
	x, _ := indexFixture()
	if r := x.currentRun("agent-a"); r == nil || r.RunID != "run-2a" {
		t.Fatalf("currentRun(agent-a) = %+v, want run-2a (nonterminal)", r)
	}
	if j := x.byRequest("agent-p", "req"); j == nil || j.JobID != "job-1" {
		t.Fatalf("byRequest = %+v", j)
	}
	if j := x.byRequest("agent-q", "req"); j != nil {
		t.Fatalf("byRequest of another parent = %+v", j)
	}
	// An update replaces the record and does not add its runs again.
	x.put(&store.Job{JobID: "job-2", ParentAgentID: "agent-p", Runs: []store.Run{
		{RunID: "run-2a", AgentID: "agent-a", State: protocol.RunCompleted},
	}})
	if got := x.agentRuns["agent-a"]; !reflect.DeepEqual(got, []string{"run-1a", "run-2a"}) {
		t.Fatalf("agentRuns after an update = %v", got)
	}
	if r := x.currentRun("agent-a"); r == nil || r.RunID != "run-2a" || r.State != protocol.RunCompleted {
		t.Fatalf("currentRun after completion = %+v, want the latest run-2a", r)
	}
	// The index keeps its own copy.
	j := store.Job{JobID: "job-4", ParentAgentID: "agent-p", Runs: []store.Run{{RunID: "run-4b", AgentID: "agent-b", State: protocol.RunQueued}}}
	x.put(&j)
	j.ParentAgentID = "changed"
	if x.job("job-4").ParentAgentID != "agent-p" {
		t.Fatal("the index shares the caller's record")
	}
	if r := x.currentRun("agent-b"); r == nil || r.RunID != "run-4b" {
		t.Fatalf("currentRun(agent-b) = %+v, want run-4b", r)
	}
	// forget (a failed commit) undoes put entirely.
	x.forget(x.job("job-4"))
	if x.job("job-4") != nil || x.jobOf("run-4b") != "" {
		t.Fatal("forgotten job still indexed")
	}
	if r := x.currentRun("agent-b"); r == nil || r.RunID != "run-1b" {
		t.Fatalf("currentRun(agent-b) after forget = %+v, want run-1b", r)
	}
	x.forget(x.job("job-1"))
	if x.byRequest("agent-p", "req") != nil {
		t.Fatal("forgotten job still answers its request id")
	}
	if got := x.newest(nil); len(got) != 2 || got[0].JobID != "job-3" || got[1].JobID != "job-2" {
		t.Fatalf("newest = %v", got)
	}
}

// TestIndexKeepsNoTaskText: the index's copy of a job leaves the runs'
// task text out (only job actors read it, from their own record), and the
// record it was given keeps it.
func TestIndexKeepsNoTaskText(t *testing.T) {
	x := newIndex(&fakeDir{})
	j := store.Job{JobID: "job-1", ParentAgentID: "agent-p", Runs: []store.Run{
		{RunID: "run-1", AgentID: "agent-a", Task: "a long task", FinalText: "done"},
	}}
	x.put(&j)
	got := x.job("job-1")
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
