//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Deadlines. They bound waits that normally end in milliseconds and are
// hang guards, never speed assertions: the machine is shared and busy.
const (
	readyTimeout = 30 * time.Second // shardd accepting on its socket
	exitTimeout  = 30 * time.Second // shardd exiting after SIGTERM or SIGKILL
	callTimeout  = 30 * time.Second // one request/response
	cmdTimeout   = 60 * time.Second // one shardctl run
	pollInterval = 20 * time.Millisecond
)

// shortTemp returns a short temporary directory, removed when t ends: unix
// socket paths are limited to 108 bytes, which t.TempDir() can exceed.
func shortTemp(t testing.TB) string {
	t.Helper()
	return shardtest.ShortTemp(t, "sf")
}

// newHome returns a fresh, not yet existing, Shard home path.
func newHome(t testing.TB) string {
	t.Helper()
	return filepath.Join(shortTemp(t), "home")
}

// baseEnv is the test's environment without any SHARD_* variable.
func baseEnv() []string { return shardtest.CleanEnv() }

// daemonOpts configures one shardd run.
type daemonOpts struct {
	// flags are added after --web-port 0 --store.no-sync.
	flags []string
	// env is added to the daemon's (otherwise SHARD_*-free) environment.
	env []string
}

// daemon is one shardd subprocess on a home (a shardtest.Daemon whose
// stdout and stderr both go to stderr).
type daemon struct {
	t    testing.TB
	home string
	*shardtest.Daemon
	stderr *shardtest.Buffer
}

// startDaemon runs shardd on home and returns once its socket answers
// hello and daemon.json names the web listener. The test's cleanup kills
// it, and anything left with its SHARD_HOME, if still alive.
func startDaemon(t testing.TB, home string, o daemonOpts) *daemon {
	t.Helper()
	out := &shardtest.Buffer{}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args:   append([]string{"--web-port", "0", "--store.no-sync"}, o.flags...),
		Env:    o.env,
		Stdout: out, Stderr: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, home: home, Daemon: sd, stderr: out}
	t.Cleanup(d.cleanup)
	d.waitReady()
	return d
}

func (d *daemon) pid() int        { return d.PID() }
func (d *daemon) socket() string  { return d.Socket() }
func (d *daemon) dbPath() string  { return filepath.Join(d.home, "shard.db") }
func (d *daemon) homeEnv() string { return d.HomeEnv() }
func (d *daemon) exited() bool    { return d.Exited() }

func (d *daemon) waitReady() {
	d.t.Helper()
	if err := d.WaitReady(readyTimeout); err != nil {
		d.t.Fatalf("%v\nstderr:\n%s", err, d.stderr.String())
	}
	// daemon.json (with the web URL) is written right after the listeners.
	if err := d.WaitDiscovery(readyTimeout); err != nil {
		d.t.Fatal(err)
	}
}

// waitExit waits for the process to end and returns its state.
func (d *daemon) waitExit() *os.ProcessState {
	d.t.Helper()
	st, err := d.WaitExit(exitTimeout)
	if err != nil {
		d.t.Fatal(err)
	}
	return st
}

// sigkill kills shardd at once and waits for it.
func (d *daemon) sigkill() {
	d.t.Helper()
	if !d.exited() {
		_ = d.Cmd.Process.Signal(syscall.SIGKILL)
	}
	d.waitExit()
}

// stop asks shardd to shut down (SIGTERM) and fails unless it exits 0.
func (d *daemon) stop() {
	d.t.Helper()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatalf("SIGTERM shardd: %v", err)
	}
	if st := d.waitExit(); !st.Success() {
		d.t.Fatalf("shardd exited with %v after SIGTERM\nstderr:\n%s", st, d.stderr.String())
	}
}

func (d *daemon) cleanup() {
	// Whatever still runs with this home is ours: end it so nothing
	// outlives the test.
	d.Reap()
	if d.t.Failed() {
		d.t.Logf("shardd (pid %d) exit: %v\nstderr:\n%s", d.pid(), d.State(), tail(d.stderr.String(), 8<<10))
		if log, err := d.Log(32 << 10); err == nil {
			d.t.Logf("shardd.log (tail):\n%s", log)
		}
	}
}

func tail(s string, n int) string { return shardtest.Tail(s, n) }

// ---- clients ----

// dial connects a Go client over the unix socket; it is closed when the
// test ends. The caller must drain Events (or use record).
func (d *daemon) dial() *client.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		d.t.Fatalf("dial %s: %v", d.socket(), err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// webURL is the daemon's http base URL from daemon.json.
func (d *daemon) webURL() string {
	d.t.Helper()
	u, err := d.WebURL()
	if err != nil {
		d.t.Fatalf("no web_url in %s: %v", d.Discovery(), err)
	}
	return u
}

func (d *daemon) wsURL() string { return "ws" + strings.TrimPrefix(d.webURL(), "http") + "/ws" }

// ticket mints a WebSocket ticket over c (a unix connection).
func ticket(t testing.TB, c *client.Conn) string {
	t.Helper()
	var data protocol.WSTicketData
	call(t, c, &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &data)
	return data.Ticket
}

// call sends msg and decodes the response into data, failing the test on
// any error.
func call(t testing.TB, c *client.Conn, msg protocol.Typed, data any) {
	t.Helper()
	if err := tryCall(c, msg, data); err != nil {
		t.Fatalf("%s: %v", msg.Head().Type, err)
	}
}

func tryCall(c *client.Conn, msg protocol.Typed, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c.Call(ctx, msg, data)
}

// protoErr returns the protocol error in err, or nil when err is a
// transport failure (or nil).
func protoErr(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

func hdr(typ, agentID string) protocol.Header { return protocol.Header{Type: typ, AgentID: agentID} }

// createAgent creates a durable agent in a fresh directory (its runtime
// starts with it) and returns its id and cwd.
func createAgent(t testing.TB, c *client.Conn) (string, string) {
	t.Helper()
	cwd := shortTemp(t)
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate, ""), Cwd: cwd}, &cr)
	return cr.AgentID, cwd
}

func attach(t testing.TB, c *client.Conn, agentID string) {
	t.Helper()
	call(t, c, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, agentID)}, nil)
}

func prompt(t testing.TB, c *client.Conn, agentID, msg string) {
	t.Helper()
	call(t, c, &protocol.Prompt{Header: hdr(protocol.TypePrompt, agentID), Message: msg}, nil)
}

// recorder keeps every event a connection receives, for later waits.
type recorder struct {
	mu     sync.Mutex
	events []client.Event
	closed bool
	wake   chan struct{}
}

// record drains c.Events into a recorder.
func record(c *client.Conn) *recorder { return recordWith(c, nil) }

// recordWith is record that also calls hook (when not nil) on each event,
// in order, from the draining goroutine.
func recordWith(c *client.Conn, hook func(client.Event)) *recorder {
	r := &recorder{wake: make(chan struct{}, 1)}
	go func() {
		for ev := range c.Events() {
			if hook != nil {
				hook(ev)
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			r.signal()
		}
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.signal()
	}()
	return r
}

func (r *recorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []client.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]client.Event(nil), r.events...)
}

// waitFor waits until some event satisfies match and returns it.
func (r *recorder) waitFor(t testing.TB, timeout time.Duration, what string, match func(client.Event) bool) client.Event {
	t.Helper()
	return r.waitFrom(t, 0, timeout, what, match)
}

// mark is the number of events recorded so far, for waitFrom.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// waitFrom is waitFor over the events recorded after the first from.
func (r *recorder) waitFrom(t testing.TB, from int, timeout time.Duration, what string, match func(client.Event) bool) client.Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := from
	for {
		r.mu.Lock()
		evs, closed := r.events[seen:], r.closed
		seen = len(r.events)
		r.mu.Unlock()
		for _, ev := range evs {
			if match(ev) {
				return ev
			}
		}
		if closed {
			t.Fatalf("connection closed before %s", what)
		}
		select {
		case <-r.wake:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// is matches events of type typ for agentID ("" for any agent).
func is(typ, agentID string) func(client.Event) bool {
	return func(ev client.Event) bool {
		h := ev.Msg.Head()
		return h.Type == typ && (agentID == "" || h.AgentID == agentID)
	}
}

// validRecord reports whether rec is what the protocol allows on the wire:
// one JSON object with a string type.
func validRecord(rec []byte) bool {
	if !json.Valid(rec) || len(bytes.TrimSpace(rec)) == 0 || bytes.TrimSpace(rec)[0] != '{' {
		return false
	}
	h, err := protocol.DecodeHeader(rec)
	return err == nil && h.Type != ""
}

// ---- /proc ----

// procInfo identifies a process across pid reuse.
type procInfo struct {
	pid   int
	start uint64
}

// procsWithEnv returns the live (non-zombie) processes whose environment
// holds the exact entry kv ("NAME=value"), with their start times.
func procsWithEnv(kv string) []procInfo {
	var out []procInfo
	for _, pid := range shardtest.ProcsWithEnv(kv) {
		if st, err := procstat.Read(pid); err == nil && !st.Exited() {
			out = append(out, procInfo{pid: pid, start: st.StartTime})
		}
	}
	return out
}

// alive reports whether p still runs (not a zombie, not a reused pid).
func (p procInfo) alive() bool {
	st, err := procstat.Read(p.pid)
	return err == nil && st.StartTime == p.start && !st.Exited()
}

// strays returns the processes of d's home that do not descend from d:
// what a crashed daemon left, or a runtime tool nobody will end.
func (d *daemon) strays() []procInfo {
	var out []procInfo
	for _, p := range procsWithEnv(d.homeEnv()) {
		if !procstat.DescendsFrom(p.pid, d.pid()) {
			out = append(out, p)
		}
	}
	return out
}

func describe(ps []procInfo) string {
	var b strings.Builder
	for _, p := range ps {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "cmdline"))
		st, _ := procstat.Read(p.pid)
		fmt.Fprintf(&b, "\n  pid %d (ppid %d, pgid %d, %c): %s", p.pid, st.PPID, st.PGRP, st.State,
			strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return b.String()
}

// rssBytes returns the resident set size of pid.
func rssBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// statusBytes returns a kB field of /proc/<pid>/status (VmRSS, RssAnon,
// RssFile, …) in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no " + field)
}

// openFDs counts the open file descriptors of pid.
func openFDs(pid int) (int, error) {
	entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	return len(entries), err
}

// ---- metrics ----

// metrics scrapes /metrics into "name{labels}" → value.
func (d *daemon) metrics() (map[string]float64, error) { return d.Metrics(callTimeout) }

func (d *daemon) mustMetrics() map[string]float64 {
	d.t.Helper()
	m, err := d.metrics()
	if err != nil {
		d.t.Fatalf("scrape metrics: %v", err)
	}
	return m
}

// ---- the store, offline ----

// offlineJobs opens the store of a stopped daemon read-only, runs bbolt's
// consistency check and returns every job record.
func offlineJobs(t testing.TB, home string) []store.Job {
	t.Helper()
	st, err := store.Open(filepath.Join(home, "shard.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open store read-only: %v", err)
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		t.Fatalf("bbolt check after the daemon stopped: %v", err)
	}
	jobs, err := st.Jobs()
	if err != nil {
		t.Fatalf("read jobs: %v", err)
	}
	return jobs
}

// doctor runs `shardctl doctor -o json` on home and returns the status of
// each check by name.
func doctor(t testing.TB, home string) map[string]string {
	t.Helper()
	cmd := exec.Command(shardctlBin, "--home", home, "doctor", "-o", "json")
	cmd.Env = append(baseEnv(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(cmdTimeout, func() { _ = cmd.Process.Kill() })
	_ = cmd.Wait() // exit 7 means a check failed: the report says which
	timer.Stop()
	var rep struct {
		Checks []struct {
			Name, Status, Detail string
		} `json:"checks"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("shardctl doctor -o json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := map[string]string{}
	for _, c := range rep.Checks {
		out[c.Name] = c.Status
		if c.Status == "fail" {
			t.Logf("doctor: %s failed: %s", c.Name, c.Detail)
		}
	}
	return out
}

// ---- small things ----

// eventually polls cond until it holds, failing after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// readAll reads r to its end (or until timeout) and returns what came.
func readAll(r io.Reader, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- res{b, err}
	}()
	select {
	case x := <-ch:
		return x.b, x.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("no end of stream after %s", timeout)
	}
}

// writeFile writes content to path, failing the test on error.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// allowAll returns an event hook that answers every permission request c
// sees with allow, as an interactive user clicking yes would.
func allowAll(c *client.Conn) func(client.Event) {
	return func(ev client.Event) {
		if req, ok := ev.Msg.(*protocol.PermissionRequest); ok {
			_ = c.Send(&protocol.PermissionResponse{Header: hdr(protocol.TypePermissionResponse, req.AgentID),
				RequestID: req.RequestID, Decision: protocol.DecisionAllow})
		}
	}
}

// waitGone waits for every process of ps to end (a zombie counts as ended)
// and fails naming the survivors.
func waitGone(t testing.TB, what string, ps []procInfo) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for {
		var alive []procInfo
		for _, p := range ps {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still alive after %s:%s", what, callTimeout, describe(alive))
		}
		time.Sleep(pollInterval)
	}
}

// groupMembers returns the live (non-zombie) processes of process group
// pgid, whatever their environment.
func groupMembers(pgid int) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PGRP == pgid && !st.Exited() {
			out = append(out, procInfo{pid: pid, start: st.StartTime})
		}
	}
	return out
}
