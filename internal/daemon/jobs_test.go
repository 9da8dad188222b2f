package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func hdr(typ string) protocol.Header { return protocol.Header{Type: typ} }

func createJob(t *testing.T, c *client.Conn, m *protocol.SubagentCreate) protocol.SubagentCreateData {
	t.Helper()
	m.Header = hdr(protocol.TypeSubagentCreate)
	var data protocol.SubagentCreateData
	if err := c.Call(ctx(t), m, &data); err != nil {
		t.Fatalf("subagent.create: %v", err)
	}
	return data
}

// slowChain creates a two-step chain under parent and returns once its
// first step (a 20 s sleep) is active; the second stays queued behind it.
func slowChain(t *testing.T, c *client.Conn, parent string) protocol.SubagentCreateData {
	t.Helper()
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "slow", Task: "sim: sleep 20000"}, {Name: "next", Task: "sim: say never"}}})
	waitRunState(t, c, job.Runs[0].RunID, protocol.RunActive)
	return job
}

func waitRuns(t *testing.T, c *client.Conn, parent string, handles []string, mode string, timeout *float64) protocol.SubagentWaitData {
	t.Helper()
	var data protocol.SubagentWaitData
	if err := c.Call(ctx(t), &protocol.SubagentWait{Header: hdr(protocol.TypeSubagentWait), ParentAgentID: parent,
		Handles: handles, Mode: mode, Timeout: timeout}, &data); err != nil {
		t.Fatalf("subagent.wait: %v", err)
	}
	return data
}

func secs(f float64) *float64 { return &f }

func TestSubagentSingleRunCompletesAndReportsToParent(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")

	const marker = "TASK-TEXT-MARKER-5e1"
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "summarize",
		Task: "sim: say child says hi\n" + marker})
	if job.Strategy != protocol.StrategySingle || len(job.Runs) != 1 {
		t.Fatalf("create = %+v", job)
	}
	run := job.Runs[0]
	if run.State != protocol.RunQueued || run.AgentID == "" || run.Alias == "" || !strings.HasPrefix(run.RunID, "run-") || !strings.HasPrefix(job.JobID, "job-") {
		t.Fatalf("created run = %+v", run)
	}

	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if res.TimedOut || len(res.Runs) != 1 || res.Runs[0].State != protocol.RunCompleted || res.AggregateState != string(protocol.JobCompleted) {
		t.Fatalf("wait = %+v", res)
	}
	if res.Runs[0].FinalText != "child says hi" || res.Runs[0].StartedAt == 0 || res.Runs[0].EndedAt == 0 {
		t.Fatalf("completed run = %+v", res.Runs[0])
	}

	// The parent receives the completion report as a prompt (it was idle).
	var seen []client.Event
	waitFor(t, c, func(e client.Event) bool {
		seen = append(seen, e)
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == parent && strings.Contains(textOf(m.Message), "[subagent report]")
	})
	// The run's transitions reached the parent's connection, in order.
	var states []protocol.RunState
	for _, e := range seen {
		if ev, ok := e.Msg.(*protocol.SubagentRunChanged); ok && ev.RunID == run.RunID {
			states = append(states, ev.State)
		}
		if strings.Contains(string(e.Raw), marker) {
			t.Fatalf("task text leaked to a client: %s", e.Raw)
		}
	}
	want := []protocol.RunState{protocol.RunStarting, protocol.RunActive, protocol.RunCompleted}
	if strings.Join(toStrings(states), ",") != strings.Join(toStrings(want), ",") {
		t.Errorf("subagent_run_changed states = %v, want %v", states, want)
	}
	if strings.Contains(h.log.String(), marker) {
		t.Fatal("task text was logged")
	}
	// The child is a durable agent with parent_agent_id.
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList)}, &list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Agents {
		if a.AgentID == run.AgentID && (a.ParentAgentID != parent || a.Alias != run.Alias) {
			t.Errorf("child info = %+v", a)
		}
		if raw, _ := json.Marshal(a); strings.Contains(string(raw), marker) {
			t.Errorf("AgentInfo carries the task: %s", raw)
		}
	}
}

func textOf(m protocol.Message) string {
	var b strings.Builder
	for _, blk := range m.Content {
		b.WriteString(blk.Text)
	}
	return b.String()
}

func toStrings(s []protocol.RunState) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

func TestSubagentParallelAndChainHalting(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)

	par := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Tasks: []protocol.TaskSpec{{Name: "a", Task: "sim: say A"}, {Name: "b", Task: "sim: say B"}, {Name: "c", Task: "sim: say C"}}})
	res := waitRuns(t, c, parent, []string{par.JobID}, "all", nil)
	if len(res.Runs) != 3 {
		t.Fatalf("wait on job = %+v", res)
	}
	for i, r := range res.Runs {
		if r.State != protocol.RunCompleted || r.FinalText != string(rune('A'+i)) {
			t.Errorf("parallel run %d = %+v", i, r)
		}
	}
	aliases := map[string]bool{}
	for _, r := range par.Runs {
		aliases[strings.ToLower(r.Alias)] = true
	}
	if len(aliases) != 3 {
		t.Errorf("aliases not distinct: %+v", par.Runs)
	}

	chain := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "one", Task: "sim: say first"}, {Name: "two", Task: "sim: fail boom"}, {Name: "three", Task: "sim: say never"}}})
	res = waitRuns(t, c, parent, []string{chain.JobID}, "all", nil)
	got := []protocol.RunState{res.Runs[0].State, res.Runs[1].State, res.Runs[2].State}
	want := []protocol.RunState{protocol.RunCompleted, protocol.RunFailed, protocol.RunCancelled}
	if strings.Join(toStrings(got), ",") != strings.Join(toStrings(want), ",") {
		t.Fatalf("chain states = %v, want %v (%+v)", got, want, res.Runs)
	}
	if res.AggregateState != string(protocol.JobFailed) || !strings.Contains(res.Runs[2].Error, res.Runs[1].RunID) {
		t.Errorf("chain result = %+v", res)
	}
	// The halted step was never prompted: its agent never ran and has no transcript.
	third := chain.Runs[2].AgentID
	if pids := runtimePIDs(t, third); len(pids) != 0 {
		t.Errorf("halted step's agent has a runtime: %v", pids)
	}
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 2 || st.Jobs[0].JobID != chain.JobID || st.Jobs[0].ChainStep == nil || *st.Jobs[0].ChainStep != 1 {
		t.Fatalf("status jobs = %+v", st.Jobs)
	}
	if entries, _ := os.ReadDir(filepath.Join(h.cfg.SessionsDir())); len(entries) == 0 {
		t.Fatal("no sessions at all")
	}
}

func TestSubagentStopWaitTimeoutAndLeaseGuard(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := slowChain(t, c, parent)
	first, second := job.Runs[0], job.Runs[1]

	// A wait that times out changes nothing.
	res := waitRuns(t, c, parent, []string{first.Alias}, "any", secs(0.2))
	if !res.TimedOut || res.Runs[0].State != protocol.RunActive {
		t.Fatalf("timed-out wait = %+v", res)
	}
	res = waitRuns(t, c, parent, []string{first.RunID}, "", secs(0))
	if !res.TimedOut || res.Runs[0].State != protocol.RunActive {
		t.Fatalf("poll = %+v", res)
	}

	// The leased child refuses a direct prompt.
	attach(t, c, first.AgentID, "")
	if _, err := c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: first.AgentID}, Message: "hi"}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("direct prompt to a leased child: %v, want CONFLICT", err)
	}

	// Another parent cannot see or stop it.
	other := h.create(c, nil)
	if _, err := c.Request(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: other, Handle: first.RunID}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("stop by another parent: %v, want NOT_FOUND", err)
	}

	var stop protocol.SubagentStopData
	if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: job.JobID}, &stop); err != nil {
		t.Fatal(err)
	}
	if stop.JobID != job.JobID || len(stop.Cancelled) != 2 {
		t.Fatalf("stop = %+v", stop)
	}
	// Each entry is the run's state when the stop was accepted: the
	// queued step is cancelled at once, the active one is being stopped.
	for i, wantState := range []protocol.RunState{protocol.RunActive, protocol.RunCancelled} {
		if cr, want := stop.Cancelled[i], job.Runs[i]; cr.RunID != want.RunID || cr.AgentID != want.AgentID || cr.State != wantState {
			t.Errorf("cancelled[%d] = %+v, want run %s of agent %s, %s", i, cr, want.RunID, want.AgentID, wantState)
		}
	}
	res = waitRuns(t, c, parent, []string{job.JobID}, "all", nil)
	if res.Runs[0].State != protocol.RunCancelled || res.Runs[1].State != protocol.RunCancelled || res.AggregateState != string(protocol.JobCancelled) {
		t.Fatalf("after stop = %+v", res)
	}
	if pids := runtimePIDs(t, second.AgentID); len(pids) != 0 {
		t.Errorf("queued step was spawned: %v", pids)
	}
	// Stop is idempotent; the durable child survives and is relaunchable.
	if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: job.JobID}, &stop); err != nil || len(stop.Cancelled) != 0 {
		t.Fatalf("second stop = %+v, %v", stop, err)
	}
	var rl protocol.SubagentRelaunchData
	if err := c.Call(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent, Target: strings.ToUpper(first.Alias), Task: "sim: say again"}, &rl); err != nil {
		t.Fatalf("relaunch: %v", err)
	}
	if rl.AgentID != first.AgentID || rl.RunID == first.RunID || rl.JobID == job.JobID || rl.State != protocol.RunQueued {
		t.Fatalf("relaunch = %+v", rl)
	}
	if _, err := c.Request(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent, Target: first.AgentID, Task: "dup"}); protocol.CodeOf(err) != protocol.CodeConflict {
		// Either the relaunched run is still live (CONFLICT) or it already
		// finished; only CONFLICT is acceptable while it is queued/active.
		res := waitRuns(t, c, parent, []string{rl.RunID}, "", secs(0))
		if !res.Runs[0].State.Terminal() {
			t.Fatalf("duplicate relaunch of an active agent: %v", err)
		}
	}
	res = waitRuns(t, c, parent, []string{rl.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted || res.Runs[0].FinalText != "again" {
		t.Fatalf("relaunched run = %+v", res.Runs[0])
	}
}

// TestSecondStopOfALiveJobCancelsNothing: stopping a run again reports no
// run cancelled, also while its job still runs (its job actor is alive):
// cancelled lists what this stop cancelled, not what an earlier one did.
func TestSecondStopOfALiveJobCancelsNothing(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := slowChain(t, c, parent)
	first, second := job.Runs[0], job.Runs[1]
	stopRun := func(handle string) protocol.SubagentStopData {
		t.Helper()
		var out protocol.SubagentStopData
		if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: handle}, &out); err != nil {
			t.Fatalf("stop %s: %v", handle, err)
		}
		return out
	}
	if got := stopRun(second.RunID); len(got.Cancelled) != 1 || got.Cancelled[0].RunID != second.RunID || got.Cancelled[0].State != protocol.RunCancelled {
		t.Fatalf("stop of the queued step = %+v", got)
	}
	if got := stopRun(second.RunID); len(got.Cancelled) != 0 {
		t.Fatalf("second stop of the cancelled step, its job still running = %+v; want nothing cancelled", got)
	}
	if res := waitRuns(t, c, parent, []string{first.RunID}, "", secs(0)); res.Runs[0].State != protocol.RunActive {
		t.Fatalf("the active step after its sibling's stops = %+v", res.Runs[0])
	}
	if got := stopRun(job.JobID); len(got.Cancelled) != 1 || got.Cancelled[0].RunID != first.RunID {
		t.Fatalf("stop of the job = %+v; want the active step only", got)
	}
}

func TestSubagentRequestIDIsIdempotent(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	a := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "x", Task: "sim: say x", RequestID: "req-1"})
	b := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "x", Task: "sim: say x", RequestID: "req-1"})
	if a.JobID != b.JobID || a.Runs[0].AgentID != b.Runs[0].AgentID {
		t.Fatalf("repeat with one request_id made a second job: %s vs %s", a.JobID, b.JobID)
	}
	// Validation happens before any side effect.
	_, err := c.Request(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Tasks: make([]protocol.TaskSpec, 20)})
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("bad batch: %v", err)
	}
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent}, &st); err != nil || len(st.Jobs) != 1 {
		t.Fatalf("status after a duplicate and a bad create = %+v, %v", st.Jobs, err)
	}
}

func TestRestartInterruptsActiveRunsAndReportsThem(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "long", Task: "sim: sleep 30000"}, {Name: "after", Task: "sim: say never"}}})
	waitFor(t, c, func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.SubagentRunChanged)
		return ok && ev.RunID == job.Runs[0].RunID && ev.State == protocol.RunActive
	})
	h.d.Shutdown(true) // the run is cut short: on disk it is still active

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	// The restarted daemon delivers the reports as soon as it starts, so
	// a report's turn may be over before this attach: those are in the
	// sync's window, the later ones arrive as events.
	isReport := func(m protocol.Message) bool {
		return m.Role == "assistant" && strings.Contains(textOf(m), "[subagent report]")
	}
	reports := 0
	for _, m := range attach(t, c2, parent, "").LiveWindow.Messages {
		if isReport(m) {
			reports++
		}
	}
	res := waitRuns(t, c2, parent, []string{job.JobID}, "all", secs(0))
	if res.TimedOut || res.Runs[0].State != protocol.RunInterrupted || res.Runs[1].State != protocol.RunCancelled {
		t.Fatalf("after restart = %+v", res)
	}
	if pids := runtimePIDs(t, job.Runs[1].AgentID); len(pids) != 0 {
		t.Errorf("the chain step after the interrupted one was started: %v", pids)
	}
	// Each ended run is reported to the parent once.
	deadline := time.After(10 * time.Second)
	for reports < 2 {
		select {
		case e := <-c2.Events():
			if m, ok := e.Msg.(*protocol.MessageComplete); ok && m.AgentID == parent && isReport(m.Message) {
				reports++
			}
		case <-deadline:
			t.Fatalf("saw %d reports, want 2", reports)
		}
	}
	eventually(t, "delivered reports forgotten", func() bool {
		return !logContains(h2, "will retry")
	})
	// Interrupted runs are relaunchable, named by their run id
	// (docs/protocol.md §10.3: agent_id, run_id, or alias; the other tests
	// use the other two).
	var rl protocol.SubagentRelaunchData
	if err := c2.Call(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent, Target: job.Runs[0].RunID, Task: "sim: say resumed"}, &rl); err != nil {
		t.Fatalf("relaunch interrupted: %v", err)
	}
}
