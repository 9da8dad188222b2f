package shardmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// harness is one in-process daemon on a temporary home, its agents' runtime
// the real shardd binary.
type harness struct {
	t   *testing.T
	cfg *config.Config
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// shortTemp is a short temporary directory: unix socket paths are limited
// to 108 bytes, which t.TempDir() can exceed.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func start(t *testing.T, mutate func(*config.Config)) *harness {
	t.Helper()
	cfg := config.Default(filepath.Join(shortTemp(t), "home"))
	cfg.Web.Port = 0
	cfg.Store.NoSync = true
	cfg.Kill.AbortGrace = 500 * time.Millisecond
	cfg.Kill.TermGrace = 500 * time.Millisecond
	cfg.Shutdown.Timeout = 5 * time.Second
	if mutate != nil {
		mutate(cfg)
	}
	logBuf := &syncBuffer{}
	d, err := daemon.New(cfg, daemon.Options{
		Version: "test", RuntimePath: shardBin, RuntimeArgs: []string{"agent", "--headless"},
		Environ: os.Environ(), Logger: slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	if err := d.Start(); err != nil {
		t.Fatalf("daemon.Start: %v", err)
	}
	h := &harness{t: t, cfg: cfg, log: logBuf}
	t.Cleanup(func() {
		d.Shutdown(true)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logBuf.String())
		}
	})
	return h
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func (h *harness) dial() *client.Conn {
	h.t.Helper()
	c, err := client.Dial(ctx(h.t), h.cfg.SocketPath())
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// create makes an agent in dir (a fresh directory when "") and returns
// its id.
func (h *harness) create(c *client.Conn, dir string) string {
	h.t.Helper()
	if dir == "" {
		dir = shortTemp(h.t)
	}
	var data protocol.AgentCreateData
	if err := c.Call(ctx(h.t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: dir}, &data); err != nil {
		h.t.Fatalf("agent.create: %v", err)
	}
	return data.AgentID
}

// mcpAs launches `shardd mcp` acting as agent on the daemon, as an MCP
// host launches a stdio server, and connects the SDK's client to it.
func (h *harness) mcpAs(agent string) *mcp.ClientSession {
	h.t.Helper()
	cmd := exec.Command(shardBin, "mcp")
	cmd.Env = append(os.Environ(), "SHARD_SOCKET="+h.cfg.SocketPath(), "SHARD_AGENT_ID="+agent)
	cmd.Stderr = h.log
	cl := mcp.NewClient(&mcp.Implementation{Name: "shardmcp-test", Version: "1"}, nil)
	s, err := cl.Connect(ctx(h.t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		h.t.Fatalf("connect to shardd mcp: %v", err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

// call calls tool name with args and fails the test on a protocol error
// (a tool error is a result, for the caller to check).
func call(t *testing.T, s *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// value calls tool name and decodes its successful result's JSON text into
// a T, checking that the structured content says the same.
func value[T any](t *testing.T, s *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res := call(t, s, name, args)
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, text)
	}
	var out, structured T
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, text, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("%s: decode structured content %s: %v", name, raw, err)
	}
	if a, b := mustJSON(t, out), mustJSON(t, structured); a != b {
		t.Fatalf("%s: text %s and structured content %s differ", name, a, b)
	}
	return out
}

// toolError calls tool name, which must fail, and returns the protocol
// code its structured content carries and its text.
func toolError(t *testing.T, s *mcp.ClientSession, name string, args any) (protocol.ErrorCode, string) {
	t.Helper()
	res := call(t, s, name, args)
	text := resultText(t, res)
	if !res.IsError {
		t.Fatalf("%s succeeded (%s), want a tool error", name, text)
	}
	var sc struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &sc); err != nil || sc.Error != text {
		t.Fatalf("%s: structured content %s, want {code, error: the text}", name, raw)
	}
	if sc.Code != "" && !strings.Contains(text, sc.Code) {
		t.Fatalf("%s: the text %q does not name the code %s", name, text, sc.Code)
	}
	return protocol.ErrorCode(sc.Code), text
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result content %+v, want one text", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content %T, want text", res.Content[0])
	}
	return tc.Text
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor reads c's events until pred holds.
func waitFor(t *testing.T, c *client.Conn, pred func(client.Event) bool) client.Event {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
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
			t.Fatal("timed out waiting for an event")
		}
	}
}

// watchParent makes c one of parent's connections (the daemon sends it
// the parent's subagent_run_changed from its first subagent.* command on).
func watchParent(t *testing.T, c *client.Conn, parent string) {
	t.Helper()
	if _, err := c.Request(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}); err != nil {
		t.Fatalf("subagent.status: %v", err)
	}
}

// waitRunState waits on c (watching the run's parent) for run to reach state.
func waitRunState(t *testing.T, c *client.Conn, runID string, state protocol.RunState) {
	t.Helper()
	waitFor(t, c, func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.SubagentRunChanged)
		return ok && ev.RunID == runID && ev.State == state
	})
}

func gitRepo(t *testing.T) string {
	t.Helper()
	testhost.Tool(t, "git")
	dir := shortTemp(t)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@example.test"},
	} {
		runGit(t, dir, args...)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "add", "README")
	runGit(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
