//go:build linux

package e2e

import (
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterAttachFailover: shardctl attach (a subprocess) attaches
// n1's agent through n2. n2 is SIGKILLed while attach is frozen
// (SIGSTOP), and the agent runs a turn prompted on n1 meanwhile, so
// attach cannot have seen it live. Thawed, attach finds its connection
// lost, goes on through n3 (the next node of n2's cluster.status), shows
// that turn from n3's sync (the resync of a reconnect, once), and a
// prompt typed then runs through n3.
func TestClusterAttachFailover(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n2 := nodes[1]
	for i, name := range []string{"n1", "n2", "n3"} {
		sock := nodes[i].socket()
		waitNode(t, n2, "n2 knows "+name+"'s socket", name, func(n protocol.ClusterNode) bool {
			return n.Health == protocol.NodeAlive && n.Socket == sock
		})
	}
	c1, a1 := agentWithATurn(t, nodes)

	attachFailsOver(t, n2.ctlCmd("attach", "--reconnect", "90s", a1), n2, c1, a1)
}

// agentWithATurn makes an agent on n1 (nodes[0]) that every other node
// lists (one that does not know it yet refuses an attach, and a failover
// would pass it over), attaches a client of n1's to it and runs a first
// turn ("before the failover"): the start of the failover tests.
func agentWithATurn(t *testing.T, nodes []*daemon) (c1 *evConn, a1 string) {
	t.Helper()
	c1 = dialEvents(t, nodes[0])
	a1 = createOn(t, c1.c)
	for _, d := range nodes[1:] {
		waitListed(t, d, "n1's agent listed", func(l []protocol.AgentInfo) bool {
			in, ok := agentOf(l, a1)
			return ok && in.Node == "n1"
		})
	}
	c1.call(attachCmd(a1), nil)
	c1.waitFor("sync on n1", of(protocol.TypeSync, a1))
	c1.call(promptCmd(a1, "sim: say before the failover"), nil)
	if got := c1.streamed(a1); got != "before the failover" {
		t.Fatalf("first turn: %q", got)
	}
	return c1, a1
}

// attachFailsOver drives a shardctl attach (cmd, not started) of n1's
// agent a1 through n2 (c1: a client of n1's, attached to a1): n2 is
// SIGKILLed while attach is frozen (SIGSTOP), and a turn prompted on n1
// runs meanwhile, so attach cannot have seen it live. Thawed, attach
// finds its connection lost, goes on through n3, shows that turn from
// n3's sync (the resync of a reconnect, once, after the note), and a
// prompt typed then runs through n3.
func attachFailsOver(t *testing.T, cmd *exec.Cmd, n2 *daemon, c1 *evConn, a1 string) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := &shardtest.Buffer{}, &shardtest.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("attach's stdout:\n%s\nattach's stderr:\n%s", stdout.String(), stderr.String())
		}
	})
	shows := func(what, text string) {
		t.Helper()
		eventually(t, clusterWait, what, func() bool { return strings.Contains(stdout.String(), text) })
	}
	shows("attach through n2 shows the first turn", "before the failover")
	shows("attach through n2 is ready", "— now —")

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	n2.kill()
	n2.waitExit(t, clusterWait)
	c1.call(promptCmd(a1, "sim: say while attach was away"), nil)
	if got := c1.streamed(a1); got != "while attach was away" {
		t.Fatalf("turn while away: %q", got)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	shows("attach goes on through n3", "(reconnected through node n3; node n2 is gone)")
	shows("the resync shows the turn it missed", "while attach was away")
	if _, err := io.WriteString(stdin, "sim: say after the failover\n"); err != nil {
		t.Fatal(err)
	}
	shows("a prompt through n3", "after the failover")
	stdin.Close()
	if err := <-exited; err != nil {
		t.Fatalf("attach: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	exited <- nil // for the cleanup
	out := stdout.String()
	// The turn seen through n2 is not shown again.
	if n := strings.Count(out, "\nbefore the failover\n"); n != 1 {
		t.Errorf("the first turn's answer shown %d times, want once:\n%s", n, out)
	}
	// The missed turn: its prompt and its answer, each once.
	if n, m := strings.Count(out, "\nyou: sim: say while attach was away\n"), strings.Count(out, "\nwhile attach was away\n"); n != 1 || m != 1 {
		t.Errorf("the missed turn shown %d/%d times, want once:\n%s", n, m, out)
	}
	if i, j := strings.Index(out, "reconnected through node n3"), strings.Index(out, "while attach was away"); j < i {
		t.Errorf("the missed turn shown before the reconnect:\n%s", out)
	}
}
