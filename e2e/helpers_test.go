//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/shardtest"
)

// Deadlines. They bound waits that normally end in milliseconds; they are
// generous because the binaries may be race-instrumented on a busy machine.
const (
	readyTimeout = 15 * time.Second // shardd accepting on its socket
	exitTimeout  = 15 * time.Second // shardd exiting after SIGTERM or shutdown
	cmdTimeout   = 30 * time.Second // one shardctl or short-lived shardd run
	pollInterval = 20 * time.Millisecond
)

// shortTemp returns a short temporary directory, removed when t ends: unix
// socket paths are limited to 108 bytes, which t.TempDir() can exceed.
func shortTemp(t *testing.T) string {
	t.Helper()
	return shardtest.ShortTemp(t, "sh")
}

// newHome returns a fresh, not yet existing, Shard home path.
func newHome(t *testing.T) string {
	t.Helper()
	return filepath.Join(shortTemp(t), "home")
}

// baseEnv is the test's environment without any SHARD_* variable, so that
// the developer's own settings never leak into a test.
func baseEnv() []string { return shardtest.CleanEnv() }

// sharddEnv is the environment of a shardd on home, plus extra variables.
func sharddEnv(home string, extra ...string) []string {
	return shardtest.CleanEnv(append([]string{"SHARD_HOME=" + home}, extra...)...)
}

// randomToken returns a unique string for one test.
func randomToken(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// proc is a subprocess the test started (shardtest.Proc) with its output
// captured.
type proc struct {
	*shardtest.Proc
	cmd    *exec.Cmd // Proc.Cmd, for the signals tests send
	stdout *shardtest.Buffer
	stderr *shardtest.Buffer
}

// startProc starts cmd with its output captured. The process gets SIGKILL
// if the test binary dies first.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	sp, err := shardtest.StartProc(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.Proc, p.cmd = sp, cmd
	return p
}

func (p *proc) pid() int     { return p.PID() }
func (p *proc) exited() bool { return p.Exited() }
func (p *proc) kill()        { p.Kill() }

// waitExit waits up to timeout for the process to end and returns its
// state, failing the test if it is still running.
func (p *proc) waitExit(t *testing.T, timeout time.Duration) *os.ProcessState {
	t.Helper()
	st, err := p.WaitExit(timeout)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// daemon is one shardd subprocess on its own home.
type daemon struct {
	t    *testing.T
	home string
	*proc
}

// startDaemon runs shardd on a fresh home with --web-port 0 and
// --store.no-sync plus extra flags, and returns once its socket accepts
// clients. The test's cleanup kills it if it is still alive and kills any
// process left with its SHARD_HOME (runtime children).
func startDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	return startDaemonAt(t, newHome(t), extra...)
}

// startDaemonAt is startDaemon on a given (possibly existing) home.
func startDaemonAt(t *testing.T, home string, extra ...string) *daemon {
	t.Helper()
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args:   append([]string{"--web-port", "0", "--store.no-sync"}, extra...),
		Stdout: p.stdout, Stderr: p.stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Proc, p.cmd = sd.Proc, sd.Cmd
	d := &daemon{t: t, home: home, proc: p}
	t.Cleanup(d.cleanup)
	d.waitReady()
	return d
}

// sd is d as a shardtest.Daemon.
func (d *daemon) sd() *shardtest.Daemon { return &shardtest.Daemon{Home: d.home, Proc: d.Proc} }

func (d *daemon) socket() string    { return d.sd().Socket() }
func (d *daemon) discovery() string { return d.sd().Discovery() }
func (d *daemon) logDir() string    { return d.sd().LogDir() }

// waitReady waits until a client completes the hello handshake.
func (d *daemon) waitReady() {
	d.t.Helper()
	if err := d.sd().WaitReady(readyTimeout); err != nil {
		d.t.Fatalf("%v\nstderr:\n%s", err, d.stderr.String())
	}
}

// dial connects a Go client to the daemon; it is closed when the test ends.
// Events are drained so the client's reader never blocks.
func (d *daemon) dial() *client.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		d.t.Fatalf("dial %s: %v", d.socket(), err)
	}
	d.t.Cleanup(func() { c.Close() })
	go func() {
		for range c.Events() {
		}
	}()
	return c
}

func (d *daemon) cleanup() {
	// Whatever still runs with this home (a runtime orphaned by a killed
	// daemon, a stray shardctl) is ours: end it so nothing outlives the test.
	if left := d.sd().Reap(); len(left) > 0 {
		d.t.Logf("killing processes left on %s: %v", d.home, left)
	}
	if d.t.Failed() {
		d.t.Logf("shardd exit: %v\nshardd stderr:\n%s", d.State(), d.stderr.String())
		if b, err := d.sd().Log(0); err == nil {
			d.t.Logf("shardd.log:\n%s", b)
		}
	}
}

// result is the outcome of one finished command.
type result struct {
	stdout, stderr string
	code           int // -1 when killed by a signal
}

// runCmd runs cmd to completion with stdin, bounded by cmdTimeout.
func runCmd(t *testing.T, cmd *exec.Cmd, stdin string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	timer := time.AfterFunc(cmdTimeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("%s %q did not finish within %s\nstdout:\n%s\nstderr:\n%s",
			filepath.Base(cmd.Path), cmd.Args[1:], cmdTimeout, stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v", filepath.Base(cmd.Path), cmd.Args[1:], err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// ctlCmd builds a shardctl command against d, selecting it with --home.
func (d *daemon) ctlCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(shardctlBin, append([]string{"--home", d.home}, args...)...)
	cmd.Env = append(baseEnv(), "NO_COLOR=1")
	return cmd
}

// ctl runs shardctl against d with stdin and returns its outcome.
func (d *daemon) ctl(stdin string, args ...string) result {
	d.t.Helper()
	return runCmd(d.t, d.ctlCmd(args...), stdin)
}

// mustCtl runs shardctl and fails the test unless it exits 0.
func (d *daemon) mustCtl(stdin string, args ...string) result {
	d.t.Helper()
	r := d.ctl(stdin, args...)
	if r.code != 0 {
		d.t.Fatalf("shardctl %q exited %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// procsWithEnv returns the live (non-zombie) processes whose environment
// holds the exact entry kv ("NAME=value").
func procsWithEnv(t *testing.T, kv string) []int {
	t.Helper()
	return shardtest.ProcsWithEnv(kv)
}

// runtimePIDs finds the live runtime processes serving agent id, by the
// SHARD_AGENT_ID the daemon gives them.
func runtimePIDs(t *testing.T, id string) []int {
	t.Helper()
	return procsWithEnv(t, "SHARD_AGENT_ID="+id)
}

// eventually polls cond until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// exists reports whether path exists (without following a final symlink).
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err == nil {
		return true
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v", path, err)
	}
	return false
}
