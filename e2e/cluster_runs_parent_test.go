//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
)

// freeAddr is a loopback address with a port free a moment ago (for a
// listener of a shardd flag that cannot report the port it bound).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// originRepo makes a repository on main with one commit whose remote
// "origin" is a bare repository (the remote every node reaches), main
// pushed there. It returns the checkout and the bare repository.
func originRepo(t *testing.T) (repo, origin string) {
	t.Helper()
	repo = wsRepo(t)
	origin = filepath.Join(shortTemp(t), "origin.git")
	wsGit(t, filepath.Dir(origin), "init", "-q", "--bare", "-b", "main", origin)
	wsGit(t, repo, "remote", "add", "origin", origin)
	wsGit(t, repo, "push", "-q", "origin", "main")
	return repo, origin
}

// runEvents collects the subagent_run_changed events a connection gets.
type runEvents struct {
	mu  sync.Mutex
	got []protocol.SubagentRunChanged
}

func collectRunEvents(t *testing.T, d *daemon) (*client.Conn, *runEvents) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ev := &runEvents{}
	go func() {
		for e := range c.Events() {
			if m, ok := e.Msg.(*protocol.SubagentRunChanged); ok {
				ev.mu.Lock()
				ev.got = append(ev.got, *m)
				ev.mu.Unlock()
			}
		}
	}()
	return c, ev
}

// transitions are the "prev>state" of run's events, in order.
func (ev *runEvents) transitions(run string) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.got {
		if e.RunID == run {
			out = append(out, string(e.PreviousState)+">"+string(e.State))
		}
	}
	return out
}

// player plays the node that claims and runs a run, through the
// cluster's records, as the claiming node's side will.
type player struct {
	t         *testing.T
	rec       *records.Records
	node, inc string
}

// claim claims the oldest claimable run for the player's node.
func (p player) claim() records.Entry[records.RunRecord] {
	p.t.Helper()
	var got []records.Entry[records.RunRecord]
	var err error
	// A node lost a moment ago may have led a bucket's stream: the
	// cluster answers again once it elected another leader. And a run is
	// on the claim queue only once its job committed on the parent's node
	// and its job actor queued it (docs/cluster.md, "Follow"), a moment
	// after the create was answered.
	eventually(p.t, clusterWait, p.node+" claims a run", func() bool {
		got, err = p.rec.Claim(context.Background(), p.node, p.inc, 1)
		return err == nil && len(got) > 0
	})
	if len(got) != 1 {
		p.t.Fatalf("%s claims a run: %d runs", p.node, len(got))
	}
	return got[0]
}

// write changes e's record as a compare-and-set, as the node running it.
func (p player) write(e *records.Entry[records.RunRecord], change func(*records.RunRecord)) {
	p.t.Helper()
	eventually(p.t, clusterWait, "write run "+e.Value.RunID, func() bool {
		run := e.Value
		change(&run)
		rev, err := p.rec.Runs.Update(context.Background(), e.Key, run, e.Revision)
		if err == nil {
			e.Value, e.Revision = run, rev
			return true
		}
		// The parent's node may have written a stop meanwhile, or the
		// cluster did not answer: read again and decide again.
		if cur, err := p.rec.Runs.Get(context.Background(), e.Key); err == nil {
			*e = cur
		}
		return false
	})
}

// start writes the run starting then active.
func (p player) start(e *records.Entry[records.RunRecord]) {
	p.t.Helper()
	now := time.Now().UnixMilli()
	p.write(e, func(r *records.RunRecord) { r.State, r.StartedAt = protocol.RunStarting, now })
	p.write(e, func(r *records.RunRecord) { r.State = protocol.RunActive })
}

// work commits a file on the run's branch in a clone of origin and
// pushes it; it returns the new head.
func (p player) work(e *records.Entry[records.RunRecord], file, text string) string {
	p.t.Helper()
	dir := filepath.Join(shortTemp(p.t), "clone")
	wsGit(p.t, filepath.Dir(dir), "clone", "-q", e.Value.Git.Remote, dir)
	wsGit(p.t, dir, "checkout", "-q", e.Value.Git.Branch)
	if got := wsGit(p.t, dir, "rev-parse", "HEAD"); got != e.Value.Git.Base {
		p.t.Fatalf("branch %s on origin at %s, want the base %s", e.Value.Git.Branch, got, e.Value.Git.Base)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
		p.t.Fatal(err)
	}
	wsGit(p.t, dir, "add", file)
	wsGit(p.t, dir, "commit", "-q", "-m", "work of "+e.Value.Name)
	wsGit(p.t, dir, "push", "-q", "origin", e.Value.Git.Branch)
	return wsGit(p.t, dir, "rev-parse", "HEAD")
}

// end writes the run's terminal record.
func (p player) end(e *records.Entry[records.RunRecord], state protocol.RunState, final, head string, stat *protocol.DiffStats) {
	p.t.Helper()
	p.write(e, func(r *records.RunRecord) {
		r.State, r.FinalText, r.EndedAt, r.LeaseUntil = state, final, time.Now().UnixMilli(), 0
		r.Usage = &protocol.RunUsage{Input: 10, Output: 5}
		if head != "" {
			g := *r.Git
			g.Head = head
			r.Git = &g
		}
		if r.Workspace != nil {
			ws := *r.Workspace
			ws.DiffStat = stat
			r.Workspace = &ws
		}
	})
}

// runRecord reads a run's record.
func runRecord(t *testing.T, rec *records.Records, job, run string) records.Entry[records.RunRecord] {
	t.Helper()
	var e records.Entry[records.RunRecord]
	eventually(t, clusterWait, "read run record "+run, func() bool {
		var err error
		e, err = rec.Runs.Get(context.Background(), records.RunKey(job, run))
		return err == nil
	})
	return e
}

// snapshotOf is run's snapshot in a subagent.wait answer.
func snapshotOf(data protocol.SubagentWaitData, run string) protocol.RunSnapshot {
	for _, r := range data.Runs {
		if r.RunID == run {
			return r
		}
	}
	return protocol.RunSnapshot{}
}

// waitRun waits until the parent's node shows run as want says
// (subagent.wait, no blocking, asked again on each try).
func waitRun(t *testing.T, d *daemon, parent, run, what string, want func(protocol.RunSnapshot) bool) protocol.RunSnapshot {
	t.Helper()
	var got protocol.RunSnapshot
	eventually(t, clusterWait, what, func() bool {
		c, err := dialQuiet(d)
		if err != nil {
			return false
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		zero := 0.0
		var data protocol.SubagentWaitData
		if c.Call(ctx, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent,
			Handles: []string{run}, Timeout: &zero}, &data) != nil {
			return false
		}
		got = snapshotOf(data, run)
		return want(got)
	})
	return got
}

// reportsOf counts the completion reports of each run in the parent's
// transcript on home (0 while it has none).
func reportsOf(t *testing.T, home string) map[string]int {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
	out := map[string]int{}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(home, "sessions", e.Name(), "session.jsonl"))
		if strings.Contains(string(b), "[subagent report]") {
			for id, n := range reportCounts(t, home, e.Name()) {
				out[id] += n
			}
		}
	}
	return out
}

// TestClusterRunsParentNode: a parent on n1 creates an isolated parallel job
// in a repository whose origin is a bare repository; its runs are
// published to the cluster (branches pushed at the base, records queued
// for any node), and this test plays the nodes that claim them through the
// records. n1 follows each record into its runs: the node on the
// snapshot, the wire events, subagent.wait's outcome, one report each, the
// pushed work fetched for workspace.diff and workspace.merge; a stop is
// written into the records (a claimed run asked to stop, an unclaimed one
// cancelled); a run held by n3 is interrupted when n3 dies and reported
// once; and runs survive a restart of n1 itself: one that ended while n1
// was down is reported once, one still running stays followed.
func TestClusterRunsParentNode(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	natsAddr := freeAddr(t)
	// No node claims runs itself: the test plays the nodes that do.
	noClaims := "--cluster.claim-runs=false"
	nodes := make([]*daemon, 3)
	for i := range nodes {
		extra := []string{noClaims}
		if i == 1 {
			extra = append(extra, "--cluster.client-listen", natsAddr)
		}
		nodes[i] = clusterNode(t, mesh, i, homes[i], token, extra...)
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	rec := recordstest.Dial(t, "nats://"+natsAddr, token, records.Options{Replicas: 3})
	on2 := player{t: t, rec: rec, node: "n2", inc: "1"}
	on3 := player{t: t, rec: rec, node: "n3", inc: "1"}

	repo, origin := originRepo(t)
	base := wsGit(t, repo, "rev-parse", "HEAD")
	c1, events := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)

	// The job: four isolated runs, published before the create answers.
	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace,
		Tasks: []protocol.TaskSpec{{Name: "a", Task: "sim: say a"}, {Name: "b", Task: "sim: say b"}, {Name: "c", Task: "sim: say c"}, {Name: "d", Task: "sim: say d"}}}, &job)
	jr, err := rec.Jobs.Get(context.Background(), job.JobID)
	if err != nil || jr.Value.ParentNode != "n1" || jr.Value.ParentAgentID != parent.AgentID || len(jr.Value.RunIDs) != 4 {
		t.Fatalf("job record %+v: %v", jr.Value, err)
	}
	for _, cr := range job.Runs {
		e := runRecord(t, rec, job.JobID, cr.RunID)
		r := e.Value
		if !r.Anywhere || r.State != protocol.RunQueued || r.Node != "" || r.AgentID != cr.AgentID || r.Task != "sim: say "+cr.Name ||
			r.Git == nil || r.Git.Remote != origin || r.Git.Base != base || r.Git.Branch == "" || len(r.Child) == 0 {
			t.Fatalf("run record of %s: %+v", cr.Name, r)
		}
		var child struct {
			AgentID       string `json:"agent_id"`
			ParentAgentID string `json:"parent_agent_id"`
		}
		if err := json.Unmarshal(r.Child, &child); err != nil || child.AgentID != cr.AgentID || child.ParentAgentID != parent.AgentID {
			t.Fatalf("child manifest of %s: %s (%v)", cr.Name, r.Child, err)
		}
		// Its branch is on origin at the base.
		if got := wsGit(t, origin, "rev-parse", "refs/heads/"+r.Git.Branch); got != base {
			t.Fatalf("branch %s on origin at %q, want %s", r.Git.Branch, got, base)
		}
	}
	// The parent's node never starts them itself: queued, no node.
	var st protocol.SubagentStatusData
	call(t, c1, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent.AgentID}, &st)
	if len(st.Jobs) != 1 || len(st.Jobs[0].Runs) != 4 {
		t.Fatalf("subagent.status: %+v", st)
	}
	for _, r := range st.Jobs[0].Runs {
		if r.State != protocol.RunQueued || r.Node != "" {
			t.Fatalf("run %s before any claim: %+v", r.Name, r)
		}
	}

	// Run a (the oldest) is claimed by n2, runs there, pushes its work
	// and completes.
	a := on2.claim()
	on2.start(&a)
	waitRun(t, n1, parent.AgentID, a.Value.RunID, "n1 shows run a active on n2", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunActive && r.Node == "n2"
	})
	// The run is n2's work: n1's load does not count it.
	since := time.Now().UnixMilli()
	st1 := waitNode(t, n1, "a heartbeat of n1 after run a started", "n1", func(n protocol.ClusterNode) bool { return n.HeartbeatAt > since })
	if n, _ := nodeOf(st1, "n1"); n.Load.Runs != 0 {
		t.Fatalf("n1's load with run a active on n2: %+v", n.Load)
	}
	head := on2.work(&a, "a.txt", "work of a\n")
	on2.end(&a, protocol.RunCompleted, "a is done", head, &protocol.DiffStats{Files: 1, Additions: 1})
	var waited protocol.SubagentWaitData
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	timeout := clusterWait.Seconds()
	if err := c1.Call(ctx, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent.AgentID,
		Handles: []string{a.Value.RunID}, Timeout: &timeout}, &waited); err != nil {
		t.Fatal(err)
	}
	ra := snapshotOf(waited, a.Value.RunID)
	if waited.TimedOut || ra.State != protocol.RunCompleted || ra.Node != "n2" || ra.FinalText != "a is done" || ra.Usage == nil ||
		ra.Workspace == nil || ra.Workspace.DiffStat == nil || ra.Workspace.DiffStat.Files != 1 {
		t.Fatalf("subagent.wait on run a: %+v (%+v)", ra, waited)
	}
	eventually(t, clusterWait, "run a's events", func() bool {
		return slices.Equal(events.transitions(a.Value.RunID), []string{"queued>starting", "starting>active", "active>completed"})
	})
	// Its work is here: the diff shows it, and it merges.
	var diff protocol.WorkspaceDiffData
	call(t, c1, &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: ra.Workspace.WorkspaceID}, &diff)
	if diff.Stats.Files != 1 || len(diff.Files) != 1 || diff.HeadSHA != head {
		t.Fatalf("workspace.diff of run a: %+v", diff)
	}
	var merged protocol.WorkspaceMergeData
	call(t, c1, &protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: ra.Workspace.WorkspaceID,
		Strategy: protocol.MergeMerge}, &merged)
	if b, err := os.ReadFile(filepath.Join(repo, "a.txt")); err != nil || string(b) != "work of a\n" {
		t.Fatalf("after workspace.merge, a.txt in the main checkout: %q, %v (%+v)", b, err, merged)
	}

	// Run b is claimed by n2 and stopped: the stop is written into its
	// record for n2, which ends it cancelled.
	b := on2.claim()
	on2.start(&b)
	waitRun(t, n1, parent.AgentID, b.Value.RunID, "n1 shows run b active on n2", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunActive && r.Node == "n2"
	})
	// Its child would live on n2 (this test only plays n2's part in the
	// records): a steer from n1 crosses to n2, which has no turn of the
	// run in flight: conflict, answered, not lost.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	var steered protocol.SubagentSteerData
	err = c1.Call(ctx2, &protocol.SubagentSteer{Header: protocol.Header{Type: protocol.TypeSubagentSteer}, ParentAgentID: parent.AgentID,
		Target: b.Value.RunID, Message: "hurry"}, &steered)
	if err != nil || steered.Status != protocol.SteerConflict || steered.RunID != b.Value.RunID {
		t.Fatalf("subagent.steer of a run on n2 with no child there: %+v, %v, want conflict", steered, err)
	}
	// (A relaunch of a's child would be pinned to n2, where it lives:
	// TestClusterRunsRelaunch.)
	var stopped protocol.SubagentStopData
	callReplicated(t, c1, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent.AgentID, Handle: b.Value.RunID}, &stopped)
	if len(stopped.Cancelled) != 1 || stopped.Cancelled[0].RunID != b.Value.RunID {
		t.Fatalf("subagent.stop of run b: %+v", stopped)
	}
	b = runRecord(t, rec, job.JobID, b.Value.RunID)
	if b.Value.StopRequestedAt == 0 || b.Value.StopStage != "abort" || b.Value.State != protocol.RunActive {
		t.Fatalf("run b's record after the stop: %+v", b.Value)
	}
	// n2 escalates the stop: the stage shows on the parent's node.
	on2.write(&b, func(r *records.RunRecord) { r.StopStage = "term" })
	eventually(t, clusterWait, "jobs.show shows run b's stop stage", func() bool {
		var shown protocol.OpJob
		call(t, c1, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: b.Value.RunID}, &shown)
		for _, r := range shown.Runs {
			if r.RunID == b.Value.RunID {
				return r.StopStage == "term" && r.StopRequestedAt != 0 && r.State == protocol.RunActive
			}
		}
		return false
	})
	on2.end(&b, protocol.RunCancelled, "", "", nil)
	rb := waitRun(t, n1, parent.AgentID, b.Value.RunID, "n1 shows run b cancelled", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunCancelled
	})
	// Its workspace is made all the same, at its branch as origin has it
	// (nothing pushed): active, not left creating.
	var wsb protocol.WorkspaceStatusData
	call(t, c1, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: rb.Workspace.WorkspaceID}, &wsb)
	if wsb.Workspace.State != protocol.WorkspaceStateActive || wsb.Workspace.HeadSHA != base {
		t.Fatalf("run b's workspace after its end with nothing pushed: %+v", wsb.Workspace)
	}

	// Run d was never claimed: its stop cancels it in its record, so no
	// node takes it.
	var left []protocol.CreatedRun
	for _, r := range job.Runs {
		if r.RunID != a.Value.RunID && r.RunID != b.Value.RunID {
			left = append(left, r)
		}
	}
	d := left[0]
	callReplicated(t, c1, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent.AgentID, Handle: d.RunID}, &stopped)
	if len(stopped.Cancelled) != 1 || stopped.Cancelled[0].State != protocol.RunCancelled {
		t.Fatalf("subagent.stop of unclaimed run d: %+v", stopped)
	}
	if e := runRecord(t, rec, job.JobID, d.RunID); e.Value.State != protocol.RunCancelled || e.Value.Node != "" {
		t.Fatalf("run d's record after the stop: %+v", e.Value)
	}

	// Run c, the last one, is claimed by n3 (never d: it is cancelled) and
	// runs there; n3 dies: whoever declares it dead interrupts c in its
	// record, and n1 reports it once.
	c := on3.claim()
	if c.Value.RunID != left[1].RunID {
		t.Fatalf("n3 claimed %s, want %s (d %s is cancelled)", c.Value.RunID, left[1].RunID, d.RunID)
	}
	if got, err := rec.Claim(context.Background(), "n2", "1", 4); err != nil || len(got) != 0 {
		t.Fatalf("a claim after every run was taken or cancelled: %d runs, %v", len(got), err)
	}
	on3.start(&c)
	waitRun(t, n1, parent.AgentID, c.Value.RunID, "n1 shows run c active on n3", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunActive && r.Node == "n3"
	})
	nodes[2].kill()
	nodes[2].waitExit(t, exitTimeout)
	rc := waitRun(t, n1, parent.AgentID, c.Value.RunID, "n1 shows run c interrupted", func(r protocol.RunSnapshot) bool {
		return r.State.Terminal()
	})
	if rc.State != protocol.RunInterrupted || !strings.Contains(rc.Error, "n3") {
		t.Fatalf("run c after n3 died: %+v", rc)
	}

	// Each ended run is reported to the parent once.
	ended := []string{a.Value.RunID, b.Value.RunID, c.Value.RunID, d.RunID}
	eventually(t, clusterWait, "the four reports delivered", func() bool {
		got := reportsOf(t, homes[0])
		for _, id := range ended {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})

	// The job ended, stopped by a client: its cluster record says when,
	// as jobs.show does on the parent's node.
	var shown protocol.OpJob
	call(t, c1, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: job.JobID}, &shown)
	if shown.EndedAt == 0 || shown.StoppedAt == 0 {
		t.Fatalf("jobs.show of the ended, stopped job: ended_at %d, stopped_at %d", shown.EndedAt, shown.StoppedAt)
	}
	eventually(t, clusterWait, "the job record's ended_at and stopped_at written", func() bool {
		jr, err = rec.Jobs.Get(context.Background(), job.JobID)
		return err == nil && jr.Value.EndedAt != 0
	})
	if jr.Value.EndedAt != shown.EndedAt || jr.Value.StoppedAt != shown.StoppedAt {
		t.Fatalf("job record ended_at %d stopped_at %d, jobs.show %d %d", jr.Value.EndedAt, jr.Value.StoppedAt, shown.EndedAt, shown.StoppedAt)
	}

	// n3 back; then n1, the parent's node, dies with two runs on n2: one
	// ends while n1 is down, the other still runs when it returns.
	nodes[2] = clusterNode(t, mesh, 2, homes[2], token, noClaims)
	nodes[2].waitServing()
	waitNode(t, n1, "n1 sees n3 back", "n3", func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive && n.Incarnation == 2 })
	var job2 protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace,
		Tasks: []protocol.TaskSpec{{Name: "e", Task: "sim: say e"}, {Name: "f", Task: "sim: say f"}}}, &job2)
	e := on2.claim()
	f := on2.claim()
	on2.start(&e)
	on2.start(&f)
	waitRun(t, n1, parent.AgentID, f.Value.RunID, "n1 shows run f active", func(r protocol.RunSnapshot) bool { return r.State == protocol.RunActive })
	// A chain stays on the parent's node, and dies with it.
	var chain protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyChain,
		Tasks:    []protocol.TaskSpec{{Name: "one", Task: "sim: sleep 60000"}, {Name: "two", Task: "sim: say two"}, {Name: "three", Task: "sim: say three"}}}, &chain)
	waitRun(t, n1, parent.AgentID, chain.Runs[0].RunID, "chain step one active on n1", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunActive && r.Node == "n1"
	})
	c1.Close()
	n1.kill()
	n1.waitExit(t, exitTimeout)
	on2.end(&e, protocol.RunCompleted, "e is done", "", nil)
	n1 = clusterNode(t, mesh, 0, homes[0], token, noClaims)
	n1.waitServing()
	re := waitRun(t, n1, parent.AgentID, e.Value.RunID, "the restarted n1 shows run e completed", func(r protocol.RunSnapshot) bool {
		return r.State.Terminal()
	})
	if re.State != protocol.RunCompleted || re.FinalText != "e is done" || re.Node != "n2" {
		t.Fatalf("run e after n1's restart: %+v", re)
	}
	if rf := waitRun(t, n1, parent.AgentID, f.Value.RunID, "run f", func(protocol.RunSnapshot) bool { return true }); rf.State != protocol.RunActive || rf.Node != "n2" {
		t.Fatalf("run f, still running on n2, after n1's restart: %+v", rf)
	}
	on2.end(&f, protocol.RunCompleted, "f is done", "", nil)
	waitRun(t, n1, parent.AgentID, f.Value.RunID, "the restarted n1 follows run f to its end", func(r protocol.RunSnapshot) bool {
		return r.State == protocol.RunCompleted && r.FinalText == "f is done"
	})
	// The chain: the step that ran when n1 died is interrupted, the rest
	// cancelled, never started (a restart's rule, docs/protocol.md §10.3).
	for i, want := range []protocol.RunState{protocol.RunInterrupted, protocol.RunCancelled, protocol.RunCancelled} {
		if r := waitRun(t, n1, parent.AgentID, chain.Runs[i].RunID, "chain step", func(protocol.RunSnapshot) bool { return true }); r.State != want {
			t.Fatalf("chain step %d after n1's restart: %+v, want %s", i+1, r, want)
		}
		ended = append(ended, chain.Runs[i].RunID)
	}
	ended = append(ended, e.Value.RunID, f.Value.RunID)
	eventually(t, clusterWait, "the reports of e, f and the chain delivered", func() bool {
		got := reportsOf(t, homes[0])
		for _, id := range ended {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	// The second job ended while n1 was down for one run, after for the
	// other: its record says when, and it was never stopped.
	eventually(t, clusterWait, "the second job record's ended_at written", func() bool {
		jr, err = rec.Jobs.Get(context.Background(), job2.JobID)
		return err == nil && jr.Value.EndedAt != 0
	})
	if jr.Value.StoppedAt != 0 {
		t.Fatalf("the second job's record: stopped_at %d, never stopped", jr.Value.StoppedAt)
	}
	// Once each, for every run of both jobs: nothing was reported twice,
	// by the follow replaying a record or by the restart.
	got := reportsOf(t, homes[0])
	for _, id := range ended {
		if got[id] != 1 {
			t.Fatalf("run %s reported %d times (%v)", id, got[id], got)
		}
	}
	if len(got) != len(ended) {
		t.Fatalf("reports of %v, want one per run of %v", got, ended)
	}
}

// TestClusterRunsSpread: the claiming nodes are the real ones. Three
// shardd nodes with room for one run each; a parent on n1 creates an
// isolated parallel job of four runs in a repository whose origin is a
// bare repository. The runs land on at least two nodes, each writes its
// file there and pushes its branch, and on n1 every run completes with
// the node it ran on, its work in its workspace (workspace.diff), its
// events, and one completion report.
func TestClusterRunsSpread(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	nodes := make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = runsNode(t, mesh, i, homes[i], token)
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	// Every node claims before the job is made: a node serves, and is
	// alive, before its run records are open, and these runs end so fast
	// that the first claimer would take them all, one after another.
	for i, d := range nodes {
		eventually(t, clusterWait, fmt.Sprintf("n%d takes runs", i+1), func() bool {
			b, err := d.sd().Log(0)
			return err == nil && strings.Contains(b, "cluster: this node takes runs now")
		})
	}
	repo, _ := originRepo(t)
	c1, events := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo, HeadlessPolicy: "queue"}, &parent)
	const n = 4
	var tasks []protocol.TaskSpec
	for i := range n {
		tasks = append(tasks, protocol.TaskSpec{Name: fmt.Sprintf("t%d", i), Task: fmt.Sprintf(
			"sim: tool write {\"path\":\"out-%d.txt\",\"content\":\"from run %d\\n\"}\nsim: say run %d done", i, i, i)})
	}
	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: tasks}, &job)
	// Each child asks to write its file: whoever hosts it is answered by
	// this test, attached to it on that node (the others refuse the
	// attach: another node's agent).
	var handles []string
	for _, r := range job.Runs {
		handles = append(handles, r.RunID)
		for _, d := range nodes {
			allowWherever(t, d, r.AgentID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*clusterWait)
	defer cancel()
	timeout := (3 * clusterWait).Seconds()
	var waited protocol.SubagentWaitData
	if err := c1.Call(ctx, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent.AgentID,
		Handles: handles, Mode: "all", Timeout: &timeout}, &waited); err != nil || waited.TimedOut {
		for _, h := range homes {
			entries, _ := os.ReadDir(filepath.Join(h, "sessions"))
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(h, "sessions", e.Name(), "session.jsonl"))
				t.Logf("%s session %s:\n%s", h, e.Name(), b)
			}
			logs, _ := os.ReadDir(filepath.Join(h, "logs", "agents"))
			for _, e := range logs {
				b, _ := os.ReadFile(filepath.Join(h, "logs", "agents", e.Name()))
				t.Logf("%s agent log %s:\n%s", h, e.Name(), b)
			}
			if st, err := listOn(t, nodes[0], protocol.AgentList{}); err == nil {
				for _, a := range st.Agents {
					t.Logf("agent %s on %s: status %s runtime %s", a.AgentID, a.Node, a.Status, a.RuntimeState)
				}
			}
		}
		t.Fatalf("subagent.wait: %v (%+v)", err, waited)
	}
	on := map[string]int{}
	for i, cr := range job.Runs {
		r := snapshotOf(waited, cr.RunID)
		if r.State != protocol.RunCompleted || r.FinalText != fmt.Sprintf("run %d done", i) || r.Node == "" || r.Workspace == nil {
			t.Fatalf("run %d: %+v (wait %+v)", i, r, waited)
		}
		on[r.Node]++
		var diff protocol.WorkspaceDiffData
		call(t, c1, &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: r.Workspace.WorkspaceID}, &diff)
		if len(diff.Files) != 1 || diff.Stats.Files != 1 {
			t.Fatalf("workspace.diff of run %d (on %s): %+v", i, r.Node, diff)
		}
		eventually(t, clusterWait, fmt.Sprintf("run %d's completion event", i), func() bool {
			tr := events.transitions(cr.RunID)
			return len(tr) > 0 && strings.HasSuffix(tr[len(tr)-1], ">completed")
		})
	}
	if len(on) < 2 {
		t.Fatalf("the runs ran on %v: want at least two nodes", on)
	}
	eventually(t, clusterWait, "the four reports delivered", func() bool {
		got := reportsOf(t, homes[0])
		for _, h := range handles {
			if got[h] == 0 {
				return false
			}
		}
		return true
	})
	got := reportsOf(t, homes[0])
	for _, h := range handles {
		if got[h] != 1 {
			t.Fatalf("run %s reported %d times (%v)", h, got[h], got)
		}
	}
	for _, h := range handles {
		if tr := events.transitions(h); strings.Count(strings.Join(tr, " "), ">completed") != 1 {
			t.Fatalf("run %s's events: %v", h, tr)
		}
	}
}

// TestClusterRunsDeadline: a run another node runs past jobs.run_timeout
// (as the parent's node counts it, from the start its node recorded) is
// asked to stop through its record; the node ends it cancelled, and the
// parent's node reports it timed_out, once. A stop of the whole job then
// cancels its other run, which no node claimed, in its record.
func TestClusterRunsDeadline(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	natsAddr := freeAddr(t)
	nodes := make([]*daemon, 3)
	for i := range nodes {
		extra := []string{"--cluster.claim-runs=false", "--jobs.run-timeout", "3s"}
		if i == 1 {
			extra = append(extra, "--cluster.client-listen", natsAddr)
		}
		nodes[i] = clusterNode(t, mesh, i, homes[i], token, extra...)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	n1 := nodes[0]
	rec := recordstest.Dial(t, "nats://"+natsAddr, token, records.Options{Replicas: 3})
	on2 := player{t: t, rec: rec, node: "n2", inc: "1"}
	repo, origin := originRepo(t)
	c1, events := collectRunEvents(t, n1)
	var parent protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)

	// A create the remote refuses in part (its second branch) leaves
	// nothing: not the first branch, not a record, not a job here.
	hook := filepath.Join(origin, "hooks", "update")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncase \"$1\" in *refused*) echo refused >&2; exit 1;; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	err := c1.Call(ctx, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace,
		Tasks: []protocol.TaskSpec{{Name: "taken", Task: "sim: say taken"}, {Name: "refused", Task: "sim: say refused"}}}, &protocol.SubagentCreateData{})
	if protocol.CodeOf(err) != protocol.CodeConflict || !strings.Contains(err.Error(), "push") {
		t.Fatalf("a create whose push the remote refuses: %v, want CONFLICT naming the push", err)
	}
	if refs := wsGit(t, origin, "for-each-ref", "--format=%(refname)", "refs/heads/"); refs != "refs/heads/main" {
		t.Fatalf("origin's branches after the refused create: %q", refs)
	}
	if jobs, err := rec.Jobs.List(context.Background(), ""); err != nil || len(jobs) != 0 {
		t.Fatalf("job records after the refused create: %v, %v", jobs, err)
	}
	if runs, err := rec.Runs.List(context.Background(), ""); err != nil || len(runs) != 0 {
		t.Fatalf("run records after the refused create: %v, %v", runs, err)
	}
	var st protocol.SubagentStatusData
	call(t, c1, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent.AgentID}, &st)
	if len(st.Jobs) != 0 {
		t.Fatalf("jobs on n1 after the refused create: %+v", st.Jobs)
	}
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}

	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace,
		Tasks: []protocol.TaskSpec{{Name: "slow", Task: "sim: sleep 60000"}, {Name: "never", Task: "sim: say never"}}}, &job)
	e := on2.claim()
	if r := runRecord(t, rec, job.JobID, e.Value.RunID); r.Value.TimeoutMs != 3000 {
		t.Fatalf("run record's timeout_ms = %d, want 3000", r.Value.TimeoutMs)
	}
	on2.start(&e)
	// The deadline passes: the parent's node asks n2 to stop the run.
	eventually(t, clusterWait, "the deadline's stop written into the record", func() bool {
		e = runRecord(t, rec, job.JobID, e.Value.RunID)
		return e.Value.StopRequestedAt != 0 && e.Value.StopStage == "abort"
	})
	if e.Value.StopRequestedAt < e.Value.StartedAt+3000 {
		t.Fatalf("stop requested at %d, before the deadline %d", e.Value.StopRequestedAt, e.Value.StartedAt+3000)
	}
	on2.end(&e, protocol.RunCancelled, "", "", nil)
	r := waitRun(t, n1, parent.AgentID, e.Value.RunID, "the run ended on n1", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r.State != protocol.RunTimedOut || r.Error != "deadline exceeded" || r.Node != "n2" {
		t.Fatalf("the run past its deadline: %+v", r)
	}

	// Stop the job: its unclaimed run is cancelled in its record.
	var stopped protocol.SubagentStopData
	callReplicated(t, c1, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent.AgentID, Handle: job.JobID}, &stopped)
	other := job.Runs[0].RunID
	if other == e.Value.RunID {
		other = job.Runs[1].RunID
	}
	if stopped.JobID != job.JobID || len(stopped.Cancelled) != 1 || stopped.Cancelled[0].RunID != other || stopped.Cancelled[0].State != protocol.RunCancelled {
		t.Fatalf("subagent.stop of the job: %+v", stopped)
	}
	if o := runRecord(t, rec, job.JobID, other); o.Value.State != protocol.RunCancelled {
		t.Fatalf("the unclaimed run's record after the job's stop: %+v", o.Value)
	}
	eventually(t, clusterWait, "both reports delivered", func() bool {
		got := reportsOf(t, homes[0])
		return got[e.Value.RunID] == 1 && got[other] == 1
	})
	if tr := events.transitions(e.Value.RunID); strings.Join(tr, " ") != "queued>starting starting>active active>timed_out" {
		t.Fatalf("the timed out run's events: %v", tr)
	}
}

// allowWherever attaches to agentID on d once d hosts it, and allows every
// permission it asks. On a node that does not host it the attach is
// refused UNSUPPORTED (another node's agent) and it gives up; NOT_FOUND
// (nobody has listed it yet) is asked again. It returns at once.
func allowWherever(t *testing.T, d *daemon, agentID string) {
	t.Helper()
	c, err := dialQuiet2(d)
	if err != nil {
		t.Errorf("dial %s: %v", d.home, err)
		return
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		var data protocol.AgentAttachData
		for c.Err() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID}}, &data)
			cancel()
			if err == nil || protocol.CodeOf(err) != protocol.CodeNotFound {
				return // attached, or another node's agent, or the test ended
			}
			time.Sleep(50 * time.Millisecond) // adopted a moment after its claim
		}
	}()
	go func() {
		answer := func(requestID string) {
			_ = c.Send(&protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: agentID},
				RequestID: requestID, Decision: protocol.DecisionAllow})
		}
		for ev := range c.Events() {
			switch m := ev.Msg.(type) {
			case *protocol.Sync:
				for _, raw := range m.PendingRequests {
					var p struct {
						Type      string `json:"type"`
						RequestID string `json:"request_id"`
					}
					if json.Unmarshal(raw, &p) == nil && p.Type == protocol.TypePermissionRequest {
						answer(p.RequestID)
					}
				}
			case *protocol.PermissionRequest:
				if m.AgentID == agentID {
					answer(m.RequestID)
				}
			}
		}
	}()
}
