//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
)

// createAgent creates an agent in a fresh directory with `shardctl agents
// create --cwd DIR -o json` and returns its id and directory.
func (d *daemon) createAgent() (id, cwd string) {
	d.t.Helper()
	cwd = shortTemp(d.t)
	r := d.mustCtl("", "agents", "create", "--cwd", cwd, "-o", "json")
	var data protocol.AgentCreateData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil {
		d.t.Fatalf("agents create -o json printed %q: %v", r.stdout, err)
	}
	if data.AgentID == "" {
		d.t.Fatalf("agents create -o json printed no agent_id: %q", r.stdout)
	}
	return data.AgentID, cwd
}

func TestSIGTERMExitsCleanlyWithNoChildLeft(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	a, _ := d.createAgent()
	b, _ := d.createAgent()
	if a == b {
		t.Fatalf("two creates returned the same agent id %s", a)
	}
	// Runtimes start on create: each agent has exactly one live runtime,
	// a child of the daemon.
	for _, id := range []string{a, b} {
		var pids []int
		eventually(t, 10*time.Second, "runtime process of "+id, func() bool {
			pids = runtimePIDs(t, id)
			return len(pids) > 0
		})
		if len(pids) != 1 {
			t.Fatalf("agent %s has %d runtime processes %v, want 1", id, len(pids), pids)
		}
		if st, err := procstat.Read(pids[0]); err != nil || st.PPID != d.pid() {
			t.Errorf("runtime %d of %s has parent %d (%v), want shardd %d", pids[0], id, st.PPID, err, d.pid())
		}
	}
	eventually(t, 5*time.Second, "daemon.json written", func() bool { return exists(t, d.discovery()) })
	var disc struct {
		PID int `json:"pid"`
	}
	if raw, err := os.ReadFile(d.discovery()); err != nil || json.Unmarshal(raw, &disc) != nil || disc.PID != d.pid() {
		t.Errorf("daemon.json = %q (err %v), want pid %d", raw, err, d.pid())
	}

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := d.waitExit(t, exitTimeout)
	if !st.Exited() || st.ExitCode() != 0 {
		t.Fatalf("shardd after SIGTERM: %v, want exit status 0\nstderr:\n%s", st, d.stderr.String())
	}

	// Checked at once: a clean exit has already stopped and reaped its
	// runtimes; an orphan would still be alive here.
	for _, id := range []string{a, b} {
		if pids := runtimePIDs(t, id); len(pids) != 0 {
			t.Errorf("runtime processes of %s outlived shardd: %v", id, pids)
		}
	}
	for _, path := range []string{d.socket(), d.discovery()} {
		if exists(t, path) {
			t.Errorf("%s left behind after a clean exit", path)
		}
	}
	logPath := filepath.Join(d.logDir(), "shardd.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatalf("shardd.log: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("shardd.log mode = %#o, want 0600", mode)
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "shardd stopped") {
		t.Errorf("shardd.log does not record %q:\n%s", "shardd stopped", log)
	}
}

func TestSecondShardOnSameHomeFails(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	eventually(t, 5*time.Second, "daemon.json written", func() bool { return exists(t, d.discovery()) })
	discBefore, err := os.ReadFile(d.discovery())
	if err != nil {
		t.Fatal(err)
	}

	second := exec.Command(sharddBin, "--web-port", "0", "--store.no-sync", "--store.lock-timeout", "500ms")
	second.Env = sharddEnv(d.home)
	began := time.Now()
	r := runCmd(t, second, "")
	took := time.Since(began)
	if r.code == 0 {
		t.Fatalf("second shardd on %s exited 0; stderr:\n%s", d.home, r.stderr)
	}
	if took > 5*time.Second {
		t.Errorf("second shardd took %s to fail, want under 5s", took)
	}
	if !strings.Contains(r.stderr, d.home) {
		t.Errorf("second shardd's stderr does not name the home %s:\n%s", d.home, r.stderr)
	}

	// The first daemon is untouched: still running, still serving, and its
	// discovery file is still its own.
	if d.exited() {
		t.Fatalf("first shardd exited: %v", d.State())
	}
	st := d.mustCtl("", "status", "-o", "json")
	var data protocol.DaemonStatusData
	if err := json.Unmarshal([]byte(st.stdout), &data); err != nil || data.PID != d.pid() {
		t.Errorf("status after the second shardd failed = %q (err %v), want pid %d", st.stdout, err, d.pid())
	}
	if discAfter, err := os.ReadFile(d.discovery()); err != nil || string(discAfter) != string(discBefore) {
		t.Errorf("daemon.json changed by the failed second shardd: %q → %q (err %v)", discBefore, discAfter, err)
	}
}

// TestRuntimesDieWithTheDaemon: a daemon killed with SIGKILL cannot clean
// up, so its runtime children must go by themselves (Pdeathsig).
func TestRuntimesDieWithTheDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id, _ := d.createAgent()
	eventually(t, 10*time.Second, "runtime process", func() bool { return len(runtimePIDs(t, id)) == 1 })
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 10*time.Second)
	eventually(t, 10*time.Second, "runtime died with the daemon", func() bool { return len(runtimePIDs(t, id)) == 0 })
}
