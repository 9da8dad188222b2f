package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/buildlock"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// runtimeBin is the real shardd binary, built once by TestMain; the daemon
// under test spawns it as `shardd agent --headless`.
var runtimeBin string

func TestMain(m *testing.M) {
	if os.Getenv(fakeACPEnv) == "1" { // this binary plays an ACP agent (fakeacp_test.go)
		runFakeACP()
		os.Exit(0)
	}
	if os.Getenv(growMCPEnv) == "1" { // this binary plays an MCP server (mcpchanged_test.go)
		runGrowMCP()
		os.Exit(0)
	}
	// No test, nor the daemon's git, nor the go command that builds the
	// runtime reads the developer's home.
	removeHome, err := testhost.IsolateHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "shardbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		removeHome()
		os.Exit(1)
	}
	runtimeBin = filepath.Join(dir, "shardd")
	build := exec.Command("go", "build", "-o", runtimeBin, "github.com/shard-dev/shard/cmd/shardd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	unlock := buildlock.Lock() // one build at a time across test processes
	err = build.Run()
	unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build shardd:", err)
		removeHome()
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	removeHome()
	if code == 0 {
		// Every daemon a test started has shut down: nothing of it may be
		// left running (actors, gateway goroutines, timers' sends).
		if err := goleak.Find(goleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// harness is one in-process daemon on a temporary home.
type harness struct {
	t   *testing.T
	cfg *config.Config
	d   *daemon.Daemon
	log *syncWriter
}

// shortTemp returns a short temporary directory: unix socket paths are
// limited to 108 bytes, which t.TempDir() can exceed.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newConfig(t *testing.T) *config.Config {
	cfg := config.Default(filepath.Join(shortTemp(t), "home"))
	cfg.Web.Port = 0
	cfg.Store.NoSync = true
	cfg.Kill.AbortGrace = 500 * time.Millisecond
	cfg.Kill.TermGrace = 500 * time.Millisecond
	cfg.Shutdown.Timeout = 5 * time.Second
	return cfg
}

func start(t *testing.T, mutate func(*config.Config)) *harness {
	t.Helper()
	cfg := newConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	return startWith(t, cfg)
}

func startWith(t *testing.T, cfg *config.Config) *harness {
	t.Helper()
	return startOpts(t, cfg, nil)
}

// startOpts is startWith with a hook on the daemon's Options.
func startOpts(t *testing.T, cfg *config.Config, mutate func(*daemon.Options)) *harness {
	t.Helper()
	logBuf := &syncWriter{w: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := daemon.Options{
		Version: "test", RuntimePath: runtimeBin, RuntimeArgs: []string{"agent", "--headless"},
		Environ: os.Environ(), Logger: logger,
	}
	if mutate != nil {
		mutate(&opts)
	}
	d, err := daemon.New(cfg, opts)
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	if err := d.Start(); err != nil {
		t.Fatalf("daemon.Start: %v", err)
	}
	h := &harness{t: t, cfg: cfg, d: d, log: logBuf}
	t.Cleanup(func() {
		d.Shutdown(true)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logBuf.String())
		}
	})
	return h
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (h *harness) dial() *client.Conn {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, h.cfg.SocketPath())
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// create makes an agent in a fresh directory and returns its id.
func (h *harness) create(c *client.Conn, mutate func(*protocol.AgentCreate)) string {
	h.t.Helper()
	cmd := &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(h.t)}
	if mutate != nil {
		mutate(cmd)
	}
	var data protocol.AgentCreateData
	if err := c.Call(ctx(h.t), cmd, &data); err != nil {
		h.t.Fatalf("agent.create: %v", err)
	}
	return data.AgentID
}

// attach attaches c to agent id and returns the sync that follows.
func attach(t *testing.T, c *client.Conn, id, role string) *protocol.Sync {
	t.Helper()
	var data protocol.AgentAttachData
	if err := c.Call(ctx(t), &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}, Role: role}, &data); err != nil {
		t.Fatalf("agent.attach: %v", err)
	}
	ev := waitFor(t, c, func(e client.Event) bool {
		s, ok := e.Msg.(*protocol.Sync)
		return ok && s.AgentID == id
	})
	return ev.Msg.(*protocol.Sync)
}

func prompt(t *testing.T, c *client.Conn, id, text string) {
	t.Helper()
	if _, err := c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: text}); err != nil {
		t.Fatalf("prompt: %v", err)
	}
}

// runTurn prompts text and returns the turn's events up to turn_end.
func runTurn(t *testing.T, c *client.Conn, id, text string) []client.Event {
	t.Helper()
	prompt(t, c, id, text)
	return collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
}

// waitFor reads events until pred matches, failing after 60 s: a bound
// a passing test never waits out, long enough for a loaded 2-core
// machine to start a runtime (a report injected into a stopped parent
// starts one) behind other work.
func waitFor(t *testing.T, c *client.Conn, pred func(client.Event) bool) client.Event {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed while waiting: %v", c.Err())
			}
			if pred(e) {
				return e
			}
		case <-timeout.C:
			t.Fatalf("timed out waiting for an event")
		}
	}
}

// collectUntil returns every event up to and including the first match.
func collectUntil(t *testing.T, c *client.Conn, pred func(client.Event) bool) []client.Event {
	t.Helper()
	var out []client.Event
	waitFor(t, c, func(e client.Event) bool {
		out = append(out, e)
		return pred(e)
	})
	return out
}

func isType(typ, agentID string) func(client.Event) bool {
	return func(e client.Event) bool {
		h := e.Msg.Head()
		return h.Type == typ && (agentID == "" || h.AgentID == agentID)
	}
}

func isAgentEvent(typ, agentID string) func(client.Event) bool {
	return func(e client.Event) bool {
		if e.Msg.Head().Type != typ {
			return false
		}
		var p struct {
			AgentID string `json:"agent_id"`
		}
		_ = json.Unmarshal(e.Raw, &p)
		return p.AgentID == agentID
	}
}

// runtimePIDs finds the runtime processes serving agent id (by their
// SHARD_AGENT_ID environment), so tests can kill or look for them.
func runtimePIDs(t *testing.T, id string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	needle := []byte("SHARD_AGENT_ID=" + id + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, needle) {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.Exited() {
			continue // a zombie is gone for our purposes
		}
		pids = append(pids, pid)
	}
	return pids
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

func goleakOptions() []goleak.Option {
	return []goleak.Option{
		// protoactor's dead-letter throttle parks a goroutine for one
		// interval (1 s) after a burst of dead letters (late timer sends to
		// stopped actors); it ends by itself.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// Keep-alive goroutines of the http.Get in the ticket test.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	}
}
