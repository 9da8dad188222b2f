package daemon_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// TestSubagentNamesReachEveryView follows one named run through every view
// that names it (docs/protocol.md §10.3, §11.2): the create answer, the
// child's AgentInfo, subagent.status, subagent_run_changed, jobs.show and a
// relaunch. Each carries the run's alias, the task's name as
// definition_name and "name · alias" as display_name, so a client can show
// one label everywhere. The job's mode is every child's.
func TestSubagentNamesReachEveryView(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel, Mode: "plan",
		Tasks: []protocol.TaskSpec{{Name: "scout", Task: "sim: say found it"}, {Name: "breaker", Task: "sim: fail boom"}, {Name: "crasher", Task: "sim: exit 3"}}})
	scout, breaker := job.Runs[0], job.Runs[1]
	if scout.Alias == "" || scout.DefinitionName != "scout" || scout.DisplayName != "scout · "+scout.Alias {
		t.Fatalf("created run names = alias %q definition %q display %q", scout.Alias, scout.DefinitionName, scout.DisplayName)
	}

	// Each run's terminal change names it and says when and how it ended.
	ended := map[string]*protocol.SubagentRunChanged{}
	waitFor(t, c, func(e client.Event) bool {
		if ev, ok := e.Msg.(*protocol.SubagentRunChanged); ok && ev.State.Terminal() {
			ended[ev.RunID] = ev
		}
		return len(ended) == 3
	})
	done, failed := ended[scout.RunID], ended[breaker.RunID]
	if done.State != protocol.RunCompleted || done.Alias != scout.Alias || done.DefinitionName != "scout" ||
		done.DisplayName != scout.DisplayName || done.EndedAt == 0 || done.Error != "" || done.PreviousState == "" {
		t.Errorf("completed run change = %+v", done)
	}
	if failed.State != protocol.RunFailed || !strings.Contains(failed.Error, "boom") || failed.DefinitionName != "breaker" || failed.EndedAt == 0 {
		t.Errorf("failed run change = %+v", failed)
	}

	// The child is an agent like any other: its AgentInfo carries the names.
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: scout.AgentID}}, &st); err != nil || len(st.Agents) != 1 {
		t.Fatalf("agent.status child = %+v, %v", st, err)
	}
	info := st.Agents[0]
	if info.Alias != scout.Alias || info.DefinitionName != "scout" || info.DisplayName != scout.DisplayName ||
		info.ParentAgentID != parent || info.CreatedAt == 0 || info.Mode != "plan" {
		t.Errorf("child AgentInfo = %+v", info)
	}

	// subagent.status by alias.
	var ss protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent,
		Targets: []string{scout.Alias}}, &ss); err != nil || len(ss.Agents) != 1 {
		t.Fatalf("subagent.status = %+v, %v", ss, err)
	}
	if a := ss.Agents[0]; a.AgentID != scout.AgentID || a.Alias != scout.Alias || a.DefinitionName != "scout" ||
		a.DisplayName != scout.DisplayName || a.ParentAgentID != parent || a.Run == nil || a.Run.RunID != scout.RunID {
		t.Errorf("subagent.status agent = %+v", a)
	}

	// The operator's view of the job.
	var oj protocol.OpJob
	if err := c.Call(ctx(t), &protocol.JobsShow{Header: hdr(protocol.TypeJobsShow), Handle: job.JobID}, &oj); err != nil {
		t.Fatalf("jobs.show: %v", err)
	}
	if oj.Strategy != protocol.StrategyParallel || oj.CreatedAt == 0 || oj.ParentAgentID != parent || len(oj.Runs) != 3 {
		t.Fatalf("jobs.show job = %+v", oj)
	}
	for _, r := range oj.Runs {
		if r.DefinitionName == "" || r.DisplayName != r.DefinitionName+" · "+r.Alias || r.QueuedAt == 0 {
			t.Errorf("jobs.show run = %+v", r)
		}
	}
	// The run whose runtime died says how it ended.
	if crashed := oj.Runs[2]; crashed.State != protocol.RunFailed || !strings.Contains(crashed.ExitStatus, "3") {
		t.Errorf("crashed run: state %s, exit_status %q", crashed.State, crashed.ExitStatus)
	}

	// A relaunch keeps the run's names.
	var rl protocol.SubagentRelaunchData
	if err := c.Call(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent,
		Target: breaker.Alias, Task: "sim: say fixed"}, &rl); err != nil {
		t.Fatalf("relaunch: %v", err)
	}
	if rl.Alias != breaker.Alias || rl.DefinitionName != "breaker" || rl.DisplayName != breaker.DisplayName || rl.AgentID != breaker.AgentID {
		t.Errorf("relaunch data = %+v", rl)
	}
}
