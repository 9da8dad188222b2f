//go:build linux

package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// listAgent is agent id as shardctl agents ls -o json lists it.
func listAgent(t *testing.T, d *daemon, id string) protocol.AgentInfo {
	t.Helper()
	var list protocol.AgentListData
	out := d.mustCtl("", "agents", "ls", "-o", "json").stdout
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("agents ls -o json printed %q: %v", out, err)
	}
	for _, a := range list.Agents {
		if a.AgentID == id {
			return a
		}
	}
	t.Fatalf("agents ls does not list %s:\n%s", id, out)
	return protocol.AgentInfo{}
}

// TestShardctlTitlesReasoningAndForks drives the real daemon and runtime
// from shardctl: an unnamed agent takes its first prompt's title, attach
// sets a reasoning level and forks into an agent that answers on its own,
// agents rename titles it, and the source never sees the fork's turn.
func TestShardctlTitlesReasoningAndForks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cwd := shortTemp(t)
	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd, "--model", "sim-think").stdout)
	d.mustCtl("", "prompt", id, "sim: say first answer")
	if got := listAgent(t, d, id).Title; got != "sim: say first answer" {
		t.Fatalf("automatic title = %q", got)
	}
	if ls := d.mustCtl("", "agents", "ls").stdout; !strings.Contains(ls, "sim: say first answer") {
		t.Errorf("agents ls does not show the title:\n%s", ls)
	}

	r := d.mustCtl("/reasoning high\n/reasoning\n/fork\n", "attach", id)
	for _, want := range []string{"reasoning: off → high", "* high"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("attach output lacks %q:\n%s", want, r.stdout)
		}
	}
	m := regexp.MustCompile(`the fork is agent (agent-\S+):`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("attach /fork did not create an agent:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	fork := m[1]
	if out := d.mustCtl("", "prompt", fork, "sim: say on the fork").stdout; out != "on the fork\n" {
		t.Errorf("prompt on the fork printed %q", out)
	}
	if out := d.mustCtl("", "agents", "rename", fork, "The fork").stdout; !strings.Contains(out, `"The fork"`) {
		t.Errorf("agents rename printed %q", out)
	}
	if got := listAgent(t, d, fork).Title; got != "The fork" {
		t.Errorf("the fork's title = %q", got)
	}
	if out := d.mustCtl("", "agents", "show", "the fork").stdout; !strings.Contains(out, fork) {
		t.Errorf("agents show by title:\n%s", out)
	}

	// The source's transcript has its own turn only; the fork's has both.
	r = d.mustCtl("/sessions\n", "attach", id)
	if strings.Contains(r.stdout, "on the fork") {
		t.Errorf("the source shows the fork's turn:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "fork sess-") {
		t.Errorf("/sessions does not list the fork:\n%s", r.stdout)
	}
}
