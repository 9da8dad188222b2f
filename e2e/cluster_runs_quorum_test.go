//go:build linux

package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterRunsNoQuorum: a create whose cluster records cannot be
// written (two of three nodes down: no quorum) answers TIMEOUT and leaves
// nothing to run: the branch it pushed is removed from origin, no job is
// kept on the parent's node, and once the cluster is whole again nothing
// of it is on the claim queue. (Its records themselves may be there: a
// write whose acknowledgement did not come may commit once the nodes are
// back, as Raft's leader keeps it in its log. They are held off the queue,
// so no node ever runs what the create refused, and the parent's node
// sweeps them once they are an hour old: shown with such records written
// as they would commit, and n1 restarted.)
func TestClusterRunsNoQuorum(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	natsAddr := freeAddr(t)
	nodes := make([]*daemon, 3)
	for i := range nodes {
		extra := []string{"--cluster.claim-runs=false"}
		if i == 0 {
			extra = append(extra, "--cluster.client-listen", natsAddr)
		}
		nodes[i] = clusterNode(t, mesh, i, homes[i], token, extra...)
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	repo, origin := originRepo(t)
	c1, _ := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)
	// A first job opens the records on n1 (and shows the path works).
	var first protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Name: "first", Task: "sim: say first", Isolation: protocol.IsolationWorkspace}, &first)
	before := wsGit(t, origin, "for-each-ref", "--format=%(refname)", "refs/heads/")

	for _, d := range nodes[1:] {
		d.kill()
		d.waitExit(t, exitTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	err := c1.Call(ctx, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace,
		Tasks: []protocol.TaskSpec{{Name: "lost1", Task: "sim: say x"}, {Name: "lost2", Task: "sim: say y"}}}, &protocol.SubagentCreateData{})
	if protocol.CodeOf(err) != protocol.CodeTimeout || !strings.Contains(err.Error(), "record") {
		t.Fatalf("a create without a quorum: %v, want TIMEOUT naming the record", err)
	}
	if refs := wsGit(t, origin, "for-each-ref", "--format=%(refname)", "refs/heads/"); refs != before {
		t.Fatalf("origin's branches after the failed create: %q, want %q", refs, before)
	}
	var st protocol.SubagentStatusData
	call(t, c1, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent.AgentID}, &st)
	if len(st.Jobs) != 1 || st.Jobs[0].JobID != first.JobID {
		t.Fatalf("jobs on n1 after the failed create: %+v", st.Jobs)
	}

	// The cluster whole again: only the first job has records.
	for i := 1; i < 3; i++ {
		nodes[i] = clusterNode(t, mesh, i, homes[i], token, "--cluster.claim-runs=false")
	}
	for _, d := range nodes[1:] {
		d.waitServing()
	}
	rec := recordstest.Dial(t, "nats://"+natsAddr, token, records.Options{Replicas: 3})
	// Right after the restarts a stream's new leader may answer a listing
	// before it applied what it committed (docs/cluster.md, "Stale
	// reads"). A sentinel written now, through a leader that can commit,
	// comes after every record there is: a listing that holds it holds
	// them all.
	eventually(t, clusterWait, "a sentinel job record written", func() bool {
		_, err := rec.Jobs.Create(context.Background(), "job-sentinel", records.JobRecord{JobID: "job-sentinel", ParentAgentID: "agent-sentinel"})
		return err == nil || errors.Is(err, records.ErrExists)
	})
	eventually(t, clusterWait, "a sentinel run record written", func() bool {
		_, err := rec.Runs.Create(context.Background(), records.RunKey("job-sentinel", "run-sentinel"),
			records.RunRecord{RunID: "run-sentinel", JobID: "job-sentinel", Node: "n1", State: protocol.RunCompleted})
		return err == nil || errors.Is(err, records.ErrExists)
	})
	var jobs []records.Entry[records.JobRecord]
	eventually(t, clusterWait, "the job records listed, the sentinel with them", func() bool {
		all, err := rec.Jobs.List(context.Background(), "")
		jobs = jobs[:0]
		seen := false
		for _, e := range all {
			if e.Value.JobID == "job-sentinel" {
				seen = true
			} else {
				jobs = append(jobs, e)
			}
		}
		return err == nil && seen
	})
	if len(jobs) == 0 || jobs[0].Value.JobID != first.JobID {
		t.Fatalf("job records after the failed create: %+v", jobs)
	}
	var runs []records.Entry[records.RunRecord]
	eventually(t, clusterWait, "the run records listed, the sentinel with them", func() bool {
		all, err := rec.Runs.List(context.Background(), "")
		runs = runs[:0]
		seen := false
		for _, e := range all {
			if e.Value.JobID == "job-sentinel" {
				seen = true
			} else {
				runs = append(runs, e)
			}
		}
		return err == nil && seen
	})
	var claims []string
	eventually(t, clusterWait, "the claim queue listed", func() bool {
		claims, err = rec.Claims.Keys(context.Background(), "")
		return err == nil
	})
	for _, e := range runs {
		if e.Value.JobID == first.JobID {
			continue
		}
		if e.Value.State != protocol.RunQueued || e.Value.Node != "" {
			t.Fatalf("a run of the refused create was taken: %+v", e.Value)
		}
		if slices.Contains(claims, e.Key) {
			t.Fatalf("a run of the refused create is on the claim queue: %s", e.Key)
		}
	}

	// Such records do not stay: n1 sweeps, at its start and then
	// periodically, the records of its jobs it does not hold once they are
	// older than an hour. Here a refused create's records as they would
	// commit late (a job of n1 made two hours ago, its run held), then n1
	// restarted: they go, and the first job's stay.
	lateJob, lateRun := "job-latecommit", "run-latecommit"
	if _, err := rec.Jobs.Create(context.Background(), lateJob, records.JobRecord{JobID: lateJob, ParentAgentID: parent.AgentID, ParentNode: "n1",
		Strategy: protocol.StrategySingle, RunIDs: []string{lateRun}, CreatedAt: time.Now().Add(-2 * time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Runs.Create(context.Background(), records.RunKey(lateJob, lateRun), records.RunRecord{RunID: lateRun, JobID: lateJob,
		AgentID: "agent-late", Task: "sim: say late", State: protocol.RunQueued, Anywhere: true, QueuedAt: 1}); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	n1.kill()
	n1.waitExit(t, exitTimeout)
	n1 = clusterNode(t, mesh, 0, homes[0], token, "--cluster.claim-runs=false", "--cluster.client-listen", natsAddr)
	n1.waitServing()
	eventually(t, clusterWait, "n1 sweeps the late records of a job it does not hold", func() bool {
		_, jerr := rec.Jobs.Get(context.Background(), lateJob)
		_, rerr := rec.Runs.Get(context.Background(), records.RunKey(lateJob, lateRun))
		return errors.Is(jerr, records.ErrNotFound) && errors.Is(rerr, records.ErrNotFound)
	})
	if _, err := rec.Jobs.Get(context.Background(), first.JobID); err != nil {
		t.Fatalf("the first job's record after n1's sweep: %v", err)
	}
	if _, err := rec.Runs.Get(context.Background(), records.RunKey(first.JobID, first.Runs[0].RunID)); err != nil {
		t.Fatalf("the first job's run record after n1's sweep: %v", err)
	}
	if b, _ := n1.sd().Log(0); !strings.Contains(b, "cluster runs: swept the records of 1 job(s) this node does not hold") {
		t.Fatalf("n1's log does not say what it swept")
	}
}
