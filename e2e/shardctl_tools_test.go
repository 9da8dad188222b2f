package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShardctlAgentTools: `shardctl agents create --tools … --skills …`
// makes an agent whose model cannot run a tool outside the list (even when
// the person at the prompt would allow it) and has the skill tool for its
// skills; the daemon refuses an unknown tool (listing the known ones) and a
// skill that does not exist.
func TestShardctlAgentTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cwd := shortTemp(t)
	skill := filepath.Join(cwd, ".shard", "skills", "deploy", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skill, []byte("---\nname: deploy\ndescription: Ship it.\n---\nDEPLOY-BODY\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd, "--tools", "read,ls", "--skills", "deploy").stdout)
	if show := d.mustCtl("", "agents", "show", id).stdout; !strings.Contains(show, "read, ls") || !strings.Contains(show, "deploy") {
		t.Errorf("agents show lacks the tools and skills:\n%s", show)
	}
	// "y" would allow the write if it were asked about; it is refused first.
	r := d.ctl("y\ny\n", "prompt", id, `sim: tool write {"path":"x.txt","content":"hi"}`)
	if !strings.Contains(r.stderr, `"write" is not available`) {
		t.Errorf("prompt with a refused tool: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(cwd, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused write ran: %v", err)
	}
	r = d.mustCtl("", "prompt", id, `sim: tool skill {"name":"deploy"}`)
	if strings.Contains(r.stderr, "not available") || strings.Contains(r.stderr, "unknown tool") {
		t.Errorf("skill tool refused:\n%s", r.stderr)
	}

	r = d.ctlCode(1, "agents", "create", "--cwd", cwd, "--tools", "read,teleport")
	if !strings.Contains(r.stderr, "INVALID_REQUEST") || !strings.Contains(r.stderr, "teleport") || !strings.Contains(r.stderr, "read, ls, grep") {
		t.Errorf("unknown tool: %s", r.stderr)
	}
	r = d.ctlCode(1, "agents", "create", "--cwd", cwd, "--skills", "nope")
	if !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("missing skill: %s", r.stderr)
	}
}
