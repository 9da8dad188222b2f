package jobs

import (
	"slices"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// historyless is a store whose whole-history walk fails the test: the
// lists that can only match live jobs must not visit the finished ones.
type historyless struct {
	*store.Store
	t *testing.T
}

func (h historyless) WalkJobs(string, func(*store.Job) bool) error {
	h.t.Error("WalkJobs: a live-only list walked the whole history")
	return nil
}

func TestLiveOnlyListsWalkOpenJobs(t *testing.T) {
	st := openStore(t)
	mk := func(id string, state protocol.RunState, ended int64) {
		t.Helper()
		j := store.Job{JobID: id, ParentAgentID: "agent-p", Strategy: protocol.StrategySingle, CreatedAt: 1, EndedAt: ended,
			Runs: []store.Run{{RunID: "run-" + id, AgentID: "agent-" + id, State: state, QueuedAt: 1}}}
		if _, err := st.CreateJob(j, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	mk("job-1", protocol.RunQueued, 0)
	mk("job-2", protocol.RunCompleted, 5)
	mk("job-3", protocol.RunActive, 0)
	mk("job-4", protocol.RunQueued, 0)
	now := time.UnixMilli(10)
	ids := func(js []protocol.OpJob) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.JobID)
		}
		return out
	}
	w := historyless{st, t}
	for _, tt := range []struct {
		state protocol.JobState
		want  []string
	}{
		{protocol.JobQueued, []string{"job-4", "job-1"}},
		{protocol.JobRunning, []string{"job-3"}},
	} {
		page, next, err := listJobs(w, &protocol.JobsList{State: tt.state}, nil, now)
		if err != nil || next != "" || !slices.Equal(ids(page), tt.want) {
			t.Errorf("state %s: %v, next %q, %v; want %v", tt.state, ids(page), next, err, tt.want)
		}
	}
	// Paged: the cursor carries on through the open jobs.
	page, next, err := listJobs(w, &protocol.JobsList{State: protocol.JobQueued, Limit: 1}, nil, now)
	if err != nil || !slices.Equal(ids(page), []string{"job-4"}) || next == "" {
		t.Fatalf("first page: %v, next %q, %v", ids(page), next, err)
	}
	cur, err := protocol.DecodeCursor(protocol.CursorJobs, next)
	if err != nil {
		t.Fatal(err)
	}
	page, next, err = listJobs(w, &protocol.JobsList{State: protocol.JobQueued, Limit: 1}, &cur, now)
	if err != nil || !slices.Equal(ids(page), []string{"job-1"}) || next != "" {
		t.Fatalf("second page: %v, next %q, %v", ids(page), next, err)
	}
	// Any other filter still sees the history.
	page, _, err = listJobs(st, &protocol.JobsList{State: protocol.JobCompleted}, nil, now)
	if err != nil || !slices.Equal(ids(page), []string{"job-2"}) {
		t.Errorf("completed: %v, %v; want [job-2]", ids(page), err)
	}
}
