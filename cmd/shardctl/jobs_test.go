package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/shard-dev/shard/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

var (
	chainStart = testNow.Add(-10 * time.Minute)
	stuckStart = testNow.Add(-90 * time.Second)
	step1      = 1
)

// Sample jobs: a chain halted by its second step, a run stuck stopping,
// and a queued parallel job.
var (
	jobChain = protocol.OpJob{
		JobID: "job-chain", ParentAgentID: "agent-p1", Strategy: protocol.StrategyChain, State: protocol.JobFailed,
		CreatedAt: ms(chainStart), EndedAt: ms(chainStart) + 4200, ChainStep: &step1, HaltedBy: "run-c2",
		Runs: []protocol.OpRun{
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-chain", RunID: "run-c1", Index: 0, Name: "fetch", AgentID: "agent-c1", Alias: "ada",
				State: protocol.RunCompleted, StartedAt: ms(chainStart) + 15, EndedAt: ms(chainStart) + 1500, Usage: &protocol.RunUsage{Input: 10, Output: 5}},
				QueuedAt: ms(chainStart), QueueWaitMs: 15, ExitStatus: "exit 0"},
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-chain", RunID: "run-c2", Index: 1, Name: "build", AgentID: "agent-c2", Alias: "alan",
				State: protocol.RunFailed, Error: "PROVIDER_ERROR: compiler exploded", StartedAt: ms(chainStart) + 1510, EndedAt: ms(chainStart) + 4200},
				QueuedAt: ms(chainStart), QueueWaitMs: 1510},
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-chain", RunID: "run-c3", Index: 2, Name: "ship", AgentID: "agent-c3", Alias: "barbara",
				State: protocol.RunCancelled, Error: "chain halted by run-c2", EndedAt: ms(chainStart) + 4200},
				QueuedAt: ms(chainStart)},
		},
	}
	jobStuck = protocol.OpJob{
		JobID: "job-stuck", ParentAgentID: "agent-p2", Strategy: protocol.StrategySingle, State: protocol.JobRunning,
		CreatedAt: ms(stuckStart), StoppedAt: ms(testNow) - 45_000,
		Runs: []protocol.OpRun{
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-stuck", RunID: "run-s1", Index: 0, Name: "deploy", AgentID: "agent-s1", Alias: "ken",
				State: protocol.RunActive, StartedAt: ms(stuckStart) + 200},
				QueuedAt: ms(stuckStart), QueueWaitMs: 200, StopRequestedAt: ms(testNow) - 45_000, StopStage: "term", Stuck: true},
		},
	}
	jobQueued = protocol.OpJob{
		JobID: "job-queued", ParentAgentID: "agent-p1", Strategy: protocol.StrategyParallel, State: protocol.JobQueued,
		CreatedAt: ms(testNow) - 5000,
		Runs: []protocol.OpRun{
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-queued", RunID: "run-q1", Index: 0, Name: "lint", AgentID: "agent-q1", Alias: "grace", State: protocol.RunQueued}, QueuedAt: ms(testNow) - 5000},
			{RunSnapshot: protocol.RunSnapshot{JobID: "job-queued", RunID: "run-q2", Index: 1, Name: "test", AgentID: "agent-q2", Alias: "hedy", State: protocol.RunQueued}, QueuedAt: ms(testNow) - 5000},
		},
	}
	sampleOpJobs = []protocol.OpJob{jobQueued, jobStuck, jobChain}
)

// jobsDaemon serves the operator views of sampleOpJobs and the subagent
// commands shardctl sends on a parent's behalf. wait answers subagent.wait.
func jobsDaemon(t *testing.T, wait func(m protocol.SubagentWait) protocol.SubagentWaitData) *fakeDaemon {
	find := func(h string) (protocol.OpJob, bool) {
		for _, j := range sampleOpJobs {
			if j.JobID == h {
				return j, true
			}
			for _, r := range j.Runs {
				if r.RunID == h || r.AgentID == h || r.Alias == h {
					return j, true
				}
			}
		}
		return protocol.OpJob{}, false
	}
	jobsAgents := []protocol.AgentInfo{{AgentID: "agent-p1", Name: "boss"}, {AgentID: "agent-p2", Name: "twin"}, {AgentID: "agent-p3", Name: "twin"}}
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeJobsList:
			c.respond(h, protocol.JobsListData{Jobs: sampleOpJobs})
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: jobsAgents})
		case protocol.TypeAgentStatus:
			// The tables name their parents one agent.status each.
			for _, a := range jobsAgents {
				if a.AgentID == h.AgentID {
					c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{a}})
					return
				}
			}
			c.respondError(h, protocol.CodeNotFound, "no agent "+h.AgentID)
		case protocol.TypeJobsShow:
			var m protocol.JobsShow
			mustUnmarshal(t, rec, &m)
			if j, ok := find(m.Handle); ok {
				c.respond(h, j)
				return
			}
			c.respondError(h, protocol.CodeNotFound, "no job for \""+m.Handle+"\"")
		case protocol.TypeSubagentStop:
			var m protocol.SubagentStop
			mustUnmarshal(t, rec, &m)
			j, _ := find(m.Handle)
			var out protocol.SubagentStopData
			out.Cancelled = []protocol.CancelledRun{}
			for _, r := range j.Runs {
				if !r.State.Terminal() {
					out.Cancelled = append(out.Cancelled, protocol.CancelledRun{RunID: r.RunID, AgentID: r.AgentID, State: r.State})
				}
			}
			c.respond(h, out)
		case protocol.TypeSubagentRelaunch:
			var m protocol.SubagentRelaunch
			mustUnmarshal(t, rec, &m)
			if m.Target == "agent-s1" {
				c.respondError(h, protocol.CodeConflict, "agent agent-s1 already has run run-s1 (active)")
				return
			}
			c.respond(h, protocol.SubagentRelaunchData{JobID: "job-new", RunID: "run-new", AgentID: m.Target, Alias: "ada", State: protocol.RunQueued})
		case protocol.TypeSubagentSteer:
			var m protocol.SubagentSteer
			mustUnmarshal(t, rec, &m)
			switch m.Target {
			case "run-s1", "ken":
				c.respond(h, protocol.SubagentSteerData{Status: protocol.SteerInjected, RunID: "run-s1", TurnID: "turn-7", CorrelationID: "steer-1"})
			case "grace":
				c.respondError(h, protocol.CodeConflict, "run run-q1 is queued, not active")
			default:
				c.respond(h, protocol.SubagentSteerData{Status: protocol.SteerConflict, RunID: "run-c3", CorrelationID: "steer-2"})
			}
		case protocol.TypeSubagentWait:
			var m protocol.SubagentWait
			mustUnmarshal(t, rec, &m)
			c.respond(h, wait(m))
		default:
			c.respondError(h, protocol.CodeInvalidRequest, "unexpected "+h.Type)
		}
	})
}

func noWait(protocol.SubagentWait) protocol.SubagentWaitData { return protocol.SubagentWaitData{} }

func TestJobsLsTableGolden(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "ls", "-o", "wide")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	golden(t, "jobs_ls.golden", r.stdout)
	// The plain table shows ages instead.
	if r := runCtl(t, nil, d.path, "", "jobs", "ls"); !strings.Contains(r.stdout, "  5s ago  ") || !strings.Contains(r.stdout, "  10m ago  ") {
		t.Errorf("jobs ls ages:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colors on a non-terminal")
	}
}

func TestJobsLsSendsFilters(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "ls", "--parent", "agent-p1", "--state", "failed", "--since", "2h", "--stuck", "--limit", "7")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "ls", "--since", "3d")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	recs := d.records(protocol.TypeJobsList)
	var m, m2 protocol.JobsList
	mustUnmarshal(t, recs[0], &m)
	mustUnmarshal(t, recs[1], &m2)
	if m.ParentAgentID != "agent-p1" || m.State != protocol.JobFailed || !m.Stuck || m.Limit != 7 || m.SinceMs != ms(testNow.Add(-2*time.Hour)) {
		t.Errorf("jobs.list sent %s", recs[0])
	}
	if m2.SinceMs != ms(testNow.Add(-72*time.Hour)) || m2.Limit != defaultJobsLimit || m2.Stuck || m2.State != "" {
		t.Errorf("jobs.list sent %s", recs[1])
	}
}

func TestJobsLsStructured(t *testing.T) {
	d := jobsDaemon(t, noWait)
	rj := runCtl(t, nil, d.path, "", "jobs", "ls", "-o", "json")
	ry := runCtl(t, nil, d.path, "", "jobs", "ls", "-o", "yaml")
	if rj.code != 0 || ry.code != 0 {
		t.Fatalf("exit %d/%d stderr %q %q", rj.code, ry.code, rj.stderr, ry.stderr)
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal([]byte(rj.stdout), &fromJSON); err != nil {
		t.Fatalf("json: %v\n%s", err, rj.stdout)
	}
	if err := yaml.Unmarshal([]byte(ry.stdout), &fromYAML); err != nil {
		t.Fatalf("yaml: %v\n%s", err, ry.stdout)
	}
	// Same document: YAML numbers decode as int, JSON's as float64.
	bj, _ := json.Marshal(fromJSON)
	by, _ := json.Marshal(fromYAML)
	if string(bj) != string(by) {
		t.Errorf("json and yaml differ:\n%s\n%s", bj, by)
	}
	for _, key := range []string{"job_id:", "parent_agent_id:", "halted_by: run-c2", "queue_wait_ms: 1510", "stop_stage: term", "stuck: true"} {
		if !strings.Contains(ry.stdout, key) {
			t.Errorf("yaml lacks %q", key)
		}
	}
	if strings.Contains(ry.stdout, "{") {
		t.Errorf("yaml in flow style:\n%s", ry.stdout)
	}
}

func TestJobsLsEmpty(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) { c.respond(h, protocol.JobsListData{}) })
	r := runCtl(t, nil, d.path, "", "jobs", "ls", "-o", "json")
	if r.code != 0 || strings.Join(strings.Fields(r.stdout), "") != `{"jobs":[]}` {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "ls")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No jobs") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestJobsShowGolden(t *testing.T) {
	d := jobsDaemon(t, noWait)
	for name, handle := range map[string]string{"jobs_show_chain.golden": "alan", "jobs_show_stuck.golden": "run-s1"} {
		r := runCtl(t, nil, d.path, "", "jobs", "show", handle)
		if r.code != 0 {
			t.Fatalf("%s: exit %d stderr %q", handle, r.code, r.stderr)
		}
		golden(t, name, r.stdout)
	}
	var m protocol.JobsShow
	mustUnmarshal(t, d.records(protocol.TypeJobsShow)[0], &m)
	if m.Handle != "alan" && m.Handle != "run-s1" {
		t.Errorf("jobs.show sent %+v", m)
	}
}

func TestJobsShowJSONAndNotFound(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "show", "job-chain", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var got protocol.OpJob
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.HaltedBy != "run-c2" || len(got.Runs) != 3 || got.Runs[1].QueueWaitMs != 1510 {
		t.Errorf("got %+v", got)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "show", "nobody")
	if r.code != exitFailed || r.stderr != "shardctl: NOT_FOUND: no job for \"nobody\"\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestJobsStop(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "stop", "ken")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "run-s1") || !strings.Contains(r.stderr, "shardctl jobs wait ken") {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	var m protocol.SubagentStop
	mustUnmarshal(t, d.records(protocol.TypeSubagentStop)[0], &m)
	if m.ParentAgentID != "agent-p2" || m.Handle != "ken" {
		t.Errorf("subagent.stop sent %+v", m)
	}

	// An ended job: nothing to stop, still success.
	r = runCtl(t, nil, d.path, "", "jobs", "stop", "job-chain", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"parent_agent_id": "agent-p1"`) || !strings.Contains(r.stdout, `"cancelled": []`) {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "stop", "job-chain")
	if r.code != 0 || !strings.Contains(r.stderr, "Nothing to stop") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "stop", "job-nope")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestJobsRelaunch(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "relaunch", "ada", "--task", "sim: say again")
	if r.code != 0 || !strings.Contains(r.stdout, "job-new") || !strings.Contains(r.stdout, "run-new") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	var m protocol.SubagentRelaunch
	mustUnmarshal(t, d.records(protocol.TypeSubagentRelaunch)[0], &m)
	if m.ParentAgentID != "agent-p1" || m.Target != "ada" || m.Task != "sim: say again" {
		t.Errorf("relaunch sent %+v", m)
	}
	// A single-run job names its agent.
	r = runCtl(t, nil, d.path, "", "jobs", "relaunch", "job-stuck", "--task", "again", "-o", "json")
	if r.code != exitFailed || r.stderr != "shardctl: CONFLICT: agent agent-s1 already has run run-s1 (active)\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// A job of several runs is ambiguous.
	r = runCtl(t, nil, d.path, "", "jobs", "relaunch", "job-chain", "--task", "again")
	if r.code != exitUsage || !strings.Contains(r.stderr, "has 3 runs") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "jobs", "relaunch", "ada"); r.code != exitUsage {
		t.Fatalf("without --task: exit %d", r.code)
	}
}

func TestJobsSteer(t *testing.T) {
	d := jobsDaemon(t, noWait)
	r := runCtl(t, nil, d.path, "", "jobs", "steer", "ken", "look", "at", "the", "logs")
	if r.code != 0 || r.stdout != "Injected into turn turn-7 of run run-s1 (steer-1)\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	var m protocol.SubagentSteer
	mustUnmarshal(t, d.records(protocol.TypeSubagentSteer)[0], &m)
	if m.ParentAgentID != "agent-p2" || m.Target != "ken" || m.Message != "look at the logs" {
		t.Errorf("steer sent %+v", m)
	}
	// A single-run job names its run; -o json prints the data.
	r = runCtl(t, nil, d.path, "", "jobs", "steer", "job-stuck", "go", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"status": "injected"`) {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// A steer the turn did not take: exit 1, its code and message.
	r = runCtl(t, nil, d.path, "", "jobs", "steer", "barbara", "go")
	if r.code != exitFailed || r.stderr != "shardctl: CONFLICT: run run-c3 had no turn in flight to take the steer; it was dropped (steer-2)\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "steer", "grace", "go")
	if r.code != exitFailed || r.stderr != "shardctl: CONFLICT: run run-q1 is queued, not active\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "jobs", "steer", "job-chain", "go"); r.code != exitUsage || !strings.Contains(r.stderr, "has 3 runs") {
		t.Fatalf("several runs: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "jobs", "steer", "ken"); r.code != exitUsage {
		t.Fatalf("without a message: exit %d", r.code)
	}
}

// waitScript answers subagent.wait from a table of run states; runs not in
// it are active. A timeout answers timed_out when the awaited runs have not
// ended.
func waitScript(states map[string]protocol.RunState) func(m protocol.SubagentWait) protocol.SubagentWaitData {
	return func(m protocol.SubagentWait) protocol.SubagentWaitData {
		var out protocol.SubagentWaitData
		ended := 0
		for _, j := range sampleOpJobs {
			for _, r := range j.Runs {
				for _, h := range m.Handles {
					if h == j.JobID || h == r.RunID || h == r.Alias || h == r.AgentID {
						snap := r.RunSnapshot
						snap.FinalText = "PRIVATE FINAL TEXT"
						if s, ok := states[r.RunID]; ok {
							snap.State = s
						}
						if snap.State.Terminal() {
							ended++
						}
						out.Runs = append(out.Runs, snap)
					}
				}
			}
		}
		done := ended == len(out.Runs)
		if m.Mode == "any" {
			done = ended > 0
		}
		out.TimedOut = !done
		out.AggregateState = aggregateState(out.Runs)
		return out
	}
}

func TestJobsWaitExitCodes(t *testing.T) {
	queuedDone := map[string]protocol.RunState{"run-q1": protocol.RunCompleted, "run-q2": protocol.RunCompleted}
	allDone := map[string]protocol.RunState{"run-q1": protocol.RunCompleted, "run-q2": protocol.RunCompleted, "run-s1": protocol.RunCompleted}
	d1 := jobsDaemon(t, waitScript(queuedDone))
	d2 := jobsDaemon(t, waitScript(allDone))
	tests := []struct {
		name string
		d    *fakeDaemon
		args []string
		code int
	}{
		{"all completed", d1, []string{"job-queued"}, exitOK},
		{"some failed", d1, []string{"job-chain"}, exitNotComplete},
		{"timed out", d1, []string{"job-stuck", "--timeout", "0.5"}, exitWaitTimeout},
		{"any completed across parents", d1, []string{"--any", "ken", "grace"}, exitOK},
		{"any, none completed", d1, []string{"--any", "alan"}, exitNotComplete},
		{"all across parents", d2, []string{"job-queued", "ken"}, exitOK},
		{"all across parents, one failed", d2, []string{"ken", "alan"}, exitNotComplete},
		{"all across parents, one still running", d1, []string{"grace", "ken"}, exitWaitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(t, nil, tt.d.path, "", append([]string{"jobs", "wait"}, tt.args...)...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "PRIVATE") {
				t.Errorf("final text leaked: %s", r.stdout)
			}
		})
	}
	var sent []protocol.SubagentWait
	for _, rec := range d1.records(protocol.TypeSubagentWait) {
		var m protocol.SubagentWait
		mustUnmarshal(t, rec, &m)
		sent = append(sent, m)
	}
	if sent[0].Timeout != nil || sent[0].Mode != "all" || sent[0].ParentAgentID != "agent-p1" {
		t.Errorf("first wait sent %+v", sent[0])
	}
	if sent[2].Timeout == nil || *sent[2].Timeout != 0.5 || sent[2].ParentAgentID != "agent-p2" {
		t.Errorf("timed wait sent %+v", sent[2])
	}
	if sent[3].Mode != "any" {
		t.Errorf("--any sent %+v", sent[3])
	}
}

func TestJobsWaitJSONAndMessages(t *testing.T) {
	d := jobsDaemon(t, waitScript(nil))
	r := runCtl(t, nil, d.path, "", "jobs", "wait", "job-chain", "-o", "json")
	if r.code != exitNotComplete {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var got protocol.SubagentWaitData
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.TimedOut || got.AggregateState != "failed" || len(got.Runs) != 3 {
		t.Errorf("got %+v", got)
	}
	if r.stderr != "shardctl: not completed: run-c2 failed, run-c3 cancelled\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "wait", "--timeout", "2s", "ken")
	if r.code != exitWaitTimeout || r.stderr != "shardctl: timed out after 2s: 0 of 1 runs ended (nothing was cancelled)\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestWaitTimeoutFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "0.5": 500 * time.Millisecond, "2m": 2 * time.Minute, "0": 0} {
		var w waitTimeout
		if err := w.Set(in); err != nil || w.d != want || !w.set {
			t.Errorf("Set(%q) = %v, %v", in, w.d, err)
		}
	}
	for _, in := range []string{"soon", "-1", "-2s"} {
		var w waitTimeout
		if err := w.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
}

// TestJobsWaitInterrupted: Ctrl-C while waiting ends the command (130).
func TestJobsWaitInterrupted(t *testing.T) {
	var once sync.Once
	block := make(chan struct{})
	t.Cleanup(func() { once.Do(func() { close(block) }) })
	d := jobsDaemon(t, func(protocol.SubagentWait) protocol.SubagentWaitData {
		<-block
		return protocol.SubagentWaitData{}
	})
	ctx, cancel := contextWithTimeout(testTimeout)
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	r := runCtl(t, ctx, d.path, "", "jobs", "wait", "ken")
	once.Do(func() { close(block) })
	if r.code != exitInterrupted {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}
