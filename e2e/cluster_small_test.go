//go:build linux

package e2e

import (
	"io"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterDuplicateNodeName: every node's cluster.status row says
// where it takes clients (its socket, its web URL). A fourth shardd, on a
// home of its own, started as n2 while n2 is alive, exits with an error
// naming the taken cluster.node and never serves; n2 stays alive as its
// first incarnation and still serves.
func TestClusterDuplicateNodeName(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = clusterNode(t, mesh, i, newHome(t), token)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	for i, name := range []string{"n1", "n2", "n3"} {
		web, err := nodes[i].sd().WebURL()
		if err != nil {
			t.Fatal(err)
		}
		socket := nodes[i].socket()
		waitNode(t, nodes[0], "n1 sees "+name+" alive with its addresses", name, func(n protocol.ClusterNode) bool {
			return n.Health == protocol.NodeAlive && n.Socket == socket && n.WebURL == web
		})
	}

	routes := []string{mesh.Front(0).URL(), mesh.Front(1).URL(), mesh.Front(2).URL()}
	dup := tlsClusterNode(t, newHome(t), []string{
		"--cluster.node", "n2", "--cluster.listen", "127.0.0.1:0", "--cluster.routes", strings.Join(routes, ","),
	}, []string{"SHARD_CLUSTER_TOKEN=" + token}, io.Discard)
	st := dup.waitExit(t, clusterWait)
	if st.ExitCode() == 0 || !strings.Contains(dup.stderr.String(), `cluster.node "n2" is taken`) {
		t.Fatalf("the second n2 exited %d; stderr:\n%s", st.ExitCode(), dup.stderr.String())
	}
	if c, err := dialQuiet(dup); err == nil {
		c.Close()
		t.Fatal("the second n2 serves clients")
	}
	for _, d := range nodes {
		waitNode(t, d, "n2 alive as incarnation 1", "n2", func(n protocol.ClusterNode) bool {
			return n.Health == protocol.NodeAlive && n.Incarnation == 1
		})
	}
	if st, err := clusterStatusOf(t, nodes[1]); err != nil || st.Node != "n2" {
		t.Fatalf("n2 after the duplicate: %+v, %v", st, err)
	}
}
