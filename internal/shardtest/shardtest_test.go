//go:build linux

package shardtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestBuffer: a capped Buffer keeps its first Max bytes and never fails a
// write.
func TestBuffer(t *testing.T) {
	b := &Buffer{Max: 4}
	for _, s := range []string{"ab", "cd", "ef"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "abcd" {
		t.Errorf("String() = %q; want abcd", got)
	}
	if got := Tail("abcdef", 3); got != "…def" {
		t.Errorf("Tail = %q", got)
	}
}

// TestCleanEnv: SHARD_* variables never reach a child.
func TestCleanEnv(t *testing.T) {
	t.Setenv("SHARD_HOME", "/nowhere")
	env := CleanEnv("SHARD_HOME=/here")
	for _, kv := range env[:len(env)-1] {
		if strings.HasPrefix(kv, "SHARD_") {
			t.Errorf("CleanEnv kept %s", kv)
		}
	}
	if env[len(env)-1] != "SHARD_HOME=/here" {
		t.Errorf("extra not appended: %v", env[len(env)-1])
	}
}

// TestProcTerminateAndKillEnv: Terminate reports a clean exit, a process
// found by its environment is killed by KillEnv.
func TestProcTerminateAndKillEnv(t *testing.T) {
	sleep := testhost.Tool(t, "sleep")
	cmd := exec.Command(sleep, "60")
	p, err := StartProc(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if err := p.Terminate(10 * time.Second); err == nil {
		t.Errorf("Terminate of sleep (killed by SIGTERM) = nil; want an unclean exit")
	}
	if !p.Exited() || p.State() == nil {
		t.Fatalf("not exited after Terminate")
	}

	mark := "SHARDTEST_MARK=" + filepath.Base(t.TempDir())
	cmd = exec.Command(sleep, "60")
	cmd.Env = append(os.Environ(), mark)
	q, err := StartProc(cmd)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ProcsWithEnv(mark)) == 0 { // the exec has not happened yet
		if time.Now().After(deadline) {
			t.Fatalf("ProcsWithEnv(%s) found nothing", mark)
		}
		time.Sleep(PollInterval)
	}
	if got := KillEnv(mark, 5*time.Second); len(got) != 1 || got[0] != q.PID() {
		t.Errorf("KillEnv = %v; want [%d]", got, q.PID())
	}
	if _, err := q.WaitExit(10 * time.Second); err != nil {
		t.Error(err)
	}
}

// TestDaemonLifecycle builds shardd, starts it on a private home, waits for
// the socket and daemon.json, stops it with SIGTERM (exit 0) and reads its
// log.
func TestDaemonLifecycle(t *testing.T) {
	if testing.Short() {
		testhost.Skip(t, "-short: builds shardd")
	}
	bins, err := Build(t.TempDir(), nil, os.Stderr, "shardd")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := TempDir("st")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	out := &Buffer{}
	d, err := StartDaemon(DaemonOptions{Shardd: bins[0], Home: filepath.Join(dir, "home"),
		Args: []string{"--web-port", "0", "--store.no-sync"}, Stdout: out, Stderr: out})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Reap()
	if err := d.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := d.WaitDiscovery(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if u, err := d.WebURL(); err != nil || !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("WebURL = %q, %v", u, err)
	}
	if err := d.Terminate(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if log, err := d.Log(0); err != nil || log == "" {
		t.Errorf("Log = %q, %v; want shardd.log", log, err)
	}
	if left := d.Reap(); len(left) != 0 {
		t.Errorf("Reap after a clean stop found %v", left)
	}
}
