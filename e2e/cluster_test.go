//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// clusterWait bounds the cluster's waits: forming (a JetStream
// meta-leader), a lease running out, a restarted node rejoining. They end
// at their signal; the bound is generous for a loaded 2-core machine.
const clusterWait = 90 * time.Second

// clusterLease is the nodes' cluster.lease: short, so that a killed
// node is seen dead quickly. A survivor's watch may stall when the killed
// node held the membership bucket's stream leader; it then judges no one
// until its own heartbeats come back (cluster's package doc), so a short
// lease declares no live node dead.
const clusterLease = "3s"

// clusterNode starts shardd as node i (n1, n2, …) of mesh on home; it
// returns at once: a node serves only once a quorum of the cluster is up.
// extra are more shardd flags.
func clusterNode(t *testing.T, mesh *clustertest.Mesh, i int, home, token string, extra ...string) *daemon {
	t.Helper()
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args: append([]string{"--web-port", "0", "--store.no-sync",
			"--cluster.node", fmt.Sprintf("n%d", i+1), "--cluster.listen", "127.0.0.1:0",
			"--cluster.advertise", mesh.Advertise(i), "--cluster.routes", strings.Join(mesh.Routes(i), ","),
			"--cluster.lease", clusterLease}, extra...),
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

// waitServing waits until d serves clients (it has joined the cluster).
func (d *daemon) waitServing() {
	d.t.Helper()
	if err := d.sd().WaitReady(clusterWait); err != nil {
		d.t.Fatalf("%v\nstderr:\n%s", err, d.stderr.String())
	}
	// daemon.json (its web URL) is written right after the listeners,
	// so a node may take clients a moment before it exists.
	if err := d.sd().WaitDiscovery(clusterWait); err != nil {
		d.t.Fatalf("%v\nstderr:\n%s", err, d.stderr.String())
	}
}

// clusterStatusOf asks d for cluster.status over a fresh connection.
func clusterStatusOf(t *testing.T, d *daemon) (protocol.ClusterStatusData, error) {
	t.Helper()
	c, err := dialQuiet(d)
	if err != nil {
		return protocol.ClusterStatusData{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Request(ctx, &protocol.ClusterStatus{Header: protocol.Header{Type: protocol.TypeClusterStatus}})
	if err != nil {
		return protocol.ClusterStatusData{}, err
	}
	return protocol.DecodeClusterStatusData(resp.Data)
}

// nodeOf is node name's row of st.
func nodeOf(st protocol.ClusterStatusData, name string) (protocol.ClusterNode, bool) {
	for _, n := range st.Nodes {
		if n.Node == name {
			return n, true
		}
	}
	return protocol.ClusterNode{}, false
}

// waitNode waits until d's cluster.status shows node name as want says.
func waitNode(t *testing.T, d *daemon, what, name string, want func(protocol.ClusterNode) bool) protocol.ClusterStatusData {
	t.Helper()
	return waitStatus(t, d, what, func(st protocol.ClusterStatusData) bool {
		n, ok := nodeOf(st, name)
		return ok && want(n)
	})
}

// waitStatus waits until d's cluster.status satisfies want.
func waitStatus(t *testing.T, d *daemon, what string, want func(protocol.ClusterStatusData) bool) protocol.ClusterStatusData {
	t.Helper()
	var st protocol.ClusterStatusData
	eventually(t, clusterWait, what, func() bool {
		var err error
		st, err = clusterStatusOf(t, d)
		return err == nil && want(st)
	})
	return st
}

// statusRows parses shardctl cluster status's table: node name → fields
// after the name (a "*" after the name marks the answering node).
func statusRows(t *testing.T, out string) (rows map[string][]string, self string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "NODE HEALTH INCARNATION AGENTS RUNTIMES RUNS CAPACITY VERSION" {
		t.Fatalf("cluster status header:\n%s", out)
	}
	rows = map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > 1 && f[1] == "*" {
			if self != "" {
				t.Fatalf("two nodes marked self:\n%s", out)
			}
			self, f = f[0], append(f[:1], f[2:]...)
		}
		rows[f[0]] = f[1:]
	}
	return rows, self
}

// TestClusterThreeNodes: three real shardd binaries form a cluster on
// loopback. Any node lists the three alive with itself marked; an agent
// says which node hosts it; a SIGKILLed node is seen dead by the others;
// restarted on its home it is alive again as its second incarnation.
func TestClusterThreeNodes(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	nodes := make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = clusterNode(t, mesh, i, homes[i], token)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	var first protocol.ClusterStatusData
	for _, name := range []string{"n1", "n2", "n3"} {
		first = waitNode(t, n2, "n2 sees "+name+" alive", name, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive })
	}
	// Each node's record carries when it started, its last heartbeat and
	// the version it runs (one binary here).
	n3First, _ := nodeOf(first, "n3")
	for _, n := range first.Nodes {
		if n.StartedAt <= 0 || n.HeartbeatAt < n.StartedAt || n.Version == "" || n.Version != n3First.Version {
			t.Fatalf("node record %+v (n3's version %q)", n, n3First.Version)
		}
	}
	out := n2.mustCtl("", "cluster", "status").stdout
	rows, self := statusRows(t, out)
	if self != "n2" || len(rows) != 3 {
		t.Fatalf("cluster status on n2 (self %q):\n%s", self, out)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		// HEALTH INCARNATION AGENTS RUNTIMES RUNS CAPACITY VERSION
		if r := rows[name]; len(r) != 7 || r[0] != "alive" || r[1] != "1" || r[5] != "16" {
			t.Errorf("%s's row on n2: %q\n%s", name, r, out)
		}
	}
	var js protocol.ClusterStatusData
	if err := json.Unmarshal([]byte(n2.mustCtl("", "cluster", "status", "-o", "json").stdout), &js); err != nil || !js.Enabled || js.Node != "n2" || len(js.Nodes) != 3 {
		t.Fatalf("cluster status -o json on n2: %+v, %v", js, err)
	}

	// An agent created on n3 is hosted by n3.
	c3 := n3.dial()
	var created protocol.AgentCreateData
	call(t, c3, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &created)
	var list protocol.AgentListData
	call(t, c3, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list)
	if len(list.Agents) != 1 || list.Agents[0].AgentID != created.AgentID || list.Agents[0].Node != "n3" {
		t.Fatalf("agent.list on n3: %+v, want %s on n3", list.Agents, created.AgentID)
	}
	ls := n3.mustCtl("", "agents", "ls").stdout
	if !strings.Contains(ls, "NODE") || !strings.Contains(ls, " n3 ") {
		t.Fatalf("agents ls on n3 has no NODE n3:\n%s", ls)
	}
	// n3's heartbeats carry the agent.
	waitNode(t, n1, "n1 sees n3 host one agent", "n3", func(n protocol.ClusterNode) bool { return n.Load.Agents == 1 })

	// SIGKILL n3: once its lease runs out, n1 sees it dead.
	c3.Close()
	n3.kill()
	n3.waitExit(t, exitTimeout)
	waitStatus(t, n1, "n1 sees n3 dead, n1 and n2 alive", func(st protocol.ClusterStatusData) bool {
		a, _ := nodeOf(st, "n1")
		b, _ := nodeOf(st, "n2")
		c, _ := nodeOf(st, "n3")
		return a.Health == protocol.NodeAlive && b.Health == protocol.NodeAlive && c.Health == protocol.NodeDead && c.Incarnation == 1
	})
	rows, self = statusRows(t, n1.mustCtl("", "cluster", "status").stdout)
	if self != "n1" || rows["n3"][0] != "dead" || rows["n2"][0] != "alive" {
		t.Fatalf("cluster status on n1 after the kill: self %q, rows %q", self, rows)
	}

	// n3 again on its home: its second incarnation, alive.
	n3 = clusterNode(t, mesh, 2, homes[2], token)
	n3.waitServing()
	waitNode(t, n1, "n1 sees n3 alive as incarnation 2", "n3", func(n protocol.ClusterNode) bool {
		return n.Health == protocol.NodeAlive && n.Incarnation == 2
	})
	rows, _ = statusRows(t, n1.mustCtl("", "cluster", "status").stdout)
	if r := rows["n3"]; r[0] != "alive" || r[1] != "2" {
		t.Fatalf("n3's row on n1 after the restart: %q", r)
	}
	// The restarted n3 sees itself too (its watch of the membership may
	// first replay what its store held before the kill).
	st := waitNode(t, n3, "the restarted n3 sees itself alive as incarnation 2", "n3", func(n protocol.ClusterNode) bool {
		return n.Health == protocol.NodeAlive && n.Incarnation == 2
	})
	if n, _ := nodeOf(st, "n3"); !n.Self || st.Node != "n3" {
		t.Fatalf("cluster.status on the restarted n3: %+v", st)
	}
	if n, _ := nodeOf(st, "n3"); n.StartedAt <= n3First.StartedAt || n.HeartbeatAt < n.StartedAt || n.Version != n3First.Version {
		t.Fatalf("the restarted n3's record %+v, its first %+v", n, n3First)
	}

	// Nothing logs the cluster token.
	for _, d := range nodes {
		if b, err := d.sd().Log(0); err != nil || strings.Contains(b, token) {
			t.Errorf("%s's log: %v, holds the token: %t", d.home, err, strings.Contains(b, token))
		}
	}
	if b, _ := n1.sd().Log(0); !regexp.MustCompile(`cluster: node n1 joined \(\d members\)`).MatchString(b) {
		t.Errorf("n1 logged no join line:\n%s", b)
	}
}

// TestClusterSingleShardd: a shardd without cluster.* settings answers
// cluster.status with enabled:false, shardctl says "not clustered" and
// exits 0, and no cluster directory appears in its home; agent.create
// with a node is INVALID_REQUEST.
func TestClusterSingleShardd(t *testing.T) {
	d := startDaemon(t)
	r := d.mustCtl("", "cluster", "status")
	if !strings.HasPrefix(r.stdout, "not clustered") {
		t.Fatalf("cluster status: %q", r.stdout)
	}
	if out := strings.Join(strings.Fields(d.mustCtl("", "cluster", "status", "-o", "json").stdout), ""); out != `{"enabled":false}` {
		t.Fatalf("cluster status -o json: %s", out)
	}
	if _, err := os.Stat(filepath.Join(d.home, "cluster")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a single shardd made %s/cluster: %v", d.home, err)
	}
	// agent.create's node names a cluster node: none here.
	if r := d.ctl("", "agents", "create", "--cwd", shortTemp(t), "--node", "n3"); r.code == 0 || !strings.Contains(r.stderr, "INVALID_REQUEST") || !strings.Contains(r.stderr, "not clustered") {
		t.Fatalf("agents create --node on a single shardd: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestClusterRefusesInsecureListen: a node that would take routes on a
// non-loopback address without a token does not start: shardd exits
// non-zero naming the setting, before it makes its home.
func TestClusterRefusesInsecureListen(t *testing.T) {
	home := newHome(t)
	cmd := exec.Command(sharddBin, "--web-port", "0", "--cluster.node", "n1", "--cluster.listen", "10.20.30.40:6250")
	cmd.Env = sharddEnv(home)
	r := runCmd(t, cmd, "")
	if r.code == 0 || !strings.Contains(r.stderr, "cluster.listen 10.20.30.40 is not loopback and cluster.token is empty") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused shardd made its home: %v", err)
	}
}

// dialQuiet connects to d, draining events; an error is returned, not
// fatal, for waits that retry.
func dialQuiet(d *daemon) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		return nil, err
	}
	go func() {
		for range c.Events() {
		}
	}()
	return c, nil
}
