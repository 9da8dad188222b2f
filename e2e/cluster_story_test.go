//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// storyRuns is the size of the story's parallel job: two runs for each
// of three nodes of room two (jobs.max_active 2), so that once every run
// is active each node holds two.
const storyRuns = 6

// storyNode starts shardd as node i of mesh for the story: room for two
// runs, a short shutdown, and a NATS client port of its own through which
// the test reads the records as that node's server has them.
func storyNode(t *testing.T, mesh *clustertest.Mesh, i int, home, token string) *daemon {
	t.Helper()
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args: []string{"--web-port", "0", "--store.no-sync", "--jobs.max-active", "2", "--shutdown.timeout", "1s",
			"--cluster.node", fmt.Sprintf("n%d", i+1), "--cluster.listen", "127.0.0.1:0",
			"--cluster.client-listen", "127.0.0.1:0",
			"--cluster.advertise", mesh.Advertise(i), "--cluster.routes", strings.Join(mesh.Routes(i), ","),
			"--cluster.lease", clusterLease},
		Env:    []string{"SHARD_CLUSTER_TOKEN=" + token},
		Stdout: p.stdout, Stderr: io.MultiWriter(p.stderr, mesh.RouteWatcher(i)),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Proc, p.cmd = sd.Proc, sd.Cmd
	d := &daemon{t: t, home: home, proc: p}
	t.Cleanup(d.cleanup)
	return d
}

// story is the shape both story tests share: three nodes, a parent on n1
// in a repository whose origin is a bare repository, and its parallel job
// of six runs, each a sim task writing its own file, every run active (two
// per node) with its write's permission still unanswered.
type story struct {
	t      *testing.T
	mesh   *clustertest.Mesh
	token  string
	homes  []string
	nodes  []*daemon
	c1     *evConn
	events *runEvents
	parent string
	job    protocol.SubagentCreateData
	byNode map[string][]protocol.RunSnapshot // the active runs by node
}

func startStory(t *testing.T) *story {
	t.Helper()
	s := &story{t: t, mesh: clustertest.NewMesh(t, 3), token: randomToken(t, "cluster-token")}
	s.homes = []string{newHome(t), newHome(t), newHome(t)}
	s.nodes = make([]*daemon, 3)
	for i := range s.nodes {
		s.nodes[i] = storyNode(t, s.mesh, i, s.homes[i], s.token)
	}
	for _, d := range s.nodes {
		d.waitServing()
	}
	n1 := s.nodes[0]
	for _, name := range []string{"n1", "n2", "n3"} {
		waitNode(t, n1, "n1 sees "+name+" alive", name, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive })
	}
	repo, _ := originRepo(t)
	ce, events := collectRunEvents(t, n1)
	s.events = events
	s.c1 = dialEvents(t, n1)
	var parent protocol.AgentCreateData
	s.c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo, HeadlessPolicy: "queue"}, &parent)
	s.parent = parent.AgentID
	// A connection that sent a subagent.* command naming the parent gets
	// its runs' events (docs/protocol.md §13 "The parent's connections").
	call(t, ce, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: s.parent}, nil)
	var tasks []protocol.TaskSpec
	for i := range storyRuns {
		tasks = append(tasks, protocol.TaskSpec{Name: fmt.Sprintf("t%d", i), Task: fmt.Sprintf(
			"sim: tool write {\"path\":\"out-%d.txt\",\"content\":\"from run %d\\n\"}\nsim: say run %d done", i, i, i)})
	}
	s.c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: s.parent,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: tasks}, &s.job)
	if len(s.job.Runs) != storyRuns {
		t.Fatalf("subagent.create: %+v", s.job)
	}
	// No permission is answered yet, so a node keeps what it claimed:
	// six runs active means two on each node.
	runs := s.waitJob("the six runs active", func(runs []protocol.RunSnapshot) bool {
		for _, r := range runs {
			if r.State != protocol.RunActive {
				return false
			}
		}
		return true
	})
	s.byNode = map[string][]protocol.RunSnapshot{}
	for _, r := range runs {
		s.byNode[r.Node] = append(s.byNode[r.Node], r)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if len(s.byNode[name]) != 2 {
			t.Fatalf("active runs by node: %v; want two on each of n1, n2, n3", nodesOf(runs))
		}
	}
	// Every node lists the children where they run.
	for _, d := range s.nodes {
		waitListed(t, d, "every node lists the six children on their nodes", func(l []protocol.AgentInfo) bool {
			for _, r := range runs {
				if in, ok := agentOf(l, r.AgentID); !ok || in.Node != r.Node {
					return false
				}
			}
			return true
		})
	}
	return s
}

func nodesOf(runs []protocol.RunSnapshot) map[string]string {
	out := map[string]string{}
	for _, r := range runs {
		out[r.RunID] = r.Node + "/" + string(r.State)
	}
	return out
}

// node is the daemon of node name (n1, n2, n3).
func (s *story) node(name string) *daemon { return s.nodes[name[1]-'1'] }

// jobRuns asks the parent's node (n1) for the story job's runs.
func (s *story) jobRuns() ([]protocol.RunSnapshot, error) {
	c, err := dialQuiet(s.nodes[0])
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st protocol.SubagentStatusData
	if err := c.Call(ctx, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: s.parent}, &st); err != nil {
		return nil, err
	}
	for _, j := range st.Jobs {
		if j.JobID == s.job.JobID {
			return j.Runs, nil
		}
	}
	return nil, fmt.Errorf("job %s not listed", s.job.JobID)
}

// waitJob waits until the story job's runs on n1 satisfy want.
func (s *story) waitJob(what string, want func([]protocol.RunSnapshot) bool) []protocol.RunSnapshot {
	s.t.Helper()
	var runs []protocol.RunSnapshot
	eventually(s.t, clusterWait, what, func() bool {
		var err error
		runs, err = s.jobRuns()
		return err == nil && len(runs) == storyRuns && want(runs)
	})
	return runs
}

// pendingRequest reads e's events until agent id's permission request
// is pending (in the attach's sync, or raised after it), and returns its
// id.
func pendingRequest(e *evConn, id string) string {
	e.t.Helper()
	var reqID string
	e.waitFor("a permission request of "+id, func(m protocol.Typed) bool {
		switch m := m.(type) {
		case *protocol.Sync:
			if m.AgentID != id {
				return false
			}
			for _, raw := range m.PendingRequests {
				var p struct {
					Type      string `json:"type"`
					RequestID string `json:"request_id"`
				}
				if json.Unmarshal(raw, &p) == nil && p.Type == protocol.TypePermissionRequest {
					reqID = p.RequestID
					return true
				}
			}
		case *protocol.PermissionRequest:
			if m.AgentID == id {
				reqID = m.RequestID
				return true
			}
		}
		return false
	})
	return reqID
}

// answerAcross: a client of n2 and a client of n3 attach to run's child
// (hosted by n3); n2 answers its pending write first (allow), n3 later
// (deny): n2's answer wins, n3's is acknowledged and dropped, and both
// see it resolved; the run then completes on n3.
func (s *story) answerAcross(run protocol.RunSnapshot) {
	t := s.t
	t.Helper()
	c2, c3 := dialEvents(t, s.nodes[1]), dialEvents(t, s.nodes[2])
	c2.call(attachCmd(run.AgentID), nil)
	c3.call(attachCmd(run.AgentID), nil)
	req := pendingRequest(c2, run.AgentID)
	if r3 := pendingRequest(c3, run.AgentID); r3 != req {
		t.Fatalf("the pending request differs: %s through n2, %s on n3", req, r3)
	}
	c2.call(permResponse(run.AgentID, req, protocol.DecisionAllow), nil)
	if err := c3.try(permResponse(run.AgentID, req, protocol.DecisionDeny)); err != nil {
		t.Fatalf("n3's late answer: %v, want it acknowledged and dropped", err)
	}
	for _, e := range []*evConn{c2, c3} {
		res := e.waitFor("permission_resolved", of(protocol.TypePermissionResolved, run.AgentID)).(*protocol.PermissionResolved)
		if res.RequestID != req || res.Decision != protocol.DecisionAllow || res.Source != "unix" {
			t.Errorf("permission_resolved: %+v, want n2's allow", res)
		}
		if tr := e.waitFor("tool_result", of(protocol.TypeToolResult, run.AgentID)).(*protocol.ToolResult); tr.IsError {
			t.Errorf("the allowed write failed: %+v", tr)
		}
	}
	c2.c.Close()
	c3.c.Close()
	s.waitJob("the run answered across nodes completed", func(runs []protocol.RunSnapshot) bool {
		return snapshotIn(runs, run.RunID).State == protocol.RunCompleted
	})
}

func snapshotIn(runs []protocol.RunSnapshot, id string) protocol.RunSnapshot {
	for _, r := range runs {
		if r.RunID == id {
			return r
		}
	}
	return protocol.RunSnapshot{}
}

// allowOthers answers every permission of the runs of n1 and n2.
func (s *story) allowOthers() {
	for _, name := range []string{"n1", "n2"} {
		for _, r := range s.byNode[name] {
			allowWherever(s.t, s.node(name), r.AgentID)
		}
	}
}

// checkEnd checks the job's end on n1: the run held by n3 (held)
// interrupted, every other completed on its node with its work fetched
// into its workspace here (workspace.diff), and each run's terminal event
// and completion report exactly once.
func (s *story) checkEnd(held string, runs []protocol.RunSnapshot) {
	t := s.t
	t.Helper()
	for _, r := range runs {
		i := slices.IndexFunc(s.job.Runs, func(c protocol.CreatedRun) bool { return c.RunID == r.RunID })
		if r.RunID == held {
			if r.State != protocol.RunInterrupted || r.Node != "n3" || r.Error != "node n3 was lost" {
				t.Errorf("the run n3 held: %+v", r)
			}
			continue
		}
		if r.State != protocol.RunCompleted || r.FinalText != fmt.Sprintf("run %d done", i) || r.Workspace == nil {
			t.Errorf("run %d on %s: %+v", i, r.Node, r)
			continue
		}
		var diff protocol.WorkspaceDiffData
		s.c1.call(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: r.Workspace.WorkspaceID}, &diff)
		if len(diff.Files) != 1 || diff.Files[0].Path != fmt.Sprintf("out-%d.txt", i) || diff.Stats.Additions != 1 {
			t.Errorf("workspace.diff of run %d (on %s): %+v", i, r.Node, diff)
		}
	}
	s.checkReportedOnce(runs)
}

// checkReportedOnce waits for each run's completion report in the
// parent's transcript, then finds exactly one of each, and one terminal
// event each.
func (s *story) checkReportedOnce(runs []protocol.RunSnapshot) {
	t := s.t
	t.Helper()
	eventually(t, clusterWait, "every run reported", func() bool {
		got := reportsOf(t, s.homes[0])
		for _, r := range runs {
			if got[r.RunID] == 0 {
				return false
			}
		}
		return true
	})
	got := reportsOf(t, s.homes[0])
	for _, r := range runs {
		if got[r.RunID] != 1 {
			t.Errorf("run %s (%s on %s) reported %d times", r.RunID, r.State, r.Node, got[r.RunID])
		}
		tr := strings.Join(s.events.transitions(r.RunID), " ")
		if n := strings.Count(tr, ">"+string(r.State)); n != 1 {
			t.Errorf("run %s's events %q: %d ending %s", r.RunID, tr, n, r.State)
		}
	}
}

// fence creates a one-run job for the parent and waits for its report:
// a report of the story's runs sent again before it would be counted.
func (s *story) fence(name string) {
	t := s.t
	t.Helper()
	var job protocol.SubagentCreateData
	s.c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: s.parent,
		Name: name, Task: "sim: say " + name, Isolation: protocol.IsolationWorkspace}, &job)
	eventually(t, clusterWait, "the fence "+name+" reported", func() bool { return reportsOf(t, s.homes[0])[job.Runs[0].RunID] == 1 })
}

// TestClusterStory is the cluster as a user meets it. Three shardd nodes
// on loopback (embedded NATS, room for two runs each) and a bare
// repository as the shared remote origin. A parent on n1 creates a
// parallel job of six isolated runs, each a sim task writing its own
// file; they land two on each node. A client of n2 attaches to a child on
// n3 and answers its permission first while a client of n3 is attached
// too: n2's answer wins and that run completes. n3 is SIGKILLed while it
// holds its other run (its permission unanswered): that run comes back
// interrupted, reported once; the runs of n1 and n2 complete, their work
// fetched on n1 (workspace.diff). n3 restarted rejoins as its next
// incarnation, and nothing is reported again.
func TestClusterStory(t *testing.T) {
	s := startStory(t)
	n1 := s.nodes[0]
	across, held := s.byNode["n3"][0], s.byNode["n3"][1]
	s.answerAcross(across)

	// SIGKILL n3 with held active, then let n1's and n2's runs finish.
	s.nodes[2].kill()
	s.nodes[2].waitExit(t, exitTimeout)
	s.allowOthers()
	runs := s.waitJob("every run ended", func(runs []protocol.RunSnapshot) bool {
		for _, r := range runs {
			if !r.State.Terminal() {
				return false
			}
		}
		return true
	})
	s.checkEnd(held.RunID, runs)
	waitNode(t, n1, "n1 sees n3 dead", "n3", func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeDead && n.Incarnation == 1 })

	// n3 again on its home: incarnation 2, alive on every node; it retires
	// the worktree of its interrupted run and reports nothing again.
	s.nodes[2] = storyNode(t, s.mesh, 2, s.homes[2], s.token)
	s.nodes[2].waitServing()
	for _, d := range s.nodes {
		waitNode(t, d, "n3 alive as incarnation 2", "n3", func(n protocol.ClusterNode) bool {
			return n.Health == protocol.NodeAlive && n.Incarnation == 2
		})
	}
	eventually(t, clusterWait, "the restarted n3 retires the worktree of the interrupted run", func() bool {
		b, _ := s.nodes[2].sd().Log(0)
		return strings.Contains(b, "cluster: retired the worktree of interrupted run "+held.RunID)
	})
	s.fence("after-restart")
	after, err := s.jobRuns()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range after {
		if r.State != runs[i].State || r.Node != runs[i].Node {
			t.Errorf("run %s after n3's restart: %s on %s, was %s on %s", r.RunID, r.State, r.Node, runs[i].State, runs[i].Node)
		}
	}
	s.checkReportedOnce(runs)
}
