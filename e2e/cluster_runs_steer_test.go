//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterRunsSteer: a child running on n3 (the only node that claims
// runs) is steered by its parent on n1 with subagent.steer
// (docs/protocol.md §13 "Runs on other nodes"). The steer crosses to n3,
// is answered injected with the run's turn only once the child's runtime
// took it into a provider request, is in the run's steers on n1 when the
// answer comes (jobs.show), and the run's final text shows it. A steer of
// a run whose turn fails before it is taken is CONFLICT. The child's ask
// holds its turn in flight (answered by the parent's client on n1); the
// sleep after it leaves the steer time to cross before the turn ends.
func TestClusterRunsSteer(t *testing.T) {
	n1, c1, cs, parent := steerCluster(t, 2)
	// The job follows at once: its run carries the parent's node, so the
	// child's ask reaches n1 before n3 may list the parent.

	spawn := func(name, task string) (runID, child string) {
		t.Helper()
		var job protocol.SubagentCreateData
		c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
			Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: name, Task: task}}}, &job)
		return job.Runs[0].RunID, job.Runs[0].AgentID
	}
	// steerAfterAsk waits for the child's ask on n1, sends the parent's
	// steer, answers the ask, and returns the steer's outcome.
	steerAfterAsk := func(runID, child, msg string) (protocol.SubagentSteerData, error) {
		t.Helper()
		ask := c1.waitFor("the ui_request of child "+child, of(protocol.TypeUIRequest, child)).(*protocol.UIRequest)
		// The ask can reach n1 before n3's word that the run is active
		// does (a steer before that is CONFLICT, the run starting).
		waitRun(t, n1, parent.AgentID, runID, "n1 shows run "+runID+" active", func(r protocol.RunSnapshot) bool {
			return r.State == protocol.RunActive
		})
		type result struct {
			data protocol.SubagentSteerData
			err  error
		}
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*clusterWait)
			defer cancel()
			var r result
			r.err = cs.c.Call(ctx, &protocol.SubagentSteer{Header: protocol.Header{Type: protocol.TypeSubagentSteer},
				ParentAgentID: parent.AgentID, Target: runID, Message: msg}, &r.data)
			done <- r
		}()
		if err := c1.try(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: child},
			RequestID: ask.RequestID, Value: json.RawMessage(`"true"`)}); err != nil {
			t.Fatalf("n1's answer to the child's ask: %v", err)
		}
		r := <-done
		return r.data, r.err
	}
	steersOf := func(runID string) []protocol.RunSteer {
		t.Helper()
		var shown protocol.OpJob
		c1.call(&protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: runID}, &shown)
		for _, r := range shown.Runs {
			if r.RunID == runID {
				return r.Steers
			}
		}
		t.Fatalf("jobs.show %s: no such run in %+v", runID, shown)
		return nil
	}

	// 1. Injected: answered with the turn, recorded before the answer.
	run1, child1 := spawn("steered", "sim: ask confirm Go on\nsim: sleep 4000\nsim: say base")
	got, err := steerAfterAsk(run1, child1, "sim: say steered from n1")
	if err != nil || got.Status != protocol.SteerInjected || got.TurnID == "" || got.RunID != run1 || got.CorrelationID == "" {
		t.Fatalf("subagent.steer of the run on n3: %+v, %v (want injected with its turn)", got, err)
	}
	if s := steersOf(run1); len(s) != 1 || s[0].CorrelationID != got.CorrelationID || s[0].Status != protocol.SteerInjected ||
		s[0].TurnID != got.TurnID || s[0].Source != protocol.SteerSourceParent || s[0].At == 0 {
		t.Fatalf("run's steers on n1 when the steer was answered: %+v (want %+v)", s, got)
	}
	r1 := waitRun(t, n1, parent.AgentID, run1, "run 1 ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r1.State != protocol.RunCompleted || r1.Node != "n3" || !strings.Contains(r1.FinalText, "steered from n1") {
		t.Fatalf("run 1: %+v (want completed on n3, its final text showing the steer)", r1)
	}

	// 2. A person's steer of the child, sent to n1 and forwarded to n3:
	// answered there with the turn, recorded on n1 (source client) before
	// the answer, as a person's steer of a local child is.
	run3, child3 := spawn("person", "sim: ask confirm Go on\nsim: sleep 4000\nsim: say base")
	ask := c1.waitFor("the ui_request of child "+child3, of(protocol.TypeUIRequest, child3)).(*protocol.UIRequest)
	waitRun(t, n1, parent.AgentID, run3, "n1 shows run 3 active", func(r protocol.RunSnapshot) bool { return r.State == protocol.RunActive })
	// A steer is a command of an attached client (§10.3): the person
	// attaches to the child through n1.
	var att protocol.AgentAttachData
	cs.call(attachCmd(child3), &att)
	type steered struct {
		data protocol.SteerData
		err  error
	}
	done := make(chan steered, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*clusterWait)
		defer cancel()
		var r steered
		r.err = cs.c.Call(ctx, &protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, AgentID: child3},
			Message: "sim: say a person steered"}, &r.data)
		done <- r
	}()
	if err := c1.try(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: child3},
		RequestID: ask.RequestID, Value: json.RawMessage(`"true"`)}); err != nil {
		t.Fatalf("n1's answer to the child's ask: %v", err)
	}
	hs := <-done
	if hs.err != nil || hs.data.TurnID == "" {
		t.Fatalf("a person's steer of the child on n3: %+v, %v (want its turn)", hs.data, hs.err)
	}
	if s := steersOf(run3); len(s) != 1 || s[0].Source != protocol.SteerSourceClient || s[0].Status != protocol.SteerInjected ||
		s[0].TurnID != hs.data.TurnID || s[0].CorrelationID == "" || s[0].At == 0 {
		t.Fatalf("run 3's steers on n1 when the person's steer was answered: %+v (want it, source client)", s)
	}
	r3 := waitRun(t, n1, parent.AgentID, run3, "run 3 ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r3.State != protocol.RunCompleted || !strings.Contains(r3.FinalText, "a person steered") {
		t.Fatalf("run 3: %+v (want completed, its final text showing the person's steer)", r3)
	}

	// 3. The turn fails before the steer is taken: CONFLICT.
	run2, child2 := spawn("failing", "sim: ask confirm Go on\nsim: fail upstream broke")
	got, err = steerAfterAsk(run2, child2, "sim: say ghost")
	switch {
	case err == nil && got.Status == protocol.SteerConflict:
		// It crossed to n3: recorded against the run on n1.
		if s := steersOf(run2); len(s) != 1 || s[0].Status != protocol.SteerConflict || s[0].Source != protocol.SteerSourceParent {
			t.Fatalf("run 2's steers: %+v", s)
		}
	case protocol.CodeOf(err) == protocol.CodeConflict:
		// n1 already knew the run ended.
	default:
		t.Fatalf("subagent.steer of a turn that failed: %+v, %v (want conflict)", got, err)
	}
	r2 := waitRun(t, n1, parent.AgentID, run2, "run 2 ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r2.State != protocol.RunFailed || strings.Contains(r2.FinalText, "ghost") {
		t.Fatalf("run 2: %+v", r2)
	}
}

// TestClusterRunsSteerHere: a run the parent's own node claimed (n1 is the
// only node that claims) records its steers on that node as a run of one
// node does: the parent's subagent.steer (source parent) and a person's
// steer of the child (source client), each before it is answered.
func TestClusterRunsSteerHere(t *testing.T) {
	n1, c1, cs, parent := steerCluster(t, 0)
	spawn := func(name string) (runID, child string) {
		t.Helper()
		var job protocol.SubagentCreateData
		c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
			Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: name,
				Task: "sim: ask confirm Go on\nsim: sleep 3000\nsim: say base"}}}, &job)
		return job.Runs[0].RunID, job.Runs[0].AgentID
	}
	steersOf := func(runID string) []protocol.RunSteer {
		t.Helper()
		var shown protocol.OpJob
		c1.call(&protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: runID}, &shown)
		for _, r := range shown.Runs {
			if r.RunID == runID {
				return r.Steers
			}
		}
		t.Fatalf("jobs.show %s: no such run in %+v", runID, shown)
		return nil
	}
	// steerDuringAsk sends steer while the child's ask holds its turn,
	// answers the ask (the sleep after it leaves the steer time to reach
	// the turn), and returns the steer's error. With attach, cs attaches
	// to the child first, once the ask went to the parent's client (an
	// interactive client of the child's own, attached before the ask,
	// would be asked instead).
	steerDuringAsk := func(runID, child string, attach bool, steer protocol.Typed, data any) error {
		t.Helper()
		ask := c1.waitFor("the child's ask", of(protocol.TypeUIRequest, child)).(*protocol.UIRequest)
		waitRun(t, n1, parent.AgentID, runID, "the run is active", func(r protocol.RunSnapshot) bool { return r.State == protocol.RunActive })
		if attach {
			var att protocol.AgentAttachData
			cs.call(attachCmd(child), &att) // a steer is an attached client's command
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*clusterWait)
			defer cancel()
			done <- cs.c.Call(ctx, steer, data)
		}()
		if err := c1.try(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: child},
			RequestID: ask.RequestID, Value: json.RawMessage(`"true"`)}); err != nil {
			t.Fatalf("the answer to the child's ask: %v", err)
		}
		return <-done
	}

	run1, child1 := spawn("parent-steered")
	var ps protocol.SubagentSteerData
	if err := steerDuringAsk(run1, child1, false, &protocol.SubagentSteer{Header: protocol.Header{Type: protocol.TypeSubagentSteer},
		ParentAgentID: parent.AgentID, Target: run1, Message: "sim: say parent steered"}, &ps); err != nil || ps.Status != protocol.SteerInjected {
		t.Fatalf("subagent.steer of the run n1 claimed: %+v, %v", ps, err)
	}
	if s := steersOf(run1); len(s) != 1 || s[0].Source != protocol.SteerSourceParent || s[0].TurnID != ps.TurnID || s[0].CorrelationID != ps.CorrelationID {
		t.Fatalf("steers when the parent's steer was answered: %+v (want it)", s)
	}
	if r := waitRun(t, n1, parent.AgentID, run1, "run 1 ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() }); r.Node != "n1" {
		t.Fatalf("run 1: %+v (want it claimed by n1)", r)
	}

	run2, child2 := spawn("person-steered")
	var hs protocol.SteerData
	if err := steerDuringAsk(run2, child2, true, &protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, AgentID: child2},
		Message: "sim: say a person steered"}, &hs); err != nil || hs.TurnID == "" {
		t.Fatalf("a person's steer of the child: %+v, %v", hs, err)
	}
	if s := steersOf(run2); len(s) != 1 || s[0].Source != protocol.SteerSourceClient || s[0].TurnID != hs.TurnID || s[0].Status != protocol.SteerInjected {
		t.Fatalf("steers when the person's steer was answered: %+v (want it)", s)
	}
}

// steerCluster starts three nodes of which only nodes[claimer] claims runs,
// and on n1 a parent in a repository with an origin, attached by c1 (the
// parent's person); cs is a second client of n1's, for steers.
func steerCluster(t *testing.T, claimer int) (n1 *daemon, c1, cs *evConn, parent protocol.AgentCreateData) {
	t.Helper()
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := make([]*daemon, 3)
	for i := range nodes {
		var args []string
		if i != claimer {
			args = []string{"--cluster.claim-runs=false"}
		}
		nodes[i] = runsNodeWith(t, mesh, i, newHome(t), token, args...)
	}
	allAlive(t, nodes)
	n1 = nodes[0]
	repo, _ := originRepo(t)
	c1, cs = dialEvents(t, n1), dialEvents(t, n1)
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)
	c1.call(attachCmd(parent.AgentID), &protocol.AgentAttachData{})
	return n1, c1, cs, parent
}
