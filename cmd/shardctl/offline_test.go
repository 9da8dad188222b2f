package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Task and final text the offline views must never show.
const (
	secretTask  = "SECRET TASK TEXT"
	secretFinal = "SECRET FINAL TEXT"
)

// offlineJobsFixture is what offlineHome writes: a chain of agent-p1
// halted by its second step, a run of agent-p2 stuck stopping (alias "ada"
// there too), and a relaunch of agent-p1's first child.
func offlineJobsFixture() []store.Job {
	t0 := ms(testNow.Add(-time.Hour))
	run := func(id, agent, alias string, i int, st protocol.RunState) store.Run {
		r := store.Run{RunID: id, Index: i, Name: "step" + id[len(id)-1:], AgentID: agent, Alias: alias, Task: secretTask,
			State: st, QueuedAt: t0, FinalText: secretFinal}
		if st != protocol.RunQueued {
			r.StartedAt, r.Deadline = t0+20, t0+60_000
		}
		if st.Terminal() {
			r.EndedAt = t0 + 900
			r.ExitStatus = "exit 0"
		}
		return r
	}
	chain := store.Job{JobID: "job-01a", ParentAgentID: "agent-p1", Strategy: protocol.StrategyChain, CreatedAt: t0, EndedAt: t0 + 900, HaltedBy: "run-r2",
		Runs: []store.Run{run("run-r1", "agent-c1", "Ada", 0, protocol.RunCompleted), run("run-r2", "agent-c2", "alan", 1, protocol.RunFailed), run("run-r3", "agent-c3", "barbara", 2, protocol.RunCancelled)}}
	chain.Runs[1].Error = "PROVIDER_ERROR: broke"
	chain.Runs[2].StartedAt, chain.Runs[2].Deadline, chain.Runs[2].ExitStatus = 0, 0, ""
	stuck := store.Job{JobID: "job-01b", ParentAgentID: "agent-p2", Strategy: protocol.StrategySingle, CreatedAt: t0 + 10,
		Runs: []store.Run{run("run-s1", "agent-s1", "ada", 0, protocol.RunActive)}}
	stuck.Runs[0].StopRequestedAt, stuck.Runs[0].StopStage = ms(testNow)-60_000, "term"
	relaunch := store.Job{JobID: "job-01c", ParentAgentID: "agent-p1", Strategy: protocol.StrategySingle, CreatedAt: t0 + 20, EndedAt: t0 + 950,
		Runs: []store.Run{run("run-r4", "agent-c1", "Ada", 0, protocol.RunCompleted)}}
	return []store.Job{chain, stuck, relaunch}
}

// offlineHome writes a Shard home with a database of offlineJobsFixture
// and its agents, and returns the home.
func offlineHome(t *testing.T) string {
	t.Helper()
	home := socketDir(t)
	st, err := store.Open(filepath.Join(home, dbName), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agent := func(id, parent, alias string) store.Agent {
		return store.Agent{AgentID: id, SessionID: "sess-" + id, Cwd: "/src", ParentAgentID: parent, Alias: alias, CreatedAt: ms(testNow.Add(-2 * time.Hour)), Model: "sim"}
	}
	for _, a := range []store.Agent{agent("agent-p1", "", ""), agent("agent-p2", "", "")} {
		if err := st.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}
	children := map[string][]store.Agent{
		"job-01a": {agent("agent-c1", "agent-p1", "Ada"), agent("agent-c2", "agent-p1", "alan"), agent("agent-c3", "agent-p1", "barbara")},
		"job-01b": {agent("agent-s1", "agent-p2", "ada")},
	}
	for _, j := range offlineJobsFixture() {
		aliases := map[string]string{}
		for _, r := range j.Runs {
			aliases[view.NormalizeAlias(r.Alias)] = r.AgentID
		}
		if _, err := st.CreateJob(j, children[j.JobID], aliases); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func TestOfflineJobsLs(t *testing.T) {
	home := offlineHome(t)
	r := runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "ls", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "SECRET") {
		t.Fatalf("task or final text leaked:\n%s", r.stdout)
	}
	var got protocol.JobsListData
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range got.Jobs {
		ids = append(ids, j.JobID)
	}
	if strings.Join(ids, " ") != "job-01c job-01b job-01a" {
		t.Fatalf("jobs = %v", ids)
	}
	// The daemon is down, so the run the records call active is not
	// running: it reads as the next start will record it, cancelled (a stop
	// was requested) and ended at its last sign of life, not stuck and not
	// ticking through the downtime.
	if r := got.Jobs[1].Runs[0]; r.Stuck || r.State != protocol.RunCancelled || r.EndedAt != ms(testNow)-60_000 ||
		got.Jobs[1].State != protocol.JobCancelled || got.Jobs[2].HaltedBy != "run-r2" || got.Jobs[2].State != protocol.JobFailed {
		t.Errorf("views: %+v", got.Jobs)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--stuck"}, ""},
		{[]string{"--parent", "agent-p1"}, "job-01c job-01a"},
		{[]string{"--state", "failed"}, "job-01a"},
		{[]string{"--limit", "1"}, "job-01c"},
		{[]string{"--since", "1h"}, "job-01c job-01b job-01a"},
		{[]string{"--since", "30m"}, ""},
	} {
		r := runCtl(t, nil, "", "", append([]string{"--home", home, "--offline", "jobs", "ls", "-o", "json"}, tt.args...)...)
		var got protocol.JobsListData
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("%v: exit %d stdout %q stderr %q", tt.args, r.code, r.stdout, r.stderr)
		}
		var ids []string
		for _, j := range got.Jobs {
			ids = append(ids, j.JobID)
		}
		if strings.Join(ids, " ") != tt.want {
			t.Errorf("%v: jobs %v, want %s", tt.args, ids, tt.want)
		}
	}

	r = runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "ls", "-o", "wide")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	golden(t, "offline_jobs_ls.golden", r.stdout)
}

func TestOfflineJobsShowHandles(t *testing.T) {
	home := offlineHome(t)
	for handle, want := range map[string]string{
		"job-01a": "job-01a", "run-r2": "job-01a", "alan": "job-01a", "BARBARA": "job-01a",
		"agent-c1": "job-01c", // its latest run
		"agent-s1": "job-01b", // its live run
	} {
		r := runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "show", handle, "-o", "json")
		var got protocol.OpJob
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("%s: exit %d stdout %q stderr %q", handle, r.code, r.stdout, r.stderr)
		}
		if got.JobID != want {
			t.Errorf("%s: job %s, want %s", handle, got.JobID, want)
		}
	}
	r := runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "show", "ADA")
	if r.code != exitFailed || !strings.Contains(r.stderr, `CONFLICT: alias "ADA" is used by 2 parents`) {
		t.Fatalf("ambiguous alias: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "show", "nobody")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Fatalf("unknown handle: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "show", "job-01a")
	if r.code != 0 || !strings.Contains(r.stdout, `Halted by:   step 2 "step2" (run-r2) failed: PROVIDER_ERROR: broke`) || strings.Contains(r.stdout, "SECRET") {
		t.Fatalf("exit %d stdout:\n%s", r.code, r.stdout)
	}
}

func TestOfflineAgentsLs(t *testing.T) {
	home := offlineHome(t)
	r := runCtl(t, nil, "", "", "--home", home, "--offline", "agents", "ls", "--parent", "agent-p1", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var got protocol.AgentListData
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Agents) != 3 {
		t.Fatalf("agents = %+v", got.Agents)
	}
	for _, a := range got.Agents {
		if a.ParentAgentID != "agent-p1" || a.RuntimeState != protocol.RuntimeStopped || a.Status != "" || a.Cwd != "/src" {
			t.Errorf("agent %+v", a)
		}
	}
}

func TestOfflineRefusesWhileTheDaemonRuns(t *testing.T) {
	home := offlineHome(t)
	// A daemon holds the file.
	st, err := store.Open(filepath.Join(home, dbName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := runCtl(t, nil, "", "", "--home", home, "--offline", "jobs", "ls")
	st.Close()
	if r.code != exitDaemonUp || !strings.Contains(r.stderr, "shardd is running (it holds ") || !strings.Contains(r.stderr, "drop --offline") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}

	// A daemon answers on the socket.
	d := newFakeDaemon(t, nil)
	r = runCtl(t, nil, "", "", "--socket", d.path, "--home", home, "--offline", "agents", "ls")
	if r.code != exitDaemonUp || !strings.Contains(r.stderr, "it answers on "+d.path) {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}

	// No database at all.
	r = runCtl(t, nil, "", "", "--home", socketDir(t), "--offline", "jobs", "ls")
	if r.code != exitFailed || !strings.Contains(r.stderr, "no database at") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}
