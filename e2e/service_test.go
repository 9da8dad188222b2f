//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// discoveryFile is daemon.json as a test reads it.
type discoveryFile struct {
	PID    int    `json:"pid"`
	WebURL string `json:"web_url"`
}

func readDiscoveryFile(t *testing.T, path string) discoveryFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var d discoveryFile
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decode %s %q: %v", path, raw, err)
	}
	return d
}

// notifyListener is a service manager's notification socket.
type notifyListener struct {
	t    *testing.T
	addr string // NOTIFY_SOCKET value
	conn *net.UnixConn
}

func listenNotify(t *testing.T, addr string) *notifyListener {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifyListener{t: t, addr: addr, conn: conn}
}

// next returns the next notification datagram, failing after timeout.
func (n *notifyListener) next(timeout time.Duration) string {
	n.t.Helper()
	buf := make([]byte, 4096)
	_ = n.conn.SetReadDeadline(time.Now().Add(timeout))
	k, err := n.conn.Read(buf)
	if err != nil {
		n.t.Fatalf("no notification on %s: %v", n.addr, err)
	}
	return string(buf[:k])
}

// startNotified starts shardd on home under a fake service manager
// listening on notifyAddr, without waiting for it in any other way.
func startNotified(t *testing.T, home, notifyAddr string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"--web-port", "0", "--store.no-sync"}, extra...)
	cmd := exec.Command(sharddBin, args...)
	cmd.Env = sharddEnv(home, "NOTIFY_SOCKET="+notifyAddr)
	d := &daemon{t: t, home: home, proc: startProc(t, cmd)}
	t.Cleanup(d.cleanup)
	return d
}

func TestServiceNotifiesReadyAndStopping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"path", func(t *testing.T) string { return filepath.Join(shortTemp(t), "notify") }},
		{"abstract", func(t *testing.T) string { return "@" + randomToken(t, "shard-notify") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := listenNotify(t, tc.addr(t))
			d := startNotified(t, newHome(t), n.addr)

			msg := n.next(readyTimeout)
			if !strings.HasPrefix(msg, "READY=1\n") || !strings.Contains(msg, "STATUS=listening on ") {
				t.Fatalf("first notification = %q, want READY=1 with a STATUS", msg)
			}
			// READY means both transports accept now, with no retry.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, d.socket())
			if err != nil {
				t.Fatalf("unix socket not accepting at READY: %v", err)
			}
			defer c.Close()
			disc := readDiscoveryFile(t, d.discovery())
			if disc.PID != d.pid() {
				t.Fatalf("daemon.json pid %d, want %d", disc.PID, d.pid())
			}
			resp, err := http.Get(disc.WebURL + "/metrics")
			if err != nil {
				t.Fatalf("web listener not accepting at READY: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /metrics = %d", resp.StatusCode)
			}

			// Runtime children do not inherit the service manager's socket.
			var created protocol.AgentCreateData
			if err := c.Call(ctx, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &created); err != nil {
				t.Fatalf("agent.create: %v", err)
			}
			pids := runtimePIDs(t, created.AgentID)
			if len(pids) != 1 {
				t.Fatalf("runtime processes of %s: %v", created.AgentID, pids)
			}
			env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "environ"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(env, []byte("NOTIFY_SOCKET=")) {
				t.Errorf("runtime %d inherited NOTIFY_SOCKET", pids[0])
			}

			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if msg := n.next(exitTimeout); msg != "STOPPING=1" {
				t.Fatalf("notification after SIGTERM = %q, want STOPPING=1", msg)
			}
			if st := d.waitExit(t, exitTimeout); st.ExitCode() != 0 {
				t.Fatalf("shardd exit = %v, want 0\nstderr:\n%s", st, d.stderr.String())
			}
			if exists(t, d.discovery()) {
				t.Error("daemon.json left behind by a clean stop")
			}
		})
	}
}

func TestServiceStaleDiscoveryIsReplaced(t *testing.T) {
	t.Parallel()
	// A pid that is certainly gone: a process that ran and was reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// A live process that is not a shardd.
	other := startProc(t, exec.Command("sleep", "60"))
	t.Cleanup(other.kill)

	for _, tc := range []struct {
		name, content, reason string
	}{
		{"dead pid", fmt.Sprintf(`{"pid":%d,"version":"old","protocol_version":"0.1.0","web_url":"http://127.0.0.1:1"}`, gone.Process.Pid), "is not running"},
		{"live non-shardd pid", fmt.Sprintf(`{"pid":%d,"version":"old","protocol_version":"0.1.0","web_url":"http://127.0.0.1:1"}`, other.pid()), "is not a shardd"},
		{"garbage", `{"pid":`, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := newHome(t)
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "daemon.json"), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDaemonAt(t, home)
			eventually(t, 5*time.Second, "daemon.json rewritten", func() bool {
				raw, err := os.ReadFile(d.discovery())
				return err == nil && json.Valid(raw) && readDiscoveryFile(t, d.discovery()).PID == d.pid()
			})
			if disc := readDiscoveryFile(t, d.discovery()); disc.WebURL == "http://127.0.0.1:1" {
				t.Errorf("daemon.json still names the stale web_url: %+v", disc)
			}
			log, err := os.ReadFile(filepath.Join(d.logDir(), "shardd.log"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(log), "replacing stale daemon.json") || !strings.Contains(string(log), tc.reason) {
				t.Errorf("shardd.log does not explain the stale daemon.json (%q):\n%s", tc.reason, log)
			}
		})
	}
}

func TestServiceSecondDaemonNamesTheLiveOne(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	eventually(t, 5*time.Second, "daemon.json written", func() bool { return exists(t, d.discovery()) })
	before, err := os.ReadFile(d.discovery())
	if err != nil {
		t.Fatal(err)
	}
	second := exec.Command(sharddBin, "--web-port", "0", "--store.no-sync", "--store.lock-timeout", "300ms")
	second.Env = sharddEnv(d.home)
	r := runCmd(t, second, "")
	if r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("another shardd (pid %d)", d.pid())) {
		t.Fatalf("second shardd: exit %d, stderr %q; want a failure naming pid %d", r.code, r.stderr, d.pid())
	}
	if after, err := os.ReadFile(d.discovery()); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the live daemon's daemon.json changed: %q → %q (err %v)", before, after, err)
	}
}

func TestServiceForegroundLogsToStderr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		env   []string
		want  bool
	}{
		{"flag", []string{"--foreground"}, nil, true},
		{"env", nil, []string{"SHARD_FOREGROUND=true"}, true},
		{"off", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := newHome(t)
			// stderr is a pipe, as under a container runtime: no terminal.
			cmd := exec.Command(sharddBin, append([]string{"--web-port", "0", "--store.no-sync"}, tc.flags...)...)
			cmd.Env = sharddEnv(home, tc.env...)
			d := &daemon{t: t, home: home, proc: startProc(t, cmd)}
			t.Cleanup(d.cleanup)
			d.waitReady()
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if st := d.waitExit(t, exitTimeout); st.ExitCode() != 0 {
				t.Fatalf("exit %v", st)
			}
			stderr := d.stderr.String()
			for _, rec := range []string{`msg="shardd started"`, `msg="shardd stopped"`} {
				if got := strings.Contains(stderr, rec); got != tc.want {
					t.Errorf("stderr has %s: %v, want %v\nstderr:\n%s", rec, got, tc.want, stderr)
				}
			}
			// The log file is written either way.
			log, err := os.ReadFile(filepath.Join(d.logDir(), "shardd.log"))
			if err != nil || !strings.Contains(string(log), `"msg":"shardd started"`) {
				t.Errorf("shardd.log = %q (err %v)", log, err)
			}
		})
	}
}

func TestServiceAgentLogIsBoundedAtRuntimeStart(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemonAt(t, home)
	c := d.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var created protocol.AgentCreateData
	if err := c.Call(ctx, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &created); err != nil {
		t.Fatalf("agent.create: %v", err)
	}
	id := created.AgentID
	if err := c.Call(ctx, &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatalf("agent.terminate: %v", err)
	}
	eventually(t, 10*time.Second, "runtime stopped", func() bool { return len(runtimePIDs(t, id)) == 0 })

	// The agent's log grew past the bound (a chatty runtime): the next
	// generation moves it aside and starts a fresh file.
	logPath := filepath.Join(d.logDir(), "agents", id+".log")
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("stderr noise\n"), (11<<20)/13)
	if _, err := f.Write(big); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var att protocol.AgentAttachData
	if err := c.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, &att); err != nil {
		t.Fatalf("agent.attach (restores the runtime): %v", err)
	}
	fi, err := os.Stat(logPath + ".1")
	if err != nil || fi.Size() < int64(len(big)) {
		t.Fatalf("%s.1 = %v (err %v), want the old log moved aside", logPath, fi, err)
	}
	fi, err = os.Stat(logPath)
	if err != nil || fi.Size() >= 1<<20 {
		t.Fatalf("%s = %v (err %v), want a fresh, small log", logPath, fi, err)
	}
}

// TestServiceAgentLogRotatesWhileTheRuntimeRuns: log.max_bytes and
// log.backups bound an agent's stderr log while its runtime runs. The
// runtime profile is a shell that writes 256 KiB to stderr and then execs
// the reference runtime in the same process: once agent.attach has its
// sync, the writes are done, the runtime runs, and its log has rotated.
func TestServiceAgentLogRotatesWhileTheRuntimeRuns(t *testing.T) {
	t.Parallel()
	const maxBytes, backups = 4096, 2
	home := newHome(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	noisy := `i=0; while [ $i -lt 4096 ]; do printf '%063d\n' $i >&2; i=$((i+1)); done; exec "$0" agent --headless`
	cfg := fmt.Sprintf("log:\n  max_bytes: %d\n  backups: %d\nruntimes:\n  shard:\n    kind: shard\n    command: [/bin/sh, -c, %q, %q]\n",
		maxBytes, backups, noisy, sharddBin)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, home)
	c := d.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var created protocol.AgentCreateData
	if err := c.Call(ctx, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &created); err != nil {
		t.Fatalf("agent.create: %v", err)
	}
	id := created.AgentID
	var att protocol.AgentAttachData
	if err := c.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, &att); err != nil {
		t.Fatalf("agent.attach: %v", err)
	}
	if len(runtimePIDs(t, id)) == 0 {
		t.Fatal("no runtime runs after attach")
	}
	// All of the 256 KiB but the pipe's buffer (64 KiB) and one read went
	// into the log while the runtime ran: it rotated more than backups
	// times, and only backups old files are kept.
	logPath := filepath.Join(d.logDir(), "agents", id+".log")
	checkLogs := func(when string) {
		t.Helper()
		matches, err := filepath.Glob(logPath + "*")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{logPath, logPath + ".1", logPath + ".2"}
		if strings.Join(matches, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: agent log files %v, want %v", when, matches, want)
		}
		for _, m := range matches {
			if fi, err := os.Stat(m); err != nil || fi.Size() > maxBytes {
				t.Fatalf("%s: %s = %v (err %v), want at most %d bytes", when, filepath.Base(m), fi, err, maxBytes)
			}
		}
	}
	checkLogs("while running")
	if err := c.Call(ctx, &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatalf("agent.terminate: %v", err)
	}
	eventually(t, 10*time.Second, "runtime stopped", func() bool { return len(runtimePIDs(t, id)) == 0 })
	checkLogs("after the runtime stopped")
	// shardd.log is bound by the same settings.
	for _, m := range []string{"shardd.log", "shardd.log.1", "shardd.log.2"} {
		if fi, err := os.Stat(filepath.Join(d.logDir(), m)); err == nil && fi.Size() > maxBytes {
			t.Errorf("%s has %d bytes, over %d", m, fi.Size(), maxBytes)
		}
	}
	if _, err := os.Stat(filepath.Join(d.logDir(), "shardd.log.3")); !os.IsNotExist(err) {
		t.Errorf("shardd.log.3 with log.backups 2: %v", err)
	}
}
