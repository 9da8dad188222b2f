//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterRunsRelaunch: subagent.relaunch of a child whose run ran on
// another node (docs/protocol.md §13 "Runs on other nodes"). The parent
// lives on n1, which claims no runs; its isolated child's first run is
// claimed by n2 or n3 (X) and writes one.txt. A relaunch that holds (by
// agent id) makes a duplicate CONFLICT and is stopped (cancelled). The
// parent relaunches the child again (by alias, its latest run now that
// pinned relaunch) with a new task: the same agent, a new job and run,
// queued; the run's record is pinned to X (the child's host, its
// incarnation, the first run's worktree) and X runs it, with the
// child's conversation before it (an attach through n1 shows both
// tasks' answers in one session); the run writes two.txt in the same
// worktree, on the same branch. n1 reports it once, workspace.diff on n1
// shows both files and workspace.merge brings them into the checkout.
// Each run is reported once. Another parent's relaunch is NOT_FOUND. Once X is SIGKILLed and dead, a relaunch answers
// NODE_UNAVAILABLE naming X (over the wire and from shardctl jobs
// relaunch), and nothing is written: the child's latest run is still the
// relaunched one, and the cluster holds the three jobs only.
func TestClusterRunsRelaunch(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	natsAddr := freeAddr(t)
	nodes := []*daemon{
		clusterNode(t, mesh, 0, homes[0], token, "--jobs.max-active", "1", "--shutdown.timeout", "1s",
			"--cluster.claim-runs=false", "--cluster.client-listen", natsAddr),
		runsNode(t, mesh, 1, homes[1], token),
		runsNode(t, mesh, 2, homes[2], token),
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	rec := recordstest.Dial(t, "nats://"+natsAddr, token, records.Options{Replicas: 3})
	repo, _ := originRepo(t)
	c1, events := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo, HeadlessPolicy: "queue"}, &parent)

	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: "worker",
			Task: "sim: tool write {\"path\":\"one.txt\",\"content\":\"one\\n\"}\nsim: say first task done"}}}, &job)
	first := job.Runs[0]
	// Whoever hosts the child answers its write requests (this test,
	// attached to it there), for both runs.
	for _, d := range nodes {
		allowWherever(t, d, first.AgentID)
	}
	r1 := waitRun(t, n1, parent.AgentID, first.RunID, "the first run ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	host := r1.Node
	if r1.State != protocol.RunCompleted || (host != "n2" && host != "n3") || r1.Workspace == nil {
		t.Fatalf("first run: %+v (want completed on n2 or n3)", r1)
	}
	wsID := r1.Workspace.WorkspaceID

	// A relaunch that holds (by its agent id): a duplicate is CONFLICT
	// while it lives, and a stop ends it cancelled.
	var held protocol.SubagentRelaunchData
	call(t, c1, &protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch}, ParentAgentID: parent.AgentID,
		Target: first.AgentID, Task: "sim: sleep 600000"}, &held)
	if err := dialEvents(t, n1).try(&protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch},
		ParentAgentID: parent.AgentID, Target: first.RunID, Task: "dup"}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("a duplicate relaunch of a child with a live run: %v, want CONFLICT", err)
	}
	var stopped protocol.SubagentStopData
	callReplicated(t, c1, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent.AgentID, Handle: first.Alias}, &stopped)
	if len(stopped.Cancelled) != 1 || stopped.Cancelled[0].RunID != held.RunID {
		t.Fatalf("subagent.stop of the held relaunch: %+v", stopped)
	}
	if r := waitRun(t, n1, parent.AgentID, held.RunID, "the held relaunch ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() }); r.State != protocol.RunCancelled {
		t.Fatalf("the held relaunch after its stop: %+v", r)
	}

	// The relaunch, by alias.
	var rl protocol.SubagentRelaunchData
	call(t, c1, &protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch}, ParentAgentID: parent.AgentID,
		Target: strings.ToUpper(first.Alias), Task: "sim: tool write {\"path\":\"two.txt\",\"content\":\"two\\n\"}\nsim: say second task done"}, &rl)
	if rl.AgentID != first.AgentID || rl.Alias != first.Alias || rl.RunID == first.RunID || rl.JobID == job.JobID || rl.State != protocol.RunQueued {
		t.Fatalf("relaunch = %+v (first run %+v)", rl, first)
	}
	rr := runRecord(t, rec, rl.JobID, rl.RunID).Value
	if rr.Host != host || rr.Worktree != first.RunID || rr.Incarnation != "1" || rr.Git == nil || rr.Git.Branch != r1.Workspace.Branch || rr.AgentID != first.AgentID {
		t.Fatalf("the relaunch's record: %+v (want pinned to %s, in run %s's worktree, on branch %s)", rr, host, first.RunID, r1.Workspace.Branch)
	}
	r2 := waitRun(t, n1, parent.AgentID, rl.RunID, "the relaunch ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r2.State != protocol.RunCompleted || r2.Node != host || r2.FinalText != "second task done" || r2.Workspace == nil || r2.Workspace.WorkspaceID != wsID {
		t.Fatalf("relaunched run: %+v (want completed on %s in workspace %s)", r2, host, wsID)
	}
	eventually(t, clusterWait, "the relaunch's completion event", func() bool {
		tr := events.transitions(rl.RunID)
		return len(tr) > 0 && strings.HasSuffix(tr[len(tr)-1], ">completed")
	})

	// One session: the child's conversation holds both tasks' answers.
	var att protocol.AgentAttachData
	ca := dialEvents(t, n1)
	ca.call(attachCmd(first.AgentID), &att)
	sy := ca.waitFor("the child's sync", of(protocol.TypeSync, first.AgentID)).(*protocol.Sync)
	window, _ := json.Marshal(sy.LiveWindow)
	if !strings.Contains(string(window), "first task done") || !strings.Contains(string(window), "second task done") {
		t.Fatalf("the child's conversation after the relaunch lacks a task's answer: %s", window)
	}

	// Its work is on n1: both files in the diff, and merged.
	var diff protocol.WorkspaceDiffData
	call(t, c1, &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: wsID}, &diff)
	if diff.Stats.Files != 2 || len(diff.Files) != 2 {
		t.Fatalf("workspace.diff after the relaunch: %+v", diff)
	}
	var merged protocol.WorkspaceMergeData
	call(t, c1, &protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: wsID,
		Strategy: protocol.MergeMerge}, &merged)
	for f, want := range map[string]string{"one.txt": "one\n", "two.txt": "two\n"} {
		if b, err := os.ReadFile(filepath.Join(repo, f)); err != nil || string(b) != want {
			t.Fatalf("after workspace.merge, %s in the main checkout: %q, %v (%+v)", f, b, err, merged)
		}
	}
	// Reported once each.
	eventually(t, clusterWait, "the three reports delivered", func() bool {
		got := reportsOf(t, homes[0])
		return got[first.RunID] > 0 && got[held.RunID] > 0 && got[rl.RunID] > 0
	})
	if got := reportsOf(t, homes[0]); got[first.RunID] != 1 || got[held.RunID] != 1 || got[rl.RunID] != 1 {
		t.Fatalf("reports %v, want one each of %s, %s and %s", got, first.RunID, held.RunID, rl.RunID)
	}
	if tr := events.transitions(rl.RunID); strings.Count(strings.Join(tr, " "), ">completed") != 1 {
		t.Fatalf("the relaunch's events: %v", tr)
	}

	// Another parent's relaunch of the child: NOT_FOUND.
	var other protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &other)
	for _, target := range []string{first.AgentID, first.Alias, rl.RunID} {
		if err := dialEvents(t, n1).try(&protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch},
			ParentAgentID: other.AgentID, Target: target, Task: "not yours"}); protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("another parent's relaunch of %s: %v, want NOT_FOUND", target, err)
		}
	}

	// The child's node dies: its relaunch is refused, naming it.
	x := nodes[1]
	if host == "n3" {
		x = nodes[2]
	}
	x.kill()
	x.waitExit(t, exitTimeout)
	waitNode(t, n1, "n1 sees "+host+" dead", host, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeDead })
	err := dialEvents(t, n1).try(&protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch},
		ParentAgentID: parent.AgentID, Target: rl.RunID, Task: "sim: say third"})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeNodeUnavailable || !strings.Contains(pe.Message, "node "+host+" is unavailable") {
		t.Fatalf("relaunch with %s dead: %v, want NODE_UNAVAILABLE", host, err)
	}
	if d, _ := pe.Data.(map[string]any); d["node"] != host {
		t.Fatalf("relaunch with %s dead: error data %#v, want node %s", host, pe.Data, host)
	}
	if r := n1.ctl("", "jobs", "relaunch", rl.RunID, "--task", "sim: say third"); r.code == 0 || !strings.Contains(r.stderr, "NODE_UNAVAILABLE") {
		t.Fatalf("shardctl jobs relaunch with %s dead: exit %d\n%s%s", host, r.code, r.stdout, r.stderr)
	}
	var st protocol.SubagentStatusData
	call(t, c1, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent.AgentID,
		Targets: []string{first.AgentID}}, &st)
	if len(st.Agents) != 1 || st.Agents[0].Run == nil || st.Agents[0].Run.RunID != rl.RunID {
		t.Fatalf("the child's status after the refused relaunch: %+v (want its latest run %s)", st, rl.RunID)
	}
	// (Read once the records' streams have their leaders again: one may
	// have been on the dead node.)
	var jobs []records.Entry[records.JobRecord]
	eventually(t, clusterWait, "the cluster's job records readable", func() bool {
		var err error
		jobs, err = rec.Jobs.List(context.Background(), "")
		return err == nil
	})
	if len(jobs) != 3 {
		t.Fatalf("the cluster's job records after the refusal: %+v (want the three jobs)", jobs)
	}
}

// TestClusterRunsRelaunchOnItsParentsNode: the anywhere run was claimed
// by the parent's own node (n1, the only node that claims): its child
// lives there, in n1's cluster worktree of the run's branch, not in the
// parent's workspace. Its relaunch is still an anywhere run pinned to n1
// (not a local run in that worktree, whose work would never reach the
// workspace): n1 claims it, the same agent goes on with its conversation,
// and workspace.diff on n1 shows both runs' work.
func TestClusterRunsRelaunchOnItsParentsNode(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	natsAddr := freeAddr(t)
	nodes := []*daemon{
		clusterNode(t, mesh, 0, homes[0], token, "--jobs.max-active", "1", "--shutdown.timeout", "1s",
			"--cluster.client-listen", natsAddr),
		runsNodeWith(t, mesh, 1, homes[1], token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 2, homes[2], token, "--cluster.claim-runs=false"),
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	rec := recordstest.Dial(t, "nats://"+natsAddr, token, records.Options{Replicas: 3})
	repo, _ := originRepo(t)
	c1, _ := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo, HeadlessPolicy: "queue"}, &parent)
	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: "worker",
			Task: "sim: tool write {\"path\":\"one.txt\",\"content\":\"one\\n\"}\nsim: say first task done"}}}, &job)
	first := job.Runs[0]
	allowWherever(t, n1, first.AgentID)
	r1 := waitRun(t, n1, parent.AgentID, first.RunID, "the first run ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r1.State != protocol.RunCompleted || r1.Node != "n1" || r1.Workspace == nil {
		t.Fatalf("first run: %+v (want completed on n1)", r1)
	}
	var rl protocol.SubagentRelaunchData
	call(t, c1, &protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch}, ParentAgentID: parent.AgentID,
		Target: first.AgentID, Task: "sim: tool write {\"path\":\"two.txt\",\"content\":\"two\\n\"}\nsim: say second task done"}, &rl)
	if rr := runRecord(t, rec, rl.JobID, rl.RunID).Value; rr.Host != "n1" || rr.Worktree != first.RunID {
		t.Fatalf("the relaunch's record: %+v (want pinned to n1, in run %s's worktree)", rr, first.RunID)
	}
	r2 := waitRun(t, n1, parent.AgentID, rl.RunID, "the relaunch ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r2.State != protocol.RunCompleted || r2.Node != "n1" || r2.FinalText != "second task done" {
		t.Fatalf("relaunched run: %+v (want completed on n1)", r2)
	}
	ca := dialEvents(t, n1)
	ca.call(attachCmd(first.AgentID), &protocol.AgentAttachData{})
	sy := ca.waitFor("the child's sync", of(protocol.TypeSync, first.AgentID)).(*protocol.Sync)
	if window, _ := json.Marshal(sy.LiveWindow); !strings.Contains(string(window), "first task done") || !strings.Contains(string(window), "second task done") {
		t.Fatalf("the child's conversation after the relaunch lacks a task's answer: %s", window)
	}
	var diff protocol.WorkspaceDiffData
	call(t, c1, &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: r1.Workspace.WorkspaceID}, &diff)
	if diff.Stats.Files != 2 || len(diff.Files) != 2 {
		t.Fatalf("workspace.diff after the relaunch: %+v", diff)
	}
}
