package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// clusterDaemon answers cluster.status with st and agent.list with agents.
func clusterDaemon(t *testing.T, st any, agents []protocol.AgentInfo) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		switch h.Type {
		case protocol.TypeClusterStatus:
			c.respond(h, st)
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: agents})
		}
	})
}

var threeNodes = protocol.ClusterStatusData{Enabled: true, Node: "n2", Nodes: []protocol.ClusterNode{
	{Node: "n1", Incarnation: 1, Health: protocol.NodeAlive, Load: protocol.NodeLoad{Agents: 4, Runtimes: 2, Runs: 1}, Capacity: 16, Version: "0.1.0"},
	{Node: "n2", Incarnation: 3, Health: protocol.NodeSuspect, Self: true, Capacity: 8, Version: "0.1.0"},
	{Node: "n3", Incarnation: 2, Health: protocol.NodeDead, Version: "0.1.0"},
}}

// TestClusterStatusTable: one row per node with its health, incarnation,
// load, capacity and version, the answering node marked.
func TestClusterStatusTable(t *testing.T) {
	d := clusterDaemon(t, threeNodes, nil)
	r := runCtl(t, nil, d.path, "", "cluster", "status")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", r.stdout)
	}
	for i, want := range [][]string{
		{"NODE", "HEALTH", "INCARNATION", "AGENTS", "RUNTIMES", "RUNS", "CAPACITY", "VERSION"},
		{"n1", "alive", "1", "4", "2", "1", "16", "0.1.0"},
		{"n2", "*", "suspect", "3", "0", "0", "0", "8", "0.1.0"},
		{"n3", "dead", "2", "0", "0", "0", "-", "0.1.0"},
	} {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d = %q, want %q", i, got, want)
		}
	}
}

// TestClusterStatusJSON: -o json prints cluster.status's data.
func TestClusterStatusJSON(t *testing.T) {
	d := clusterDaemon(t, threeNodes, nil)
	r := runCtl(t, nil, d.path, "", "cluster", "status", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got protocol.ClusterStatusData
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if !got.Enabled || got.Node != "n2" || len(got.Nodes) != 3 || !got.Nodes[1].Self || got.Nodes[0].Load.Agents != 4 {
		t.Fatalf("got %+v", got)
	}
}

// TestClusterStatusNotClustered: a single shardd is no error.
func TestClusterStatusNotClustered(t *testing.T) {
	d := clusterDaemon(t, protocol.ClusterStatusData{}, nil)
	r := runCtl(t, nil, d.path, "", "cluster", "status")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "not clustered") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "cluster", "status", "-o", "json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{
  "enabled": false
}` {
		t.Fatalf("json: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestClusterStatusRefusesBadData: an answer a client cannot show (two
// nodes marked self) is an error, not a table.
func TestClusterStatusRefusesBadData(t *testing.T) {
	bad := threeNodes
	bad.Nodes = append([]protocol.ClusterNode(nil), threeNodes.Nodes...)
	bad.Nodes[0].Self = true
	d := clusterDaemon(t, bad, nil)
	r := runCtl(t, nil, d.path, "", "cluster", "status")
	if r.code == 0 || !strings.Contains(r.stderr, "self") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestClusterAgentsNodeColumn: agents ls has a NODE column only when an
// agent has a node.
func TestClusterAgentsNodeColumn(t *testing.T) {
	agents := []protocol.AgentInfo{
		{AgentID: "agent-1", Cwd: "/w", Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeStopped, CreatedAt: 1},
		{AgentID: "agent-2", Cwd: "/w", Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeStopped, CreatedAt: 2},
	}
	r := runCtl(t, nil, clusterDaemon(t, nil, agents).path, "", "agents", "ls")
	if r.code != 0 || strings.Contains(r.stdout, "NODE") {
		t.Fatalf("single shardd: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	agents[1].Node = "n3"
	r = runCtl(t, nil, clusterDaemon(t, nil, agents).path, "", "agents", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "MODEL  NODE  CWD") {
		t.Fatalf("clustered: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	head := strings.Fields(lines[0])
	col := -1
	for i, h := range head {
		if h == "NODE" {
			col = i
		}
	}
	if f := strings.Fields(lines[2]); col < 0 || len(f) <= col || f[col] != "n3" {
		t.Fatalf("agent-2's NODE cell: %q under %q", f, head)
	}
	if f := strings.Fields(lines[1]); f[col] != "-" {
		t.Fatalf("agent-1's NODE cell: %q", f)
	}
	// n3 dead: its agent is listed as n3 last published it, and says so.
	r = runCtl(t, nil, clusterDaemon(t, threeNodes, agents).path, "", "agents", "ls")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.Contains(lines[2], " n3 (dead) ") || strings.Contains(lines[1], "(") {
		t.Fatalf("n3 dead: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	if r.stderr != "(node n3 is dead: its agents are shown as it last published them; shardctl cluster status)\n" {
		t.Fatalf("n3 dead: stderr %q", r.stderr)
	}
}
