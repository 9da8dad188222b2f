package main

import (
	"strings"
	"testing"
)

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_shardctl", "zsh": "#compdef shardctl", "fish": "complete -c shardctl"} {
		r := runCtl(t, nil, "", "", "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, marker) {
			t.Errorf("%s: exit %d, %d bytes, stderr %q", shell, r.code, len(r.stdout), r.stderr)
		}
	}
	if r := runCtl(t, nil, "", "", "completion"); r.code != exitUsage {
		t.Errorf("no shell: exit %d", r.code)
	}
}

func TestCompletionAsksTheDaemon(t *testing.T) {
	d := agentsDaemon(t)
	r := runCtl(t, nil, d.path, "", "__complete", "agents", "show", "")
	if r.code != 0 || !strings.Contains(r.stdout, "agent-01\tbuilder (streaming)") || !strings.Contains(r.stdout, "agent-02\tscout (idle)") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	j := jobsDaemon(t, noWait)
	r = runCtl(t, nil, j.path, "", "__complete", "jobs", "wait", "job-chain", "")
	if r.code != 0 || !strings.Contains(r.stdout, "job-stuck\tsingle running") || !strings.Contains(r.stdout, "alan\tbuild failed") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// No daemon: nothing to offer, quickly.
	r = runCtl(t, nil, "/nonexistent/daemon.sock", "", "__complete", "attach", "")
	if r.code != 0 || strings.Contains(r.stdout, "agent-") {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
}
