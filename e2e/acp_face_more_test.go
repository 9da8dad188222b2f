//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
)

// TestACPFaceQuestionsWorkspacesAndMCPServers: a question the agent asks
// (a select) reaches the editor as session/request_permission whose options
// are the answers; a session asked for with _meta "shard.dev/workspace" (and
// every session of a face run with --workspace) gets an agent in a
// workspace of its own, listed under the repository's cwd; the editor's MCP
// servers become the agent's.
func TestACPFaceQuestionsWorkspacesAndMCPServers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	repo := wsRepo(t)

	e := startEditor(t, d.home)
	e.initialize()
	ns, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: repo, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "edsrv", Command: "/bin/true", Args: []string{}, Env: []acp.EnvVariable{{Name: "EDITOR_SECRET", Value: "ed-secret-value"}}}},
	}})
	if err != nil {
		t.Fatalf("session/new: %v\n%s", err, e.stderr())
	}
	info := listAgent(t, d, string(ns.SessionId))
	if strings.Join(info.MCPServers, ",") != "edsrv" || info.WorkspaceID != "" || info.Cwd != repo {
		t.Fatalf("agent: %s", protocol.MustMarshal(info))
	}

	m := e.mark()
	p := e.prompt(ns.SessionId, "sim: ask select Color red blue")
	a := e.nextAsk()
	var names []string
	for _, o := range a.req.Options {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "red,blue,Dismiss" {
		t.Fatalf("question options %v", names)
	}
	for _, o := range a.req.Options {
		if o.Name == "blue" {
			a.answer <- o.OptionId
		}
	}
	if r := e.await(p); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if s := joined(e.updatesSince(m), "agent"); !strings.Contains(s, "answer: blue") {
		t.Fatalf("the agent did not get the answer: %q", s)
	}

	// Another client's turn runs (its question, an input the editor is not
	// offered, holds it open): the editor's prompt follows it, and answers
	// at the end of its own turn, not of the other's.
	w := dialWire(t, d)
	w.call(&protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: string(ns.SessionId)}}, nil)
	w.call(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: string(ns.SessionId)}, Message: "sim: ask input Your name"}, nil)
	ui := next[*protocol.UIRequest](w)
	m = e.mark()
	p = e.prompt(ns.SessionId, "sim: say following up")
	w.call(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: string(ns.SessionId)},
		RequestID: ui.RequestID, Value: json.RawMessage(`"Ada"`)}, nil)
	if r := e.await(p); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	text := joined(e.updatesSince(m), "agent")
	if !strings.Contains(text, "answer: Ada") || !strings.Contains(text, "following up") || strings.Index(text, "answer: Ada") > strings.Index(text, "following up") {
		t.Fatalf("the follow-up did not run after the other turn: %q", text)
	}
	w.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: string(ns.SessionId)}}, nil)

	ws, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: repo, McpServers: []acp.McpServer{},
		Meta: map[string]any{"shard.dev/workspace": true}})
	if err != nil {
		t.Fatalf("session/new in a workspace: %v\n%s", err, e.stderr())
	}
	e2 := startEditor(t, d.home, "--workspace")
	e2.initialize()
	ws2, err := e2.conn.NewSession(e2.ctx(), acp.NewSessionRequest{Cwd: repo, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new with --workspace: %v\n%s", err, e2.stderr())
	}
	for _, id := range []acp.SessionId{ws.SessionId, ws2.SessionId} {
		if info := listAgent(t, d, string(id)); info.WorkspaceID == "" || info.Cwd == repo {
			t.Fatalf("not in a workspace: %s", protocol.MustMarshal(info))
		}
	}
	ls, err := e.conn.ListSessions(e.ctx(), acp.ListSessionsRequest{Cwd: acp.Ptr(repo)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range ls.Sessions {
		got = append(got, string(s.SessionId))
	}
	for _, id := range []acp.SessionId{ns.SessionId, ws.SessionId, ws2.SessionId} {
		if !strings.Contains(strings.Join(got, ","), string(id)) {
			t.Errorf("session/list under the repository lacks %s: %v", id, got)
		}
	}
	// session/close detaches: the agent stays, the session is no longer open.
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("x")}}); err == nil || !strings.Contains(err.Error(), "-32002") {
		t.Errorf("prompt after close: %v", err)
	}
	if info := listAgent(t, d, string(ns.SessionId)); info.AttachedClients != 0 {
		t.Errorf("still attached after close: %s", protocol.MustMarshal(info))
	}
	if s := e.stderr() + e2.stderr(); strings.Contains(s, "ed-secret-value") || strings.Contains(s, "Color") {
		t.Errorf("the face logged a secret or text:\n%s", s)
	}
}

// TestACPFaceHostedBehindTheAdapter: `shardctl acp` is also a real ACP agent
// for Shard's own adapter. A runtime profile of kind acp runs it; an editor's
// face creates an agent on that profile, whose MCP servers the adapter
// hands the inner face in its session/new, which gives them to the agent it
// creates; a prompt goes editor → face → daemon → adapter → inner face →
// daemon → reference runtime and back, a permission of the innermost agent
// reaching the editor. A pi profile takes no MCP servers: the face creates
// the agent without them and says so on stderr.
func TestACPFaceHostedBehindTheAdapter(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Shard's own MCP server is left out of the outer profile: it would
	// pass through the face to the inner agent as another server.
	cfg := fmt.Sprintf("runtimes:\n  face:\n    kind: acp\n    command: [%s, --home, %s, acp]\n    env: {SHARD_ACP_SHARD_MCP: \"off\"}\n  nopi:\n    kind: pi\n    command: [/bin/false]\n", shardctlBin, home)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, home)
	cwd := shortTemp(t)

	e := startEditor(t, d.home, "--profile", "face")
	e.initialize()
	ns, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "edsrv", Command: "/bin/true", Args: []string{}, Env: []acp.EnvVariable{}}},
	}})
	if err != nil {
		t.Fatalf("session/new: %v\n%s", err, e.stderr())
	}
	if info := listAgent(t, d, string(ns.SessionId)); info.Runtime != "face" || strings.Join(info.MCPServers, ",") != "edsrv" {
		t.Fatalf("agent: %s", protocol.MustMarshal(info))
	}

	m := e.mark()
	p := e.prompt(ns.SessionId, "sim: say nested hello\nsim: tool write {\"path\":\"n.txt\",\"content\":\"deep\\n\"}")
	a := e.nextAsk()
	a.answer <- a.optionOfKind(t, acp.PermissionOptionKindAllowOnce)
	if r := e.await(p); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if s := joined(e.updatesSince(m), "agent"); !strings.Contains(s, "nested hello") {
		t.Fatalf("text %q", s)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "n.txt")); err != nil || string(b) != "deep\n" {
		t.Fatalf("n.txt = %q, %v", b, err)
	}
	var list protocol.AgentListData
	dialWire(t, d).call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list)
	runtimes := map[string]int{}
	for _, a := range list.Agents {
		runtimes[a.Runtime]++
	}
	if runtimes["face"] != 1 || runtimes["shard"] != 1 {
		t.Fatalf("agents by runtime %v, want one outer (face) and one inner (shard)", runtimes)
	}
	for _, a := range list.Agents {
		if a.Runtime == "shard" && strings.Join(a.MCPServers, ",") != "edsrv" {
			t.Errorf("the inner agent did not get the editor's MCP server: %s", protocol.MustMarshal(a))
		}
	}

	// A pi profile refuses MCP servers: the agent is made without them
	// (its runtime, /bin/false, then fails to start: session/new says so).
	ep := startEditor(t, d.home, "--profile", "nopi")
	ep.initialize()
	_, err = ep.conn.NewSession(ep.ctx(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "edsrv", Command: "/bin/true", Args: []string{}, Env: []acp.EnvVariable{}}},
	}})
	if err == nil || !strings.Contains(err.Error(), "RUNTIME_START_FAILED") {
		t.Fatalf("session/new on a pi profile that cannot start: %v", err)
	}
	if s := ep.stderr(); !strings.Contains(s, "takes no MCP servers") || !strings.Contains(s, "edsrv") {
		t.Errorf("the dropped MCP servers were not logged:\n%s", s)
	}
	dialWire(t, d).call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list)
	for _, a := range list.Agents {
		if a.Runtime == "nopi" && len(a.MCPServers) != 0 {
			t.Errorf("the pi agent has MCP servers: %s", protocol.MustMarshal(a))
		}
	}
	if runtimes := len(list.Agents); runtimes != 3 {
		t.Errorf("%d agents, want 3", runtimes)
	}
}
