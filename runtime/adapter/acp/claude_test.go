package acp_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/runtime/adapter"
	"github.com/shard-dev/shard/runtime/adapter/acp"
)

// claudeCommand is the claude-agent-acp adapter scripts/install-agents.sh
// installs (its bin, a node script); without it the test skips (fails in
// strict mode: testhost.Missing).
func claudeCommand(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	bin := filepath.Join(root, ".cache", "agents", "node_modules", ".bin", "claude-agent-acp")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "claude-agent-acp", err.Error())
	}
	return []string{bin}
}

// claudeEnv is the environment that points Claude Code at fake: its home
// and config in a temporary directory, its background traffic off, and no
// IS_SANDBOX (as root, a value other than "1" makes the adapter pass a flag
// the CLI refuses).
func claudeEnv(t *testing.T, fake *fakellm.Server) []string {
	t.Helper()
	home := t.TempDir()
	return []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + fake.URL, "ANTHROPIC_API_KEY=not-a-real-key",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"PATH=" + os.Getenv("PATH")}
}

// pidsWithEnv lists the live processes whose environment has entry.
func pidsWithEnv(t *testing.T, entry string) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(entry+"\x00")) {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && !st.Exited() {
			out[pid] = st.Comm
		}
	}
	return out
}

// TestClaudeSessionCloseEndsAgent: claude-agent-acp 0.23.1 keeps running
// when its stdin ends while a session is open, but the adapter closes the
// session first (session/close, which Claude advertises and answers by
// ending its claude CLI), so it exits at its stdin's end with no signal,
// and no process of the agent is left when the adapter returns. (An agent
// that ignores its stdin's end is sent SIGTERM:
// TestStopEscalatesWhenAgentIgnoresEOF.)
func TestClaudeSessionCloseEndsAgent(t *testing.T) {
	cmd := claudeCommand(t)
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "Hello from the fake model.", Usage: fakellm.Usage{Input: 42, Output: 7}}
	}))
	// As the adapter under the daemon does: the claude CLI, orphaned when
	// node ends, is the adapter's to wait for.
	if err := adapter.AdoptOrphans(); err != nil {
		t.Fatal(err)
	}
	mark := "SHARD_TEST_MARK=" + rand.Text()
	b := acp.New(acp.Options{Command: cmd, Cwd: t.TempDir(), Env: append(claudeEnv(t, fake), mark), Stderr: os.Stderr,
		SessionDir: t.TempDir()})
	h := startBackend(t, b)
	h.until(t, "sync", typeIs("sync"))
	h.send(t, map[string]any{"type": "prompt", "id": "p1", "message": "hi"})
	if got := textOf(h.until(t, "turn_end", typeIs("turn_end"))); got != "Hello from the fake model." {
		t.Fatalf("streamed text = %q", got)
	}
	var comms []string
	for _, comm := range pidsWithEnv(t, mark) {
		comms = append(comms, comm)
	}
	if !strings.Contains(strings.Join(comms, " "), "claude") {
		t.Fatalf("no claude CLI among the agent's processes %v", comms)
	}

	h.in.Close()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("the adapter did not stop")
	}
	if err := b.Err(); err == nil || strings.Contains(err.Error(), "signal") {
		t.Fatalf("the agent ended with %v, want its own exit", err)
	}
	// The CLI, orphaned when node ended, was waited for before Close
	// returned.
	if left := pidsWithEnv(t, mark); len(left) > 0 {
		t.Fatalf("processes left after the adapter stopped: %v", left)
	}
}
