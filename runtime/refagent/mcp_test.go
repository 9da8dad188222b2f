package refagent

// MCP servers: a real stdio server from npm (the reference filesystem
// server) offers its tools through the runtime's permission gate.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// fsServer is the reference filesystem MCP server that
// scripts/install-agents.sh installs; the test skips without it (fails in
// strict mode).
func fsServer(t *testing.T) string {
	t.Helper()
	_, file, _, _ := goruntime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	if _, err := exec.LookPath("node"); err != nil {
		testhost.Missing(t, "node", err.Error())
	}
	return bin
}

// startMCP starts a runtime whose cwd the filesystem server serves.
func startMCP(t *testing.T, servers func(cwd string) []MCPServer) *harness {
	t.Helper()
	return start(t, func(o *Options) { o.MCPServers = servers(o.Cwd) })
}

func TestMCPReadOnlyToolRunsWithoutAsking(t *testing.T) {
	bin := fsServer(t)
	h := startMCP(t, func(cwd string) []MCPServer { return []MCPServer{{Name: "fs", Command: bin, Args: []string{cwd}}} })
	h.handshake()
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "note.txt"), []byte("from the server"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(h.opts.Cwd, "note.txt")})
	h.prompt("sim: tool fs__read_text_file " + string(args))
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("a readOnlyHint tool asked for permission")
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.IsError || res.Content.Kind != "text" || !strings.Contains(res.Content.Text, "from the server") {
		t.Fatalf("tool_result %+v", res)
	}
}

func TestMCPWriteToolAsks(t *testing.T) {
	bin := fsServer(t)
	for _, decision := range []string{"allow", "deny"} {
		t.Run(decision, func(t *testing.T) {
			h := startMCP(t, func(cwd string) []MCPServer { return []MCPServer{{Name: "fs", Command: bin, Args: []string{cwd}}} })
			h.handshake()
			target := filepath.Join(h.opts.Cwd, "out.txt")
			args := protocol.MustMarshal(map[string]string{"path": target, "content": "written"})
			h.prompt("sim: tool fs__write_file " + string(args))
			evs := h.until(protocol.TypePermissionRequest)
			req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
			if req.ToolName != "fs__write_file" {
				t.Fatalf("permission_request %+v", req)
			}
			h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "r1"}, RequestID: req.RequestID, Decision: decision})
			evs = h.untilIdle()
			res := one[*protocol.ToolResult](t, evs)
			b, err := os.ReadFile(target)
			switch decision {
			case "allow":
				if res.IsError || err != nil || string(b) != "written" {
					t.Fatalf("tool_result %+v, file %q %v", res, b, err)
				}
			case "deny":
				if !res.IsError || err == nil {
					t.Fatalf("tool_result %+v, file %q %v", res, b, err)
				}
			}
		})
	}
}

func TestMCPServerThatFailsLeavesItsToolsUnavailable(t *testing.T) {
	h := startMCP(t, func(cwd string) []MCPServer {
		return []MCPServer{{Name: "gone", Command: filepath.Join(cwd, "no-such-server")}}
	})
	h.handshake()
	h.prompt(`sim: tool gone__read {}`)
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || !strings.Contains(res.Content.Message, `MCP server "gone" did not start`) {
		t.Fatalf("tool_result %+v", res)
	}
}

func TestMCPToolsLimitedByTools(t *testing.T) {
	bin := fsServer(t)
	h := start(t, func(o *Options) {
		o.MCPServers = []MCPServer{{Name: "fs", Command: bin, Args: []string{o.Cwd}}}
		o.Tools = []string{"fs__read_text_file"}
	})
	h.handshake()
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(h.opts.Cwd, "x"), "content": "x"})
	h.prompt("sim: tool fs__write_file " + string(args))
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || !strings.Contains(res.Content.Message, "limited to fs__read_text_file") {
		t.Fatalf("tool_result %+v", res)
	}
}

// everythingServer starts the npm reference "everything" MCP server in its
// streamable HTTP mode on a free loopback port and returns its endpoint
// once it says it listens. It skips without the server (fails in strict
// mode).
func everythingServer(t *testing.T) string {
	t.Helper()
	_, file, _, _ := goruntime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-everything", err.Error())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on port") {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return "http://127.0.0.1:" + port + "/mcp"
		}
	}
	t.Fatalf("the everything server ended before listening: %v", sc.Err())
	return ""
}

// TestMCPStreamableHTTP: a streamable HTTP server's tool runs, and every
// request to it carries the configured headers (a loopback proxy in front
// of the real server checks them).
func TestMCPStreamableHTTP(t *testing.T) {
	target, err := url.Parse(everythingServer(t))
	if err != nil {
		t.Fatal(err)
	}
	target.Path = "" // the proxy keeps the request's path
	var mu sync.Mutex
	var missing []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test-token" {
			mu.Lock()
			missing = append(missing, r.Method)
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	h := start(t, func(o *Options) {
		o.MCPServers = []MCPServer{{Name: "every", URL: front.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer test-token"}}}
	})
	h.handshake()
	h.prompt(`sim: tool every__echo {"message":"over http"}`)
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("a readOnlyHint tool asked for permission")
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.IsError || !strings.Contains(res.Content.Text, "over http") {
		t.Fatalf("tool_result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(missing) > 0 {
		t.Fatalf("requests without the header: %v", missing)
	}
}

// TestMCPStdioServerStopsWithTheRuntime: the stdio server runs while the
// runtime does and has exited once Run returns.
func TestMCPStdioServerStopsWithTheRuntime(t *testing.T) {
	bin := fsServer(t)
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		testhost.Missing(t, "/proc", err.Error())
	}
	h := startMCP(t, func(cwd string) []MCPServer { return []MCPServer{{Name: "fs", Command: bin, Args: []string{cwd}}} })
	h.handshake()
	if n := procsWithArg(t, h.opts.Cwd); n != 1 {
		t.Fatalf("%d server processes while the runtime runs, want 1", n)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := procsWithArg(t, h.opts.Cwd); n != 0 {
		t.Fatalf("%d server processes after Run returned", n)
	}
}

// procsWithArg counts the processes with arg in their command line.
func procsWithArg(t *testing.T, arg string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		if slices.Contains(strings.Split(string(b), "\x00"), arg) {
			n++
		}
	}
	return n
}

// TestMCPServerThatNeverAnswersIsBounded: a stdio server that never
// initializes is given up after the start timeout (the runtime says hello
// all the same), its tools say why, and it is stopped with the runtime.
func TestMCPServerThatNeverAnswersIsBounded(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		testhost.Missing(t, "sleep", err.Error())
	}
	marker := "9999." + strconv.Itoa(os.Getpid()) // GNU sleep takes a fraction
	h := start(t, func(o *Options) {
		o.MCPServers = []MCPServer{{Name: "mute", Command: sleep, Args: []string{marker}}}
		o.mcpStartTimeout = 200 * time.Millisecond
	})
	h.handshake()
	h.prompt(`sim: tool mute__anything {}`)
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || !strings.Contains(res.Content.Message, `MCP server "mute" did not start`) {
		t.Fatalf("tool_result %+v", res)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := procsWithArg(t, marker); n != 0 {
		t.Fatalf("%d silent server processes after Run returned", n)
	}
}
