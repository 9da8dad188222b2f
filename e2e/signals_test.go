//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// forcedExitBound bounds a forced shutdown at the binary level: far below
// the shutdown.timeout the tests set (60 s), so a second signal that only
// waits out the graceful bound fails, and generous for a busy machine.
const forcedExitBound = 15 * time.Second

// startTurn attaches a client to agent id as its interactive client,
// prompts it with text and returns once the turn has started. The test
// reads the client's further events; it is closed when the test ends.
func startTurn(t *testing.T, d *daemon, id, text string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatalf("dial %s: %v", d.socket(), err)
	}
	t.Cleanup(func() { c.Close() })
	h := func(typ string) protocol.Header { return protocol.Header{Type: typ, AgentID: id} }
	if err := c.Call(ctx, &protocol.AgentAttach{Header: h(protocol.TypeAgentAttach), Role: protocol.RoleInteractive}, nil); err != nil {
		t.Fatalf("attach %s: %v", id, err)
	}
	if err := c.Call(ctx, &protocol.Prompt{Header: h(protocol.TypePrompt), Message: text}, nil); err != nil {
		t.Fatalf("prompt %s: %v", id, err)
	}
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection lost before the turn started: %v", c.Err())
			}
			if ev.Msg.Head().AgentID == id && ev.Msg.Head().Type == protocol.TypeTurnStart {
				return c
			}
		case <-ctx.Done():
			t.Fatalf("no turn_start from %s within %s", id, cmdTimeout)
		}
	}
}

// waitLog waits until shardd.log holds line.
func (d *daemon) waitLog(line string) {
	d.t.Helper()
	eventually(d.t, exitTimeout, "shardd.log records "+line, func() bool {
		log, err := d.sd().Log(0)
		return err == nil && strings.Contains(log, line)
	})
}

// TestSecondSignalForcesShutdown: the first SIGTERM starts a graceful
// shutdown, which waits for the running turn (here one that never ends, up
// to shutdown.timeout); the second cuts that wait, kills the runtime and
// exits at once, leaving a store the next start opens.
func TestSecondSignalForcesShutdown(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--shutdown.timeout", "60s")
	id, _ := d.createAgent()
	startTurn(t, d, id, "sim: hang") // ignores abort and SIGTERM

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitLog("shardd shutting down")
	if d.exited() {
		t.Fatalf("shardd exited on the first signal with a turn running: %v\nstderr:\n%s", d.State(), d.stderr.String())
	}
	second := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := d.waitExit(t, forcedExitBound)
	t.Logf("shardd exited %s after the second signal", time.Since(second).Round(time.Millisecond))
	if !st.Exited() || st.ExitCode() != 0 {
		t.Fatalf("shardd after two signals: %v, want exit status 0\nstderr:\n%s", st, d.stderr.String())
	}
	log, err := d.sd().Log(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"second signal; forcing shutdown", "shutdown forced; killing runtimes", "shardd stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("shardd.log does not record %q:\n%s", want, log)
		}
	}
	if pids := runtimePIDs(t, id); len(pids) != 0 {
		t.Errorf("runtime processes of %s outlived shardd: %v", id, pids)
	}

	// The store was closed cleanly: the next daemon on the home opens it
	// and still serves the agent.
	again := startDaemonAt(t, d.home)
	var list protocol.AgentListData
	r := again.mustCtl("", "agents", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("agents ls -o json printed %q: %v", r.stdout, err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != id {
		t.Fatalf("agents after the restart = %+v, want %s alone", list.Agents, id)
	}
}

// TestOneSignalLetsTheTurnFinish: a single SIGTERM drains gracefully: the
// running turn ends, and the attached client sees it, before shardd exits.
func TestOneSignalLetsTheTurnFinish(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--shutdown.timeout", "60s")
	id, _ := d.createAgent()
	c := startTurn(t, d, id, "sim: sleep 1000\nsim: say finished before exit")

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	timeout := time.After(exitTimeout)
	for ended := false; !ended; {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed before the turn ended (text %q): %v", text.String(), c.Err())
			}
			switch m := ev.Msg.(type) {
			case *protocol.MessageDelta:
				if m.AgentID == id && m.Kind == protocol.DeltaText {
					text.WriteString(m.TextDelta)
				}
			case *protocol.TurnEnd:
				ended = m.AgentID == id
			}
		case <-timeout:
			t.Fatalf("no turn_end within %s of SIGTERM (text %q)", exitTimeout, text.String())
		}
	}
	if got := strings.TrimSpace(text.String()); got != "finished before exit" {
		t.Errorf("turn text = %q", got)
	}
	st := d.waitExit(t, exitTimeout)
	if !st.Exited() || st.ExitCode() != 0 {
		t.Fatalf("shardd after SIGTERM: %v, want exit status 0\nstderr:\n%s", st, d.stderr.String())
	}
}

// TestStartupLinesNameTheDashboard: after its first line (the socket and
// the WebSocket endpoint) shardd says where the dashboard is and how to
// sign a browser in, and that command works as printed: its link opens on
// the dashboard's origin.
func TestStartupLinesNameTheDashboard(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	eventually(t, readyTimeout, "the dashboard line on stderr", func() bool {
		return strings.Contains(d.stderr.String(), "dashboard: ")
	})
	out := d.stderr.String()
	first := regexp.MustCompile(`(?m)^shardd \S+ listening on (\S+) and (http://127\.0\.0\.1:\d+)/ws \(home (\S+)\)$`).FindStringSubmatch(out)
	if first == nil || first[1] != d.socket() || first[3] != d.home {
		t.Fatalf("no first line naming %s and home %s:\n%s", d.socket(), d.home, out)
	}
	web := first[2]
	m := regexp.MustCompile(`(?m)^dashboard: (\S+)/ \(sign a browser in with: (shardctl [^)]+)\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no dashboard line:\n%s", out)
	}
	if m[1] != web {
		t.Errorf("dashboard at %s, want the web listener %s", m[1], web)
	}
	args := strings.Fields(m[2])
	cmd := exec.Command(shardctlBin, args[1:]...)
	cmd.Env = append(baseEnv(), "NO_COLOR=1")
	r := runCmd(t, cmd, "")
	if r.code != 0 || !strings.HasPrefix(r.stdout, web+"/enroll#code=") {
		t.Fatalf("%q: exit %d, stdout %q, stderr %q; want a link on %s", m[2], r.code, r.stdout, r.stderr, web)
	}
}
