//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// This file runs the operator commands of shardctl against the
// real shardd: jobs and agents views and actions, offline forensics,
// doctor, and attach in a real terminal (tmux).

// opsFixture is a parent agent with four jobs: one that completes, one that
// fails, a chain halted by its failing second step, and one that sleeps.
type opsFixture struct {
	d                    *daemon
	c                    *client.Conn
	parent, cwd          string
	ok, bad, chain, slow protocol.SubagentCreateData
}

func newOpsFixture(t *testing.T, d *daemon, withSlow bool) *opsFixture {
	t.Helper()
	f := &opsFixture{d: d, c: dialRaw(t, d), cwd: shortTemp(t)}
	var cr protocol.AgentCreateData
	call(t, f.c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: f.cwd}, &cr)
	f.parent = cr.AgentID
	single := func(name, task string, into *protocol.SubagentCreateData) {
		call(t, f.c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: f.parent, Name: name, Task: task}, into)
	}
	single("ok", "sim: say hello", &f.ok)
	single("bad", "sim: fail boom", &f.bad)
	call(t, f.c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: f.parent, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "one", Task: "sim: say one"}, {Name: "two", Task: "sim: fail broke"}, {Name: "three", Task: "sim: say never"}}}, &f.chain)
	if withSlow {
		single("slow", "sim: sleep 60000", &f.slow)
	}
	return f
}

// aliases lists the fixture's aliases in creation order.
func (f *opsFixture) aliases() []string {
	var out []string
	for _, j := range []protocol.SubagentCreateData{f.ok, f.bad, f.chain, f.slow} {
		for _, r := range j.Runs {
			out = append(out, r.Alias)
		}
	}
	return out
}

// decode parses a command's JSON output into v.
func decode(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
}

// ctlCode runs shardctl and fails the test unless it exits with code.
func (d *daemon) ctlCode(code int, args ...string) result {
	d.t.Helper()
	r := d.ctl("", args...)
	if r.code != code {
		d.t.Fatalf("shardctl %q exited %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, code, r.stdout, r.stderr)
	}
	return r
}

var (
	opsIDRe   = regexp.MustCompile(`\b(agent|job|run|sess)-[0-9a-hjkmnp-tv-z]{26}\b`)
	opsTimeRe = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	opsDurRe  = regexp.MustCompile(`\b(\d+h\d\dm|\d+m\d\ds|\d+\.\ds|\d+ms)\+?`)
	opsColRe  = regexp.MustCompile(`\s{2,}`)
)

// normalizeTable makes a table comparable: ids become JOB1, RUN2, AGENT3…
// in order of appearance, aliases ALIAS1… in the given order, times TIME,
// durations DUR, and column padding " | ".
func normalizeTable(out string, aliases []string) string {
	seen := map[string]string{}
	count := map[string]int{}
	out = opsIDRe.ReplaceAllStringFunc(out, func(id string) string {
		if n, ok := seen[id]; ok {
			return n
		}
		kind := strings.ToUpper(id[:strings.IndexByte(id, '-')])
		count[kind]++
		seen[id] = fmt.Sprintf("%s%d", kind, count[kind])
		return seen[id]
	})
	for i, a := range aliases {
		out = regexp.MustCompile(`\b`+regexp.QuoteMeta(a)+`\b`).ReplaceAllString(out, fmt.Sprintf("ALIAS%d", i+1))
	}
	out = opsTimeRe.ReplaceAllString(out, "TIME")
	out = opsDurRe.ReplaceAllString(out, "DUR")
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		lines = append(lines, strings.TrimSpace(opsColRe.ReplaceAllString(l, " | ")))
	}
	return strings.Join(lines, "\n") + "\n"
}

const goldenJobsShowChain = `Job: | JOB1
Parent: | AGENT1
Strategy: | chain
State: | failed
Created: | TIME
Ended: | TIME (after DUR)
Chain step: | 2 of 3
Halted by: | step 2 "two" (RUN1) failed: PROVIDER_ERROR: broke

# | NAME | ALIAS | RUN_ID | AGENT_ID | STATE | QUEUED | WAIT | RAN | STOP | EXIT | ERROR
1 | one | ALIAS3 | RUN2 | AGENT2 | completed | TIME | DUR | DUR | - | - | -
2 | two | ALIAS4 | RUN1 | AGENT3 | failed | TIME | DUR | DUR | - | - | PROVIDER_ERROR: broke
3 | three | ALIAS5 | RUN3 | AGENT4 | cancelled | TIME | - | - | - | - | chain halted by RUN1
`

const goldenJobsLs = `JOB_ID | PARENT | STRATEGY | STATE | RUNS | CREATED | DURATION | NOTE
JOB1 | AGENT1 | chain | failed | 3/3 | TIME | DUR | halted by step 2 (failed)
JOB2 | AGENT1 | single | failed | 1/1 | TIME | DUR | -
JOB3 | AGENT1 | single | completed | 1/1 | TIME | DUR | -
`

func TestShardctlJobsOps(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// A daemon-wide watch from the start sees the runs change.
	watch := startProc(t, d.ctlCmd("watch"))
	t.Cleanup(watch.kill)
	eventually(t, 10*time.Second, "watch connected", func() bool {
		var st protocol.DaemonStatusData
		return json.Unmarshal([]byte(d.mustCtl("", "status", "-o", "json").stdout), &st) == nil && st.Connections >= 2
	})
	f := newOpsFixture(t, d, true)

	// wait: 0 completed, 4 ended but not completed, 5 timed out.
	d.ctlCode(0, "jobs", "wait", f.ok.JobID)
	r := d.ctlCode(4, "jobs", "wait", f.bad.JobID, f.chain.JobID)
	if !strings.Contains(r.stderr, "shardctl: not completed: ") || !strings.Contains(r.stdout, "PROVIDER_ERROR: boom") {
		t.Errorf("wait stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	start := time.Now()
	r = d.ctlCode(5, "jobs", "wait", f.slow.Runs[0].Alias, "--timeout", "0.3")
	if took := time.Since(start); took > 5*time.Second || !strings.Contains(r.stderr, "timed out after 300ms") {
		t.Errorf("timed wait took %s; stderr %q", took, r.stderr)
	}
	d.ctlCode(0, "jobs", "wait", "--any", f.ok.JobID, f.slow.JobID)

	// jobs ls -o json: every job, newest first, no task or final text.
	var ls protocol.JobsListData
	r = d.mustCtl("", "jobs", "ls", "-o", "json")
	decode(t, r, &ls)
	var got []string
	for _, j := range ls.Jobs {
		got = append(got, j.JobID+" "+string(j.State))
	}
	want := []string{f.slow.JobID + " running", f.chain.JobID + " failed", f.bad.JobID + " failed", f.ok.JobID + " completed"}
	if !slices.Equal(got, want) {
		t.Fatalf("jobs ls = %v, want %v", got, want)
	}
	for _, leak := range []string{"sim:", `"task"`, `"final_text"`} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("jobs ls -o json shows %s:\n%s", leak, r.stdout)
		}
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "failed"}, []string{f.chain.JobID, f.bad.JobID}},
		{[]string{"--parent", f.parent, "--limit", "2"}, []string{f.slow.JobID, f.chain.JobID}},
		{[]string{"--since", "1h", "--state", "running"}, []string{f.slow.JobID}},
		{[]string{"--stuck"}, nil},
		// Paged: shardctl follows next_cursor a job at a time.
		{[]string{"--page-size", "1", "--all"}, []string{f.slow.JobID, f.chain.JobID, f.bad.JobID, f.ok.JobID}},
		{[]string{"--page-size", "1", "--limit", "3"}, []string{f.slow.JobID, f.chain.JobID, f.bad.JobID}},
		{[]string{"--page-size", "2", "--state", "failed", "--all"}, []string{f.chain.JobID, f.bad.JobID}},
	} {
		var data protocol.JobsListData
		decode(t, d.mustCtl("", append([]string{"jobs", "ls", "-o", "json"}, tt.args...)...), &data)
		var ids []string
		for _, j := range data.Jobs {
			ids = append(ids, j.JobID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("jobs ls %v = %v, want %v", tt.args, ids, tt.want)
		}
	}
	// A bounded list says when more jobs exist, and only then.
	if r := d.mustCtl("", "jobs", "ls", "--limit", "3", "--page-size", "2"); !strings.Contains(r.stderr, "(the 3 newest; --all shows every job)") {
		t.Errorf("jobs ls --limit 3 of 4 jobs: stderr %q", r.stderr)
	}
	if r := d.mustCtl("", "jobs", "ls", "--limit", "4"); strings.Contains(r.stderr, "newest") {
		t.Errorf("jobs ls --limit 4 of 4 jobs: stderr %q", r.stderr)
	}
	// An unknown parent is an error, not an empty list.
	if r := d.ctlCode(1, "jobs", "ls", "--parent", "agent-nobody"); !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("jobs ls --parent agent-nobody: %q", r.stderr)
	}

	// jobs show resolves every kind of handle, and names the halting step.
	two := f.chain.Runs[1]
	for _, h := range []string{f.chain.JobID, two.RunID, two.AgentID, two.Alias, strings.ToUpper(two.Alias)} {
		var job protocol.OpJob
		decode(t, d.mustCtl("", "jobs", "show", h, "-o", "json"), &job)
		if job.JobID != f.chain.JobID {
			t.Fatalf("jobs show %s = %s, want %s", h, job.JobID, f.chain.JobID)
		}
	}
	var chain protocol.OpJob
	decode(t, d.mustCtl("", "jobs", "show", f.chain.JobID, "-o", "json"), &chain)
	if chain.HaltedBy != two.RunID || chain.ChainStep == nil || *chain.ChainStep != 1 || chain.State != protocol.JobFailed || chain.EndedAt == 0 {
		t.Errorf("chain = %+v", chain)
	}
	states := []protocol.RunState{protocol.RunCompleted, protocol.RunFailed, protocol.RunCancelled}
	for i, run := range chain.Runs {
		if run.State != states[i] || run.QueuedAt == 0 || run.EndedAt == 0 {
			t.Errorf("run %d = %+v", i, run)
		}
	}
	if r0 := chain.Runs[0]; r0.StartedAt == 0 || r0.QueueWaitMs != r0.StartedAt-r0.QueuedAt {
		t.Errorf("run 1 timings = %+v", r0)
	}
	if chain.Runs[2].StartedAt != 0 || !strings.Contains(chain.Runs[1].Error, "broke") {
		t.Errorf("runs = %+v", chain.Runs)
	}
	var asYAML map[string]any
	if err := yaml.Unmarshal([]byte(d.mustCtl("", "jobs", "show", f.chain.JobID, "-o", "yaml").stdout), &asYAML); err != nil {
		t.Fatal(err)
	}
	if asYAML["halted_by"] != two.RunID || asYAML["job_id"] != f.chain.JobID {
		t.Errorf("jobs show -o yaml = %v", asYAML)
	}
	if got := normalizeTable(d.mustCtl("", "jobs", "show", f.chain.JobID).stdout, f.aliases()); got != goldenJobsShowChain {
		t.Errorf("jobs show table:\n%s\nwant:\n%s", got, goldenJobsShowChain)
	}
	r = d.ctlCode(1, "jobs", "show", "job-nope")
	if r.stderr != "shardctl: NOT_FOUND: no job for \"job-nope\"\n" {
		t.Errorf("stderr %q", r.stderr)
	}

	// stop: the sleeping run is cancelled through the escalation.
	r = d.mustCtl("", "jobs", "stop", f.slow.JobID)
	if !strings.Contains(r.stdout, f.slow.Runs[0].RunID) {
		t.Errorf("jobs stop printed:\n%s", r.stdout)
	}
	d.ctlCode(4, "jobs", "wait", f.slow.JobID, "--timeout", "20")
	var slow protocol.OpJob
	decode(t, d.mustCtl("", "jobs", "show", f.slow.JobID, "-o", "json"), &slow)
	if s := slow.Runs[0]; slow.State != protocol.JobCancelled || slow.StoppedAt == 0 || s.StopRequestedAt == 0 || s.StopStage == "" || s.State != protocol.RunCancelled {
		t.Errorf("stopped job = %+v", slow)
	}
	if r := d.mustCtl("", "jobs", "stop", f.slow.JobID); !strings.Contains(r.stderr, "Nothing to stop") {
		t.Errorf("second stop: %q", r.stderr)
	}
	d.ctlCode(1, "jobs", "stop", "run-nope")

	// relaunch: a new job on the same agent; one at a time.
	var rl protocol.SubagentRelaunchData
	decode(t, d.mustCtl("", "jobs", "relaunch", f.ok.Runs[0].Alias, "--task", "sim: sleep 60000", "-o", "json"), &rl)
	if rl.AgentID != f.ok.Runs[0].AgentID || rl.JobID == f.ok.JobID || rl.RunID == "" {
		t.Errorf("relaunch = %+v", rl)
	}
	r = d.ctlCode(1, "jobs", "relaunch", rl.AgentID, "--task", "sim: say twice")
	if !strings.HasPrefix(r.stderr, "shardctl: CONFLICT: ") {
		t.Errorf("relaunch while active: %q", r.stderr)
	}
	d.mustCtl("", "jobs", "stop", rl.RunID)
	d.ctlCode(4, "jobs", "wait", rl.JobID, "--timeout", "20")
	r = d.mustCtl("", "jobs", "relaunch", f.bad.JobID, "--task", "sim: say fixed")
	fixed := opsIDRe.FindAllString(r.stdout, -1)
	if len(fixed) < 2 {
		t.Fatalf("relaunch printed %q", r.stdout)
	}
	d.ctlCode(0, "jobs", "wait", fixed[1], "--timeout", "20")
	d.ctlCode(2, "jobs", "relaunch", f.chain.JobID, "--task", "sim: say again")

	// status counts the runs.
	var st map[string]any
	decode(t, d.mustCtl("", "status", "-o", "json"), &st)
	byState, _ := st["runs_by_state"].(map[string]any)
	if st["jobs"] != float64(6) || st["queue_depth"] != float64(0) ||
		byState["completed"] != float64(3) || byState["failed"] != float64(2) || byState["cancelled"] != float64(3) {
		t.Errorf("status = %v", st)
	}

	// The watch saw the children spawn and their runs change.
	eventually(t, 10*time.Second, "watch printed run changes", func() bool {
		out := watch.stdout.String()
		return watchSaw(out, f.slow.Runs[0].AgentID, "subagent_run_changed", f.slow.Runs[0].RunID+" active→cancelled") &&
			watchSaw(out, f.slow.Runs[0].AgentID, "agent_spawned", "slow") && strings.Contains(out, " agent_activity ")
	})
	if err := watch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if ws := watch.waitExit(t, 10*time.Second); ws.ExitCode() != 0 {
		t.Errorf("watch: %v; stderr %s", ws, watch.stderr.String())
	}
	if strings.Contains(watch.stdout.String(), "sim:") {
		t.Errorf("watch printed task text:\n%s", watch.stdout.String())
	}
}

func TestShardctlAgentsOps(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d)
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
	parent := cr.AgentID
	var job protocol.SubagentCreateData
	call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Name: "kid", Task: "sim: say hi"}, &job)
	child := job.Runs[0].AgentID
	d.ctlCode(0, "jobs", "wait", job.JobID, "--timeout", "20")

	var ls protocol.AgentListData
	decode(t, d.mustCtl("", "agents", "ls", "--parent", parent, "-o", "json"), &ls)
	if len(ls.Agents) != 1 || ls.Agents[0].AgentID != child {
		t.Errorf("agents ls --parent = %+v", ls.Agents)
	}
	// Paged: agents ls follows next_cursor an agent at a time, oldest
	// first, and --limit stops early.
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
	third := cr.AgentID
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--page-size", "1"}, []string{parent, child, third}},
		{[]string{"--page-size", "1", "--limit", "2"}, []string{parent, child}},
		{[]string{"--page-size", "1", "--parent", parent}, []string{child}},
		{[]string{"--since", "1h", "--page-size", "2"}, []string{parent, child, third}},
	} {
		var data protocol.AgentListData
		decode(t, d.mustCtl("", append([]string{"agents", "ls", "-o", "json"}, tt.args...)...), &data)
		var ids []string
		for _, a := range data.Agents {
			ids = append(ids, a.AgentID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("agents ls %v = %v, want %v", tt.args, ids, tt.want)
		}
	}
	if r := d.ctlCode(0, "agents", "ls", "--page-size", "1", "--limit", "1"); !strings.Contains(r.stderr, "(the 1 oldest;") {
		t.Errorf("agents ls --limit 1 says nothing of the rest: %q", r.stderr)
	}
	type agentView struct {
		Agent    protocol.AgentInfo `json:"agent"`
		Children []string           `json:"children"`
		Job      *protocol.OpJob    `json:"job"`
		Jobs     []protocol.OpJob   `json:"jobs"`
	}
	var pv, cv agentView
	decode(t, d.mustCtl("", "agents", "show", parent, "-o", "json"), &pv)
	if pv.Agent.AgentID != parent || !slices.Equal(pv.Children, []string{child}) || len(pv.Jobs) != 1 || pv.Jobs[0].JobID != job.JobID || pv.Job != nil {
		t.Errorf("agents show parent = %+v", pv)
	}
	decode(t, d.mustCtl("", "agents", "show", child, "-o", "json"), &cv)
	if cv.Agent.ParentAgentID != parent || cv.Job == nil || cv.Job.JobID != job.JobID {
		t.Errorf("agents show child = %+v", cv)
	}
	r := d.mustCtl("", "agents", "show", child)
	for _, want := range []string{"Parent:", parent, "Alias:", job.Runs[0].Alias, job.JobID + ": completed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("agents show table lacks %q:\n%s", want, r.stdout)
		}
	}
	d.ctlCode(1, "agents", "show", "agent-nope")

	// terminate: the idle child's runtime ends now.
	eventually(t, 10*time.Second, "child runtime up", func() bool { return len(runtimePIDs(t, child)) > 0 })
	var term protocol.AgentTerminateData
	decode(t, d.mustCtl("", "agents", "terminate", child, "-o", "json"), &term)
	if term.Deferred {
		t.Errorf("terminate of an idle agent deferred")
	}
	eventually(t, 15*time.Second, "terminated runtime gone", func() bool { return len(runtimePIDs(t, child)) == 0 })

	// kill: the parent's runtime (woken by the completion report); --force
	// on an agent busy with a long turn.
	eventually(t, 15*time.Second, "parent runtime up", func() bool { return len(runtimePIDs(t, parent)) > 0 })
	d.mustCtl("", "agents", "kill", parent)
	eventually(t, 15*time.Second, "killed runtime gone", func() bool { return len(runtimePIDs(t, parent)) == 0 })

	var busy protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &busy)
	d.mustCtl("", "prompt", "--no-wait", busy.AgentID, "sim: sleep 60000")
	eventually(t, 10*time.Second, "busy runtime up", func() bool { return len(runtimePIDs(t, busy.AgentID)) > 0 })
	start := time.Now()
	d.mustCtl("", "agents", "kill", "--force", busy.AgentID)
	eventually(t, 5*time.Second, "force-killed runtime gone", func() bool { return len(runtimePIDs(t, busy.AgentID)) == 0 })
	t.Logf("kill --force took %s", time.Since(start))
	d.ctlCode(1, "agents", "kill", "agent-nope")
}

const goldenOfflineJobsLs = `JOB_ID | PARENT | STRATEGY | STATE | RUNS | CREATED | DURATION | NOTE
JOB1 | AGENT1 | chain | failed | 3/3 | TIME | DUR | halted by step 2 (failed)
JOB2 | AGENT1 | single | failed | 1/1 | TIME | DUR | -
JOB3 | AGENT1 | single | completed | 1/1 | TIME | DUR | -
`

func TestShardctlOffline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	f := newOpsFixture(t, d, false)
	d.ctlCode(4, "jobs", "wait", f.ok.JobID, f.bad.JobID, f.chain.JobID, "--timeout", "20")

	onlineLs := d.mustCtl("", "jobs", "ls", "-o", "json").stdout
	alias := f.chain.Runs[1].Alias
	onlineShow := d.mustCtl("", "jobs", "show", alias, "-o", "json").stdout
	onlineTable := normalizeTable(d.mustCtl("", "jobs", "ls", "-o", "wide").stdout, f.aliases())
	if onlineTable != goldenJobsLs {
		t.Errorf("jobs ls table:\n%s\nwant:\n%s", onlineTable, goldenJobsLs)
	}
	var onlineAgents protocol.AgentListData
	decode(t, d.mustCtl("", "agents", "ls", "-o", "json"), &onlineAgents)

	// With the daemon up, --offline refuses at once, saying why.
	for _, args := range [][]string{{"jobs", "ls"}, {"jobs", "show", alias}, {"agents", "ls"}} {
		start := time.Now()
		r := d.ctlCode(6, append([]string{"--offline"}, args...)...)
		if !strings.Contains(r.stderr, "shardd is running") || !strings.Contains(r.stderr, "drop --offline") || time.Since(start) > 5*time.Second {
			t.Errorf("--offline %v with the daemon up: %q after %s", args, r.stderr, time.Since(start))
		}
	}

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ds := d.waitExit(t, exitTimeout); ds.ExitCode() != 0 {
		t.Fatalf("shardd after SIGTERM: %v", ds)
	}

	// The same views, read from the file.
	if got := d.mustCtl("", "--offline", "jobs", "ls", "-o", "json").stdout; got != onlineLs {
		t.Errorf("offline jobs ls differs from the daemon's:\noffline:\n%s\nonline:\n%s", got, onlineLs)
	}
	if got := d.mustCtl("", "--offline", "jobs", "show", alias, "-o", "json").stdout; got != onlineShow {
		t.Errorf("offline jobs show differs:\noffline:\n%s\nonline:\n%s", got, onlineShow)
	}
	if got := normalizeTable(d.mustCtl("", "--offline", "jobs", "ls", "-o", "wide").stdout, f.aliases()); got != goldenOfflineJobsLs {
		t.Errorf("offline jobs ls table:\n%s\nwant:\n%s", got, goldenOfflineJobsLs)
	}
	for _, h := range []string{f.chain.JobID, f.chain.Runs[2].RunID, f.chain.Runs[0].AgentID} {
		var job protocol.OpJob
		decode(t, d.mustCtl("", "--offline", "jobs", "show", h, "-o", "json"), &job)
		if job.JobID != f.chain.JobID {
			t.Errorf("offline jobs show %s = %s", h, job.JobID)
		}
	}
	var offAgents protocol.AgentListData
	decode(t, d.mustCtl("", "--offline", "agents", "ls", "-o", "json"), &offAgents)
	if len(offAgents.Agents) != len(onlineAgents.Agents) {
		t.Fatalf("offline agents ls: %d agents, online %d", len(offAgents.Agents), len(onlineAgents.Agents))
	}
	for i, a := range offAgents.Agents {
		on := onlineAgents.Agents[i]
		if a.AgentID != on.AgentID || a.Cwd != on.Cwd || a.ParentAgentID != on.ParentAgentID || a.RuntimeState != protocol.RuntimeStopped {
			t.Errorf("offline agent %+v, online %+v", a, on)
		}
	}
	d.ctlCode(2, "--offline", "jobs", "stop", f.ok.JobID)
	if r := d.ctlCode(1, "--offline", "jobs", "show", "nobody"); !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestShardctlDoctor(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	type report struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Status, Detail string
		} `json:"checks"`
	}
	run := func(code int) map[string]string {
		t.Helper()
		r := d.ctlCode(code, "doctor", "-o", "json")
		var rep report
		decode(t, r, &rep)
		out := map[string]string{}
		for _, c := range rep.Checks {
			out[c.Name] = c.Status + ": " + c.Detail
		}
		if rep.OK != (code == 0) {
			t.Errorf("ok = %v with exit %d", rep.OK, code)
		}
		return out
	}
	c := run(0)
	for name, want := range map[string]string{
		"home": "ok", "config": "ok", "daemon": "ok: shardd ", "socket": "ok", "discovery": "ok",
		"database": "ok", "store": "ok: consistent (checked by the daemon)", "orphans": fmt.Sprintf("ok: every agent runtime of this home runs under the daemon (pid %d)", d.pid()),
		"workspaces": "ok: 0 live workspace(s)",
	} {
		if !strings.HasPrefix(c[name], want) {
			t.Errorf("%s = %q, want %q…", name, c[name], want)
		}
	}
	if !strings.Contains(c["daemon"], fmt.Sprintf("pid %d", d.pid())) {
		t.Errorf("daemon = %q", c["daemon"])
	}

	db := filepath.Join(d.home, "shard.db")
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	c = run(7)
	if !strings.HasPrefix(c["database"], "fail: "+db+" is mode 0644") {
		t.Errorf("database = %q", c["database"])
	}
	if err := os.Chmod(db, 0o600); err != nil {
		t.Fatal(err)
	}

	// A runtime of this home that the daemon did not start.
	stray := exec.Command("sleep", "60")
	stray.Env = append(baseEnv(), "SHARD_HOME="+d.home, "SHARD_AGENT_ID=agent-stray")
	sp := startProc(t, stray)
	t.Cleanup(sp.kill)
	c = run(7)
	if !strings.Contains(c["orphans"], fmt.Sprintf("pid %d (agent-stray)", sp.pid())) {
		t.Errorf("orphans = %q", c["orphans"])
	}
	sp.kill()

	// Stopped: doctor checks the file itself.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, exitTimeout)
	c = run(0)
	if !strings.HasPrefix(c["daemon"], "warn: not running") || !strings.HasPrefix(c["store"], "ok: consistent (checked read-only") {
		t.Errorf("stopped: daemon %q store %q", c["daemon"], c["store"])
	}
}

// TestShardctlAttachUnderTmux drives attach in a real terminal: prompts,
// a permission question answered with "y", and a detach.
func TestShardctlAttachUnderTmux(t *testing.T) {
	t.Parallel()
	tmuxBin := testhost.Tool(t, "tmux")
	d := startDaemon(t)
	cwd := shortTemp(t)
	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd).stdout)

	sock := filepath.Join(shortTemp(t), "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tmuxBin, append([]string{"-S", sock}, args...)...)
		cmd.Env = append(baseEnv(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tmuxBin, "-S", sock, "kill-server").Run() })
	tmux("new-session", "-d", "-s", "ops", "-x", "120", "-y", "40",
		"env", "SHARD_HOME=", "NO_COLOR=", "sh", "-c", `"$0" --home "$1" attach "$2"; echo "[attach exited $?]"; sleep 600`,
		shardctlBin, d.home, id)
	screen := func() string { return tmux("capture-pane", "-p", "-t", "ops") }
	waitScreen := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			s := screen()
			if cond(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	typeLine := func(s string) {
		tmux("send-keys", "-t", "ops", "-l", s)
		tmux("send-keys", "-t", "ops", "Enter")
	}
	has := func(subs ...string) func(string) bool {
		return func(s string) bool {
			for _, sub := range subs {
				if !strings.Contains(s, sub) {
					return false
				}
			}
			return true
		}
	}

	waitScreen("the banner and prompt", has("Attached to "+id, "\n›"))
	typeLine("sim: say hello from tmux")
	waitScreen("the reply", has("hello from tmux\n", "— turn ended"))

	typeLine(`sim: tool write {"path":"t.txt","content":"from tmux"}`)
	waitScreen("the permission question", has("[y]es/[n]o/[a]lways:"))
	tmux("send-keys", "-t", "ops", "y", "Enter")
	waitScreen("the tool ran", has("⚙ write t.txt", "↳ ok"))
	eventually(t, 10*time.Second, "t.txt written", func() bool {
		b, err := os.ReadFile(filepath.Join(cwd, "t.txt"))
		return err == nil && string(b) == "from tmux"
	})

	typeLine("/mode plan")
	waitScreen("the mode change", has("mode: build → plan"))
	// Ctrl-D on the empty input line detaches. The pane runs attach under
	// sh, which prints its exit status: tmux 3.3 sometimes leaves an exited
	// pane process unreaped, so #{pane_dead_status} cannot be relied on.
	tmux("send-keys", "-t", "ops", "C-d")
	waitScreen("detached", has("[attach exited 0]"))
	final := screen()
	if strings.Contains(final, "\x1b[") {
		t.Errorf("raw escape codes on screen:\n%s", final)
	}
	t.Logf("final screen:\n%s", final)
}
