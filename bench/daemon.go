//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

const (
	readyTimeout = 20 * time.Second
	reqTimeout   = 30 * time.Second
)

// daemon is one shardd subprocess on its own temporary home.
type daemon struct {
	home   string
	cmd    *exec.Cmd
	stderr *lockedBuf
	done   chan struct{}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cleanEnv is the driver's environment without SHARD_* variables.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARD_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// tempDir makes a short temporary directory (unix socket paths are limited
// to 108 bytes) removed at cleanup.
func tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "shb")
	if err != nil {
		return "", err
	}
	atCleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

// floodEnv keeps long floods measurable: with the sim's default context
// window, a flood of megabytes fills the context and the next turn compacts
// or fails instead of streaming.
var floodEnv = []string{"SHARD_COMPACTION_ENABLED=false", "SHARD_SIM_CONTEXT_WINDOW=1000000000"}

// startDaemon runs shardd on a fresh home with env added to its environment
// and waits until its socket completes a hello.
func startDaemon(o *options, env []string, extra ...string) (*daemon, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	args := []string{"--web-port", "0"}
	if o.noSync {
		args = append(args, "--store.no-sync")
	}
	args = append(args, extra...)
	cmd := exec.Command(o.shardd, args...)
	cmd.Env = cleanEnv(append([]string{"SHARD_HOME=" + home}, env...)...)
	d := &daemon{home: home, cmd: cmd, stderr: &lockedBuf{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start shardd: %w", err)
	}
	go func() { _ = cmd.Wait(); close(d.done) }()
	atCleanup(d.stop)
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-d.done:
			return nil, fmt.Errorf("shardd exited before accepting clients: %v\n%s", cmd.ProcessState, d.stderr.String())
		default:
		}
		c, err := d.dial()
		if err == nil {
			c.Close()
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("shardd not ready after %s: %v\n%s", readyTimeout, err, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) socket() string { return filepath.Join(d.home, "daemon.sock") }

// stop ends the daemon (SIGTERM, then SIGKILL after 10 s) and kills
// whatever still runs with its SHARD_HOME.
func (d *daemon) stop() {
	select {
	case <-d.done:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	killEnv("SHARD_HOME=" + d.home)
}

// killEnv SIGKILLs every live process whose environment holds kv and waits
// (up to 5 s) until none is left.
func killEnv(kv string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := procsWithEnv(kv)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procsWithEnv returns the live, non-zombie processes whose environment
// holds the exact entry kv.
func procsWithEnv(kv string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	entry := []byte(kv + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, entry) || bytes.Contains(env, append([]byte{0}, entry...))) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// dial connects a unix-socket client.
func (d *daemon) dial() (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		return nil, err
	}
	atCleanup(func() { c.Close() })
	return c, nil
}

// dialWS mints a ticket over ctl and connects a WebSocket client.
func (d *daemon) dialWS(ctl *client.Conn) (*client.Conn, error) {
	var tk protocol.WSTicketData
	if err := call(ctl, &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &tk); err != nil {
		return nil, fmt.Errorf("ws.ticket: %w", err)
	}
	url := "ws" + strings.TrimPrefix(tk.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialWebSocket(ctx, url, tk.Ticket)
	if err != nil {
		return nil, err
	}
	atCleanup(func() { c.Close() })
	return c, nil
}

// call is Conn.Call bounded by reqTimeout.
func call(c *client.Conn, msg protocol.Typed, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	return c.Call(ctx, msg, data)
}

// createAgent creates a sim agent in a fresh temporary cwd.
func createAgent(c *client.Conn) (string, error) {
	cwd, err := tempDir()
	if err != nil {
		return "", err
	}
	var data protocol.AgentCreateData
	if err := call(c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data); err != nil {
		return "", fmt.Errorf("agent.create: %w", err)
	}
	return data.AgentID, nil
}

// attachSync attaches c to agent id and waits for the sync that follows. It
// returns the sync and its record size. Other events received meanwhile are
// dropped; c's Events must not be read concurrently.
func attachSync(c *client.Conn, id string) (*protocol.Sync, int, error) {
	if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
		return nil, 0, fmt.Errorf("agent.attach: %w", err)
	}
	timeout := time.After(reqTimeout)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return nil, 0, fmt.Errorf("connection ended waiting for sync: %v", c.Err())
			}
			if s, ok := ev.Msg.(*protocol.Sync); ok && s.AgentID == id {
				return s, len(ev.Raw), nil
			}
		case <-timeout:
			return nil, 0, fmt.Errorf("no sync within %s", reqTimeout)
		}
	}
}

// prompt sends a prompt to agent id and waits for its acknowledgement.
func prompt(c *client.Conn, id, msg string) error {
	return call(c, &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: msg}, nil)
}

// ---- statistics ----

// dist summarizes a latency sample.
type dist struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return dist{N: len(s), Min: ms(s[0]), P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999),
		Max: ms(s[len(s)-1]), Mean: ms(sum / time.Duration(len(s)))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
