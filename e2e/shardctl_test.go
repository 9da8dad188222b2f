//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

func TestShardctlAgainstRealDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	// status reports this very process.
	st := d.mustCtl("", "status", "-o", "json")
	var status protocol.DaemonStatusData
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status -o json printed %q: %v", st.stdout, err)
	}
	if status.PID != d.pid() {
		t.Errorf("status pid = %d, want the shardd subprocess %d", status.PID, d.pid())
	}
	if status.ProtocolVersion != protocol.Version {
		t.Errorf("status protocol_version = %q, want %q", status.ProtocolVersion, protocol.Version)
	}
	ver := runCmd(t, exec.Command(sharddBin, "--version"), "")
	if status.Version == "" || !strings.Contains(ver.stdout, status.Version) {
		t.Errorf("status version = %q, want the one of `shardd --version` (%q)", status.Version, ver.stdout)
	}
	if status.Home != d.home {
		t.Errorf("status home = %q, want %q", status.Home, d.home)
	}

	// agents create (table output: just the id) and agents ls.
	cwd := shortTemp(t)
	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd).stdout)
	if id == "" || strings.ContainsAny(id, " \t\n") {
		t.Fatalf("agents create printed %q, want one agent id", id)
	}
	ls := d.mustCtl("", "agents", "ls", "-o", "json")
	var list protocol.AgentListData
	if err := json.Unmarshal([]byte(ls.stdout), &list); err != nil {
		t.Fatalf("agents ls -o json printed %q: %v", ls.stdout, err)
	}
	found := false
	for _, a := range list.Agents {
		if a.AgentID == id {
			found = true
			if a.Cwd != cwd {
				t.Errorf("agents ls: %s has cwd %q, want %q", id, a.Cwd, cwd)
			}
		}
	}
	if !found {
		t.Fatalf("agents ls -o json does not list %s:\n%s", id, ls.stdout)
	}

	// prompt streams exactly the model's text to stdout.
	r := d.mustCtl("", "prompt", id, "sim: say hello from e2e")
	if r.stdout != "hello from e2e\n" {
		t.Errorf("prompt stdout = %q, want %q (stderr %q)", r.stdout, "hello from e2e\n", r.stderr)
	}

	// A permission question answered "y" on stdin lets the write happen…
	r = d.mustCtl("y\n", "prompt", id, `sim: tool write {"path":"f.txt","content":"x"}`)
	if !strings.Contains(r.stderr, "f.txt") {
		t.Errorf("prompt did not ask about f.txt; stderr:\n%s", r.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(cwd, "f.txt")); err != nil || string(got) != "x" {
		t.Errorf("after answering y, f.txt = %q (err %v), want %q", got, err, "x")
	}
	// …and "n" stops it.
	r = d.ctl("n\n", "prompt", id, `sim: tool write {"path":"g.txt","content":"x"}`)
	if r.code != 0 && r.code != 1 {
		t.Errorf("denied prompt exited %d, want 0 or 1 (a finished command)\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "g.txt") {
		t.Errorf("prompt did not ask about g.txt; stderr:\n%s", r.stderr)
	}
	if exists(t, filepath.Join(cwd, "g.txt")) {
		t.Errorf("g.txt was written although the permission was denied")
	}

	// watch (an observer) sees a turn that another shardctl prompts.
	watch := startProc(t, d.ctlCmd("watch", id))
	t.Cleanup(watch.kill)
	eventually(t, 10*time.Second, "watch attached (printed the agent's sync)", func() bool {
		return watchSaw(watch.stdout.String(), id, "sync")
	})
	token := randomToken(t, "watched")
	d.mustCtl("", "prompt", id, "sim: say "+token)
	eventually(t, 10*time.Second, "watch printed the prompted turn", func() bool {
		out := watch.stdout.String()
		return watchSaw(out, id, "turn_start") && watchSaw(out, id, "turn_end") &&
			strings.Contains(watchedText(out, id), token)
	})
	if err := watch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if ws := watch.waitExit(t, 10*time.Second); ws.ExitCode() != 0 {
		t.Errorf("watch after Ctrl-C: %v, want exit 0; stderr:\n%s", ws, watch.stderr.String())
	}

	// shutdown stops the daemon cleanly, runtime included.
	d.mustCtl("", "shutdown")
	if ds := d.waitExit(t, exitTimeout); !ds.Exited() || ds.ExitCode() != 0 {
		t.Fatalf("shardd after shardctl shutdown: %v, want exit status 0", ds)
	}
	if pids := runtimePIDs(t, id); len(pids) != 0 {
		t.Errorf("runtime of %s outlived shardd: %v", id, pids)
	}
	if exists(t, d.socket()) {
		t.Errorf("%s left behind after shutdown", d.socket())
	}
}

// watchedText joins the text deltas watch printed for agent id, lines of
// the form `<id> message_delta text "<quoted>"`.
func watchedText(out, id string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(out, "\n") {
		agent, typ, rest, ok := watchFields(line)
		if !ok || agent != id || typ != "message_delta" {
			continue
		}
		q, ok := strings.CutPrefix(rest, "text ")
		if !ok {
			continue
		}
		if s, err := strconv.Unquote(q); err == nil {
			b.WriteString(s)
		}
	}
	return b.String()
}

// watchFields splits a watch line, "15:04:05 agent-…(name) type summary",
// into the agent id (without its name), the event type and the summary. A
// name may hold spaces (a title, "scout · ada"): the agent field runs to
// the ") " that closes it.
func watchFields(line string) (agent, typ, rest string, ok bool) {
	_, after, found := strings.Cut(line, " ")
	if !found {
		return "", "", "", false
	}
	who, tail, found := strings.Cut(after, " ")
	if id, _, named := strings.Cut(who, "("); named && !strings.HasSuffix(who, ")") {
		closed := strings.Index(after, ") ")
		if closed < 0 {
			return "", "", "", false
		}
		who, tail = id, after[closed+2:]
	} else if !found {
		return "", "", "", false
	}
	agent, _, _ = strings.Cut(who, "(")
	typ, rest, _ = strings.Cut(tail, " ")
	return agent, typ, rest, typ != ""
}

// watchSaw reports whether watch printed an event of type typ about agent
// whose summary starts with summary.
func watchSaw(out, agent, typ string, summary ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		a, ty, rest, ok := watchFields(line)
		if ok && a == agent && ty == typ && (len(summary) == 0 || strings.HasPrefix(rest, summary[0])) {
			return true
		}
	}
	return false
}
