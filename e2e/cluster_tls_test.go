//go:build linux

package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// clusterCerts runs contrib/cluster-certs.sh into a new directory for the
// given nodes, all on 127.0.0.1, and returns the directory: ca.crt and
// <node>.crt, <node>.key per node, as docs/deployment.md has an operator
// make them.
func clusterCerts(t *testing.T, nodes ...string) string {
	t.Helper()
	bash := testhost.Tool(t, "bash")
	testhost.Tool(t, "openssl")
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{filepath.Join("..", "contrib", "cluster-certs.sh"), "--out", dir}
	for _, n := range nodes {
		args = append(args, n+"=127.0.0.1,localhost")
	}
	cmd := exec.Command(bash, args...)
	cmd.Env = baseEnv()
	r := runCmd(t, cmd, "")
	if r.code != 0 {
		t.Fatalf("cluster-certs.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, n := range append([]string{"ca"}, nodes...) {
		for _, ext := range []string{".crt", ".key"} {
			fi, err := os.Stat(filepath.Join(dir, n+ext))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s%s: %v, mode %v; want an owner-only file", n, ext, err, fi)
			}
		}
	}
	return dir
}

// tlsNodeEnv is what /etc/shard/cluster.env gives node name in
// docs/deployment.md: the token and the TLS files, as SHARD_CLUSTER_*.
func tlsNodeEnv(token, certs, name string) []string {
	return []string{
		"SHARD_CLUSTER_TOKEN=" + token,
		"SHARD_CLUSTER_TLS_CA=" + filepath.Join(certs, "ca.crt"),
		"SHARD_CLUSTER_TLS_CERT=" + filepath.Join(certs, name+".crt"),
		"SHARD_CLUSTER_TLS_KEY=" + filepath.Join(certs, name+".key"),
	}
}

// tlsClusterNode starts shardd on home with the given extra flags and
// environment (the cluster settings); it returns at once.
func tlsClusterNode(t *testing.T, home string, args, env []string, stderr io.Writer) *daemon {
	t.Helper()
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args:   append([]string{"--web-port", "0", "--store.no-sync", "--cluster.lease", clusterLease}, args...),
		Env:    env,
		Stdout: p.stdout, Stderr: io.MultiWriter(p.stderr, stderr),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Proc, p.cmd = sd.Proc, sd.Cmd
	d := &daemon{t: t, home: home, proc: p}
	t.Cleanup(d.cleanup)
	return d
}

// TestClusterTLSWithContribCerts: the certificates contrib/cluster-certs.sh
// makes work for routes that verify both ends: three shardd given them
// (and a token) through SHARD_CLUSTER_* variables, as the env file of
// contrib/shardd-cluster@.service gives them, form a cluster that shardctl
// cluster status shows alive; run again without --force, the script
// overwrites nothing. A fourth node whose certificate is from
// another run of the script (another CA) fails the TLS handshake and
// never joins: the three never list it and it never serves.
func TestClusterTLSWithContribCerts(t *testing.T) {
	certs := clusterCerts(t, "n1", "n2", "n3")
	// Run again on the same directory, the script changes nothing
	// without --force and says so.
	before, err := os.ReadFile(filepath.Join(certs, "n1.crt"))
	if err != nil {
		t.Fatal(err)
	}
	again := exec.Command("bash", filepath.Join("..", "contrib", "cluster-certs.sh"), "--out", certs, "n1=127.0.0.1")
	again.Env = baseEnv()
	if r := runCmd(t, again, ""); r.code != 1 || !strings.Contains(r.stderr, "nothing changed (--force reissues them)") {
		t.Fatalf("cluster-certs.sh again: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, err := os.ReadFile(filepath.Join(certs, "n1.crt")); err != nil || string(after) != string(before) {
		t.Fatalf("n1.crt changed without --force: %v", err)
	}
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := make([]*daemon, 3)
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		// Every cluster setting comes from the environment, as from
		// the unit's EnvironmentFile.
		env := append(tlsNodeEnv(token, certs, name),
			"SHARD_CLUSTER_NODE="+name, "SHARD_CLUSTER_LISTEN=127.0.0.1:0",
			"SHARD_CLUSTER_ADVERTISE="+mesh.Advertise(i), "SHARD_CLUSTER_ROUTES="+strings.Join(mesh.Routes(i), ","))
		nodes[i] = tlsClusterNode(t, newHome(t), nil, env, mesh.RouteWatcher(i))
	}
	for _, d := range nodes {
		d.waitServing()
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		waitNode(t, nodes[0], "n1 sees "+name+" alive", name, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive })
	}
	out := nodes[0].mustCtl("", "cluster", "status").stdout
	rows, self := statusRows(t, out)
	if self != "n1" || len(rows) != 3 {
		t.Fatalf("cluster status on n1 (self %q):\n%s", self, out)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if r := rows[name]; len(r) != 7 || r[0] != "alive" {
			t.Errorf("%s's row on n1: %q\n%s", name, r, out)
		}
	}

	// n4 has the right token but a certificate of another CA. It dials
	// the three; each handshake fails, and n4 logs that.
	other := clusterCerts(t, "n4")
	routes := []string{mesh.Front(0).URL(), mesh.Front(1).URL(), mesh.Front(2).URL()}
	n4 := tlsClusterNode(t, newHome(t), []string{
		"--cluster.node", "n4", "--cluster.listen", "127.0.0.1:0", "--cluster.routes", strings.Join(routes, ","),
	}, tlsNodeEnv(token, other, "n4"), io.Discard)
	eventually(t, clusterWait, "n4 logs a failed TLS handshake", func() bool {
		b, _ := n4.sd().Log(0)
		return strings.Contains(b, "certificate signed by unknown authority")
	})
	if n4.exited() {
		t.Fatalf("n4 exited: %v\nstderr:\n%s", n4.State(), n4.stderr.String())
	}
	if c, err := dialQuiet(n4); err == nil {
		c.Close()
		t.Fatal("n4 serves clients: it joined a cluster")
	}
	for _, d := range nodes {
		st, err := clusterStatusOf(t, d)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := nodeOf(st, "n4"); ok || len(st.Nodes) != 3 {
			t.Errorf("%s lists %d nodes, n4: %+v", st.Node, len(st.Nodes), n)
		}
	}
	for _, d := range append(nodes, n4) {
		if b, err := d.sd().Log(0); err != nil || strings.Contains(b, token) {
			t.Errorf("%s's log: %v, holds the token: %t", d.home, err, strings.Contains(b, token))
		}
	}
}
