//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// runsNode starts shardd as node i of mesh for the runs tests: room for
// one run (jobs.max_active 1), and a NATS client port of its own on
// loopback, which the test (playing the parent's node) connects to.
func runsNode(t *testing.T, mesh *clustertest.Mesh, i int, home, token string) *daemon {
	t.Helper()
	return runsNodeWith(t, mesh, i, home, token)
}

var natsClientsRE = regexp.MustCompile(`cluster: NATS clients at (nats://127\.0\.0\.1:\d+)`)

// natsURL is the NATS client URL d logged when it joined (its last).
func natsURL(t *testing.T, d *daemon) string {
	t.Helper()
	var url string
	eventually(t, clusterWait, "the node logs its NATS client URL", func() bool {
		b, err := d.sd().Log(0)
		m := natsClientsRE.FindAllStringSubmatch(b, -1)
		if err != nil || len(m) == 0 {
			return false
		}
		url = m[len(m)-1][1]
		return true
	})
	return url
}

// runsOrigin is the shared remote (a bare repository) with main at one
// commit, and a checkout the test pushes the runs' branches from.
type runsOrigin struct {
	bare, work, base string
}

func newRunsOrigin(t *testing.T) runsOrigin {
	t.Helper()
	work := wsRepo(t)
	bare := filepath.Join(shortTemp(t), "origin.git")
	wsGit(t, work, "init", "-q", "--bare", bare)
	wsGit(t, work, "push", "-q", bare, "HEAD:refs/heads/main")
	return runsOrigin{bare: bare, work: work, base: wsGit(t, work, "rev-parse", "HEAD")}
}

// queueRuns plays the parent's node: it pushes each run's branch at the
// base, writes the job and its anywhere runs (the child's manifest a
// store.Agent whose requests wait in queue for a client, as a subagent's
// do when nobody can answer), and returns the runs' keys.
func queueRuns(t *testing.T, rec *records.Records, o runsOrigin, jobID string, tasks []string) []string {
	t.Helper()
	var ids []string
	for i := range tasks {
		ids = append(ids, fmt.Sprintf("run-%s-%d", strings.TrimPrefix(jobID, "job-"), i))
	}
	now := time.Now().UnixMilli()
	if _, err := rec.Jobs.Create(t.Context(), jobID, records.JobRecord{JobID: jobID, ParentAgentID: "agent-parent",
		ParentNode: "n0", Strategy: protocol.StrategyParallel, RunIDs: ids, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, task := range tasks {
		branch := "shard/" + ids[i]
		wsGit(t, o.work, "push", "-q", o.bare, o.base+":refs/heads/"+branch)
		agentID := "agent-" + ids[i]
		child, err := json.Marshal(store.Agent{AgentID: agentID, SessionID: "sess-" + ids[i], Cwd: "/parent/node/path",
			Name: fmt.Sprintf("task-%d", i), ParentAgentID: "agent-parent", Depth: 1, CreatedAt: now,
			HeadlessPolicy: "queue", WorkspaceID: "workspace-" + ids[i]})
		if err != nil {
			t.Fatal(err)
		}
		run := records.RunRecord{RunID: ids[i], JobID: jobID, Index: i, Name: fmt.Sprintf("task-%d", i), AgentID: agentID,
			Task: task, State: protocol.RunQueued, Anywhere: true, QueuedAt: now + int64(i),
			Git: &records.RunGit{Remote: o.bare, Base: o.base, Branch: branch}, Child: child,
			Workspace: &protocol.RunWorkspace{WorkspaceID: "workspace-" + ids[i], Branch: branch}}
		if _, err := rec.CreateRun(t.Context(), run); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, records.RunKey(jobID, ids[i]))
	}
	return keys
}

// runsFollower follows a job's run records as the parent's node does,
// keeping each run's last record and every state each went through.
type runsFollower struct {
	mu     sync.Mutex
	last   map[string]records.RunRecord
	states map[string][]protocol.RunState
	seen   chan struct{} // a change arrived
}

func followRuns(t *testing.T, rec *records.Records, jobID string) *runsFollower {
	t.Helper()
	f := &runsFollower{last: map[string]records.RunRecord{}, states: map[string][]protocol.RunState{}, seen: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := rec.Runs.Watch(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for c := range ch {
			if c.Synced || c.Deleted || c.Err != nil {
				continue
			}
			f.mu.Lock()
			f.last[c.Key] = c.Value
			if s := f.states[c.Key]; len(s) == 0 || s[len(s)-1] != c.Value.State {
				f.states[c.Key] = append(s, c.Value.State)
			}
			f.mu.Unlock()
			select {
			case f.seen <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

// wait waits until the records satisfy want (given a copy of them).
func (f *runsFollower) wait(t *testing.T, what string, want func(last map[string]records.RunRecord) bool) map[string]records.RunRecord {
	t.Helper()
	timeout := time.After(clusterWait)
	for {
		f.mu.Lock()
		snap := make(map[string]records.RunRecord, len(f.last))
		for k, v := range f.last {
			snap[k] = v
		}
		f.mu.Unlock()
		if want(snap) {
			return snap
		}
		select {
		case <-f.seen:
		case <-timeout:
			t.Fatalf("waited %s for %s; runs %+v", clusterWait, what, snap)
		}
	}
}

func (f *runsFollower) history(key string) []protocol.RunState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.RunState(nil), f.states[key]...)
}

// allowOn attaches to agentID on d (which hosts it: its run is active)
// and allows every permission it asks, once release is closed. What it
// started ends with the test.
func allowOn(t *testing.T, d *daemon, agentID string, release <-chan struct{}) {
	t.Helper()
	c, err := dialQuiet2(d)
	if err != nil {
		t.Errorf("dial %s: %v", d.home, err)
		return
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		var data protocol.AgentAttachData
		ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
		defer cancel()
		err := c.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID}}, &data)
		if err != nil && c.Err() == nil {
			t.Errorf("attach %s on %s: %v", agentID, d.home, err)
		}
	}()
	go func() {
		answer := func(requestID string) {
			<-release
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
						go answer(p.RequestID)
					}
				}
			case *protocol.PermissionRequest:
				if m.AgentID == agentID {
					go answer(m.RequestID)
				}
			}
		}
	}()
}

// dialQuiet2 connects to d without draining its events.
func dialQuiet2(d *daemon) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.Dial(ctx, d.socket())
}

// TestClusterRunsAnywhere: three real shardd nodes, each with room for
// one run, and a bare repository as the shared remote. The test plays the
// parent's node through a node's NATS client port: it writes a job of
// four runs any node may take, each a sim task writing a file. Three
// nodes claim one run each (never more), host the child in a worktree of
// their own cache, run it with the real runtime and the sim model, commit
// and push the run's branch and write the terminal record; the fourth run
// is claimed once a node has room again. Then a stop request ends a run
// cancelled, and a node stopped (SIGTERM) or SIGKILLed mid-run leaves its
// run as it was and interrupts it once when it comes back as its next
// incarnation; the nodes take runs again after.
func TestClusterRunsAnywhere(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	nodes := make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = runsNode(t, mesh, i, homes[i], token)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	byName := func(name string) int { return int(name[1] - '1') }
	urls := []string{natsURL(t, nodes[0]), natsURL(t, nodes[1]), natsURL(t, nodes[2])}
	rec := recordstest.Dial(t, strings.Join(urls, ","), token, records.Options{})
	o := newRunsOrigin(t)

	// Four runs, each writing its own file; their permissions are
	// answered only once three runs are active at once.
	var tasks []string
	for i := range 4 {
		tasks = append(tasks, fmt.Sprintf("sim: tool write {\"path\":\"out-%d.txt\",\"content\":\"from run %d\\n\"}\nsim: say run %d done", i, i, i))
	}
	follow := followRuns(t, rec, "job-edits")
	keys := queueRuns(t, rec, o, "job-edits", tasks)
	release := make(chan struct{})
	attached := map[string]bool{}
	attach := func(last map[string]records.RunRecord) {
		for _, r := range last {
			// Active: the child exists on its node and took the task; its
			// permission request waits there (headless policy queue).
			if r.State == protocol.RunActive && !attached[r.RunID] {
				attached[r.RunID] = true
				allowOn(t, nodes[byName(r.Node)], r.AgentID, release)
			}
		}
	}
	live := follow.wait(t, "three runs active at once, one per node", func(last map[string]records.RunRecord) bool {
		held, active := map[string]int{}, 0
		for _, r := range last {
			if r.State == protocol.RunStarting || r.State == protocol.RunActive {
				held[r.Node]++
			}
			if r.State == protocol.RunActive {
				active++
			}
		}
		if len(held) > 3 || held["n1"] > 1 || held["n2"] > 1 || held["n3"] > 1 {
			t.Fatalf("a node holds more runs than its room: %v", held)
		}
		return active == 3
	})
	attach(live)
	close(release)
	end := follow.wait(t, "the four runs ended", func(last map[string]records.RunRecord) bool {
		attach(last)
		n := 0
		for _, r := range last {
			if r.State.Terminal() {
				n++
			}
		}
		return n == 4
	})
	byNode := map[string]int{}
	for i, key := range keys {
		r := end[key]
		byNode[r.Node]++
		if r.State != protocol.RunCompleted || r.FinalText != fmt.Sprintf("run %d done", i) || r.Error != "" || r.Incarnation != "1" {
			t.Errorf("%s ended %s on %s: final %q error %q", key, r.State, r.Node, r.FinalText, r.Error)
		}
		if h := follow.history(key); strings.Join(states(h), ",") != "queued,starting,active,completed" {
			t.Errorf("%s went %v", key, h)
		}
		if r.Git == nil || r.Git.Head == "" || r.Workspace == nil || r.Workspace.WorkspaceID != "workspace-"+r.RunID ||
			r.Workspace.DiffStat == nil || *r.Workspace.DiffStat != (protocol.DiffStats{Files: 1, Additions: 1}) {
			t.Errorf("%s git %+v workspace %+v", key, r.Git, r.Workspace)
			continue
		}
		// The branch on the remote: one commit of Shard's on the base,
		// holding the file the child wrote.
		if head := wsGit(t, o.bare, "rev-parse", "refs/heads/"+r.Git.Branch); head != r.Git.Head {
			t.Errorf("%s: remote branch at %s, record says %s", key, head, r.Git.Head)
		}
		if got := wsGit(t, o.bare, "show", r.Git.Head+":out-"+fmt.Sprint(i)+".txt"); got != fmt.Sprintf("from run %d", i) {
			t.Errorf("%s: out-%d.txt on the remote = %q", key, i, got)
		}
		if who := wsGit(t, o.bare, "log", "-1", "--format=%an <%ae> %P", r.Git.Head); who != "Shard <shard@localhost> "+o.base {
			t.Errorf("%s: commit %q", key, who)
		}
		// The child lives on the claiming node, in the run's worktree there.
		list := waitListed(t, nodes[0], "n1 lists "+r.AgentID, func(l []protocol.AgentInfo) bool { _, ok := agentOf(l, r.AgentID); return ok })
		in, _ := agentOf(list, r.AgentID)
		wantCwd := filepath.Join(homes[byName(r.Node)], "cluster", "runs", "worktrees", r.RunID)
		if in.Node != r.Node || in.Cwd != wantCwd || in.ParentAgentID != "agent-parent" {
			t.Errorf("%s's child on n1's list: node %s cwd %s parent %s; want %s %s", key, in.Node, in.Cwd, in.ParentAgentID, r.Node, wantCwd)
		}
		// Its branch on the remote, its worktree there is retired.
		eventually(t, clusterWait, key+"'s worktree retired on "+r.Node, func() bool {
			_, err := os.Stat(wantCwd)
			return os.IsNotExist(err)
		})
	}
	if len(byNode) != 3 {
		t.Errorf("runs by node %v: want all three nodes", byNode)
	}
	// The nodes' caches are their owners' alone.
	for _, h := range homes {
		if fi, err := os.Stat(filepath.Join(h, "cluster", "runs")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s/cluster/runs: %v %v", h, fi.Mode(), err)
		}
	}

	// Three runs that sleep, one per node: one is stopped by its parent's
	// node; the node of another is stopped (SIGTERM) mid-run, the node of
	// the third SIGKILLed mid-run. Each comes back as its next incarnation
	// and interrupts its run, once; until then the run stays as it was.
	follow2 := followRuns(t, rec, "job-sleep")
	keys = queueRuns(t, rec, o, "job-sleep", []string{"sim: sleep 600000", "sim: sleep 600000", "sim: sleep 600000"})
	all := follow2.wait(t, "the sleeping runs active", func(last map[string]records.RunRecord) bool {
		for _, k := range keys {
			if last[k].State != protocol.RunActive {
				return false
			}
		}
		return true
	})
	// Each node's load counts the run it claimed (cluster.status RUNS).
	waitStatus(t, nodes[1], "each node's load shows its claimed run", func(st protocol.ClusterStatusData) bool {
		for _, name := range []string{"n1", "n2", "n3"} {
			if n, ok := nodeOf(st, name); !ok || n.Load.Runs != 1 {
				return false
			}
		}
		return true
	})
	for {
		e, err := rec.Runs.Get(t.Context(), keys[0])
		if err != nil {
			t.Fatal(err)
		}
		e.Value.StopRequestedAt = time.Now().UnixMilli()
		if _, err := rec.Runs.Update(t.Context(), keys[0], e.Value, e.Revision); err == nil {
			break
		}
	}
	stopped := follow2.wait(t, "the stopped run ended", func(last map[string]records.RunRecord) bool { return last[keys[0]].State.Terminal() })[keys[0]]
	if stopped.State != protocol.RunCancelled || stopped.StopStage == "" || stopped.Git.Head != o.base {
		t.Errorf("stopped run: %s stage %q head %s error %q", stopped.State, stopped.StopStage, stopped.Git.Head, stopped.Error)
	}

	for k, how := range map[string]string{keys[1]: "term", keys[2]: "kill"} {
		victim := all[k].Node
		vi := byName(victim)
		if how == "term" {
			if err := nodes[vi].Terminate(exitTimeout); err != nil {
				t.Fatalf("SIGTERM %s: %v", victim, err)
			}
		} else {
			nodes[vi].kill()
			nodes[vi].waitExit(t, exitTimeout)
		}
		// Read through the nodes still up (the test's connection may have
		// been to the one that went away: it reconnects to another).
		var r records.Entry[records.RunRecord]
		eventually(t, clusterWait, "a read of the run through a node still up", func() bool {
			var err error
			r, err = rec.Runs.Get(t.Context(), k)
			return err == nil
		})
		if r.Value.State != protocol.RunActive {
			t.Fatalf("the run of %s (%s) is %s before the node returns", victim, how, r.Value.State)
		}
		nodes[vi] = runsNode(t, mesh, vi, homes[vi], token)
		nodes[vi].waitServing()
		lost := follow2.wait(t, "the run of "+how+"ed "+victim+" interrupted", func(last map[string]records.RunRecord) bool {
			return last[k].State.Terminal()
		})[k]
		if lost.State != protocol.RunInterrupted || lost.Node != victim || lost.Incarnation != "1" || lost.Error != "node "+victim+" was lost" {
			t.Errorf("the run of %s (%s): %+v", victim, how, lost)
		}
		if h := follow2.history(k); strings.Join(states(h), ",") != "queued,starting,active,interrupted" {
			t.Errorf("the run of %s (%s) went %v", victim, how, h)
		}
		// Interrupted once (the history above): by the restarted node, or
		// by the survivor that declared it dead first (its OnNodeDead,
		// the parent's node's side); and the restarted node's worktree of
		// the run is gone.
		eventually(t, clusterWait, "the interruption logged and the restarted "+victim+" logs the worktree's retirement", func() bool {
			b, _ := nodes[vi].sd().Log(0)
			by := strings.Count(b, "cluster: interrupted 1 runs of incarnation 1")
			for i, d := range nodes {
				if i != vi {
					ob, _ := d.sd().Log(0)
					by += strings.Count(ob, "cluster runs: 1 run(s) of lost node "+victim+" interrupted")
				}
			}
			return by >= 1 && strings.Count(b, "cluster: retired the worktree of interrupted run "+lost.RunID) == 1
		})
		if _, err := os.Stat(filepath.Join(homes[vi], "cluster", "runs", "worktrees", lost.RunID)); !os.IsNotExist(err) {
			t.Errorf("the interrupted run's worktree: %v", err)
		}
	}
	// The restarted node takes runs again.
	follow3 := followRuns(t, rec, "job-after")
	keys = queueRuns(t, rec, o, "job-after", []string{"sim: say after", "sim: say after", "sim: say after"})
	after := follow3.wait(t, "three runs after the restart ended", func(last map[string]records.RunRecord) bool {
		return last[keys[0]].State.Terminal() && last[keys[1]].State.Terminal() && last[keys[2]].State.Terminal()
	})
	for _, k := range keys {
		if after[k].State != protocol.RunCompleted {
			t.Errorf("%s after the restart: %+v", k, after[k])
		}
	}
	// Nothing logs the token or a task.
	for _, d := range nodes {
		if b, err := d.sd().Log(0); err != nil || strings.Contains(b, token) || strings.Contains(b, "sim: tool write") {
			t.Errorf("%s's log: %v, holds the token or a task", d.home, err)
		}
	}
}

func states(s []protocol.RunState) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}
