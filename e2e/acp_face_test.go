//go:build linux

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// acpWait bounds one wait of the ACP face tests on something that normally
// takes milliseconds.
const acpWait = 30 * time.Second

// editor is the client side of the ACP SDK driving a real `shardctl acp`
// process over its stdio, as an editor does. It records every
// session/update and hands each permission request to the test.
type editor struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	conn *acp.ClientSideConnection
	err  *strings.Builder // the face's stderr
	errM *sync.Mutex

	waitOnce sync.Once
	waitErr  error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each update
	updates []acp.SessionNotification
	asks    chan *ask
}

// ask is one session/request_permission the editor got: the test answers
// it on answer, or sees it cancelled (the face withdrew it).
type ask struct {
	req       acp.RequestPermissionRequest
	answer    chan acp.PermissionOptionId
	cancelled chan struct{}
}

var _ acp.Client = (*editor)(nil)

func (e *editor) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	a := &ask{req: p, answer: make(chan acp.PermissionOptionId, 1), cancelled: make(chan struct{})}
	e.asks <- a
	select {
	case id := <-a.answer:
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
	case <-ctx.Done():
		close(a.cancelled)
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
}

func (e *editor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	e.mu.Lock()
	e.updates = append(e.updates, n)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
	return nil
}

func (e *editor) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, fmt.Errorf("not offered")
}

func (e *editor) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, fmt.Errorf("not offered")
}

func (e *editor) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, fmt.Errorf("not offered")
}

func (e *editor) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, fmt.Errorf("not offered")
}

func (e *editor) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, fmt.Errorf("not offered")
}

func (e *editor) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, fmt.Errorf("not offered")
}

func (e *editor) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, fmt.Errorf("not offered")
}

// startEditor launches `shardctl --home <home> acp <args>` and connects the
// SDK's client side to its stdio.
func startEditor(t *testing.T, home string, args ...string) *editor {
	t.Helper()
	cmd := exec.Command(shardctlBin, append([]string{"--home", home, "acp"}, args...)...)
	cmd.Env = baseEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	e := &editor{t: t, cmd: cmd, in: in, err: &strings.Builder{}, errM: &sync.Mutex{},
		changed: make(chan struct{}), asks: make(chan *ask, 16)}
	cmd.Stderr = lockedWriter{e.errM, e.err}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- e.wait() }()
		select {
		case err := <-done:
			// A face exits 0 when the editor closes its stdin (and a
			// race-instrumented one would exit 66 on a race).
			if err != nil {
				t.Errorf("shardctl acp exited: %v", err)
			}
		case <-time.After(acpWait):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("shardctl acp did not exit when its stdin closed")
		}
		if t.Failed() {
			t.Logf("shardctl acp stderr:\n%s", e.stderr())
		}
	})
	e.conn = acp.NewClientSideConnection(e, in, out)
	return e
}

// wait waits for the face to exit, once, and returns how it ended.
func (e *editor) wait() error {
	e.waitOnce.Do(func() { e.waitErr = e.cmd.Wait() })
	return e.waitErr
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *editor) stderr() string {
	e.errM.Lock()
	defer e.errM.Unlock()
	return e.err.String()
}

func (e *editor) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), acpWait)
	e.t.Cleanup(cancel)
	return ctx
}

// initialize is the editor's handshake.
func (e *editor) initialize() acp.InitializeResponse {
	e.t.Helper()
	r, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo: &acp.Implementation{Name: "e2e-editor", Version: "1"}})
	if err != nil {
		e.t.Fatalf("initialize: %v\nstderr:\n%s", err, e.stderr())
	}
	return r
}

// mark is the number of updates so far: updatesSince(mark) are the later ones.
func (e *editor) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.updates)
}

func (e *editor) updatesSince(n int) []acp.SessionNotification {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]acp.SessionNotification(nil), e.updates[n:]...)
}

// waitUpdate waits for an update after mark that satisfies ok.
func (e *editor) waitUpdate(mark int, what string, ok func(acp.SessionUpdate) bool) acp.SessionUpdate {
	e.t.Helper()
	timeout := time.After(acpWait)
	for {
		e.mu.Lock()
		for _, n := range e.updates[mark:] {
			if ok(n.Update) {
				e.mu.Unlock()
				return n.Update
			}
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			e.t.Fatalf("no update: %s\nstderr:\n%s", what, e.stderr())
		}
	}
}

// signalText is closed once the text of the updates of kind after mark
// holds want (text streams in chunks of any size).
func (e *editor) signalText(mark int, kind, want string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			e.mu.Lock()
			if strings.Contains(joined(e.updates[mark:], kind), want) {
				e.mu.Unlock()
				close(ch)
				return
			}
			changed := e.changed
			e.mu.Unlock()
			<-changed
		}
	}()
	return ch
}

// nextAsk is the next permission request the editor gets.
func (e *editor) nextAsk() *ask {
	e.t.Helper()
	select {
	case a := <-e.asks:
		return a
	case <-time.After(acpWait):
		e.t.Fatalf("no session/request_permission\nstderr:\n%s", e.stderr())
		return nil
	}
}

// optionOfKind is the id of the ask's option of kind k.
func (a *ask) optionOfKind(t *testing.T, k acp.PermissionOptionKind) acp.PermissionOptionId {
	t.Helper()
	for _, o := range a.req.Options {
		if o.Kind == k {
			return o.OptionId
		}
	}
	t.Fatalf("no option of kind %s in %+v", k, a.req.Options)
	return ""
}

// prompt runs one session/prompt in the background.
func (e *editor) prompt(sid acp.SessionId, text string) <-chan promptResult {
	ch := make(chan promptResult, 1)
	go func() {
		r, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		ch <- promptResult{r, err}
	}()
	return ch
}

type promptResult struct {
	resp acp.PromptResponse
	err  error
}

func (e *editor) await(ch <-chan promptResult) acp.PromptResponse {
	e.t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			e.t.Fatalf("session/prompt: %v\nstderr:\n%s", r.err, e.stderr())
		}
		return r.resp
	case <-time.After(acpWait):
		e.t.Fatalf("session/prompt did not answer\nstderr:\n%s", e.stderr())
		return acp.PromptResponse{}
	}
}

// wire is a plain wire client of the daemon whose events the test reads.
type wire struct {
	t      *testing.T
	c      *client.Conn
	events chan protocol.Typed
}

func dialWire(t *testing.T, d *daemon) *wire {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &wire{t: t, c: c, events: make(chan protocol.Typed, 1024)}
	go func() {
		for ev := range c.Events() {
			select {
			case w.events <- ev.Msg:
			default:
			}
		}
	}()
	return w
}

func (w *wire) call(cmd protocol.Typed, data any) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), acpWait)
	defer cancel()
	if err := w.c.Call(ctx, cmd, data); err != nil {
		w.t.Fatalf("%s: %v", cmd.Head().Type, err)
	}
}

// next waits for the next event of type T.
func next[T protocol.Typed](w *wire) T {
	w.t.Helper()
	timeout := time.After(acpWait)
	for {
		select {
		case ev := <-w.events:
			if v, ok := ev.(T); ok {
				return v
			}
		case <-timeout:
			var zero T
			w.t.Fatalf("no %T event", zero)
			return zero
		}
	}
}

func textOf(u acp.SessionUpdate) (kind, text string) {
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		return "agent", u.AgentMessageChunk.Content.Text.Text
	case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
		return "thought", u.AgentThoughtChunk.Content.Text.Text
	case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
		return "user", u.UserMessageChunk.Content.Text.Text
	}
	return "", ""
}

// joined is the text of the updates of one kind, in order.
func joined(ns []acp.SessionNotification, kind string) string {
	var b strings.Builder
	for _, n := range ns {
		if k, s := textOf(n.Update); k == kind {
			b.WriteString(s)
		}
	}
	return b.String()
}

// diffOf is the first diff of a tool call update's content.
func diffOf(u acp.SessionUpdate) *acp.ToolCallContentDiff {
	var content []acp.ToolCallContent
	switch {
	case u.ToolCallUpdate != nil:
		content = u.ToolCallUpdate.Content
	case u.ToolCall != nil:
		content = u.ToolCall.Content
	}
	for _, c := range content {
		if c.Diff != nil {
			return c.Diff
		}
	}
	return nil
}

func completedWithDiff(path string) func(acp.SessionUpdate) bool {
	return func(u acp.SessionUpdate) bool {
		if u.ToolCallUpdate == nil || u.ToolCallUpdate.Status == nil || *u.ToolCallUpdate.Status != acp.ToolCallStatusCompleted {
			return false
		}
		d := diffOf(u)
		return d != nil && d.Path == path
	}
}

// TestACPFaceWithTheSDKClient drives `shardctl acp` (a real subprocess in
// front of the real daemon and reference runtime, model sim) with the ACP
// SDK's client side, as an editor does: a new session, a prompt streaming
// thinking, text and an edit with its diff after the editor allowed it; a
// permission another wire client answers first (the editor's request is
// cancelled); cancel; modes, config options and models; the list by cwd;
// and after the editor closed, the agent still running, a new face
// loading (replaying) and resuming it.
func TestACPFaceWithTheSDKClient(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cwd := shortTemp(t)
	if err := os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := shortTemp(t)

	e := startEditor(t, d.home)
	init := e.initialize()
	caps := init.AgentCapabilities
	if !caps.LoadSession || caps.SessionCapabilities.List == nil || caps.SessionCapabilities.Resume == nil || !caps.PromptCapabilities.EmbeddedContext {
		t.Fatalf("capabilities: %+v", caps)
	}
	ns, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v\n%s", err, e.stderr())
	}
	sid := ns.SessionId
	if !strings.HasPrefix(string(sid), "agent-") {
		t.Fatalf("sessionId %q is not an agent id", sid)
	}
	if ns.Modes == nil || ns.Modes.CurrentModeId != "build" || len(ns.Modes.AvailableModes) != 2 {
		t.Fatalf("modes: %+v", ns.Modes)
	}
	if ns.Models == nil || ns.Models.CurrentModelId != "sim/sim" {
		t.Fatalf("models: %+v", ns.Models)
	}
	if ids := configIDs(ns.ConfigOptions); ids != "mode,model" {
		t.Fatalf("config options %s, want mode,model", ids)
	}

	// A prompt: thinking, text, then an edit the editor allows once.
	m := e.mark()
	p := e.prompt(sid, "sim: think pondering the file\nsim: say editing a.txt\nsim: tool edit {\"path\":\"a.txt\",\"old_string\":\"two\",\"new_string\":\"2\"}")
	a := e.nextAsk()
	if a.req.SessionId != sid || a.req.ToolCall.Kind == nil || *a.req.ToolCall.Kind != acp.ToolKindEdit {
		t.Fatalf("permission request: %+v", a.req)
	}
	if d := diffOf(acp.SessionUpdate{ToolCall: &acp.SessionUpdateToolCall{Content: a.req.ToolCall.Content}}); d == nil || d.NewText != "2" || d.OldText == nil || *d.OldText != "two" {
		t.Errorf("the permission request shows no diff: %+v", a.req.ToolCall.Content)
	}
	a.answer <- a.optionOfKind(t, acp.PermissionOptionKindAllowOnce)
	r := e.await(p)
	if r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	got := e.updatesSince(m)
	if s := joined(got, "thought"); !strings.Contains(s, "pondering the file") {
		t.Errorf("thinking %q", s)
	}
	if s := joined(got, "agent"); !strings.Contains(s, "editing a.txt") {
		t.Errorf("text %q", s)
	}
	path := filepath.Join(cwd, "a.txt")
	u := e.waitUpdate(m, "the edit completed with its diff", completedWithDiff(path))
	if d := diffOf(u); d.OldText == nil || !strings.Contains(*d.OldText, "two") || !strings.Contains(d.NewText, "2") || strings.Contains(d.NewText, "two") {
		t.Errorf("diff %+v", d)
	}
	e.waitUpdate(m, "a tool_call of kind edit", func(u acp.SessionUpdate) bool { return u.ToolCall != nil && u.ToolCall.Kind == acp.ToolKindEdit })
	e.waitUpdate(m, "a usage_update", func(u acp.SessionUpdate) bool {
		return u.UsageUpdate != nil && u.UsageUpdate.Used > 0 && u.UsageUpdate.Size > 0
	})
	// The automatic title (the first prompt's first line) is the session's.
	e.waitUpdate(m, "a session_info_update with the title", func(u acp.SessionUpdate) bool {
		return u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil && strings.Contains(*u.SessionInfoUpdate.Title, "pondering")
	})
	if b, _ := os.ReadFile(path); string(b) != "one\n2\nthree\n" {
		t.Fatalf("a.txt = %q", b)
	}

	// Another client attached to the agent answers first: the editor's
	// request is withdrawn (resolved as cancelled) and the write happens.
	w := dialWire(t, d)
	w.call(&protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: string(sid)}}, nil)
	p = e.prompt(sid, "sim: tool write {\"path\":\"b.txt\",\"content\":\"bee\\n\"}")
	a = e.nextAsk()
	req := next[*protocol.PermissionRequest](w)
	w.call(&protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: string(sid)},
		RequestID: req.RequestID, Decision: protocol.DecisionAllow}, nil)
	select {
	case <-a.cancelled:
	case <-time.After(acpWait):
		t.Fatal("the editor's request was not withdrawn after another client answered")
	}
	if r := e.await(p); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "b.txt")); err != nil || string(b) != "bee\n" {
		t.Fatalf("b.txt = %q, %v", b, err)
	}
	w.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: string(sid)}}, nil)

	// Cancel: the turn is aborted and the prompt answers cancelled.
	m = e.mark()
	p = e.prompt(sid, "sim: say started\nsim: sleep 60000\nsim: say never")
	select {
	case r := <-p:
		t.Fatalf("the prompt ended before its sleep: %+v, %v", r.resp, r.err)
	case <-e.signalText(m, "agent", "started"):
	}
	if err := e.conn.Cancel(e.ctx(), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	if r := e.await(p); r.StopReason != acp.StopReasonCancelled {
		t.Fatalf("stop reason after cancel: %s", r.StopReason)
	}

	// An image goes to the agent with the prompt.
	png := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), "pixels"...))
	ip, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("sim: say seen"), acp.ImageBlock(png, "image/png")}})
	if err != nil || ip.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt with an image: %+v %v", ip, err)
	}
	w.call(&protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: string(sid)}}, nil)
	sy := next[*protocol.Sync](w)
	images := 0
	for _, msg := range sy.LiveWindow.Messages {
		for _, b := range msg.Content {
			if b.Type == "image" && b.MimeType == "image/png" {
				images++
			}
		}
	}
	if images != 1 {
		t.Fatalf("%d images in the live window", images)
	}
	w.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: string(sid)}}, nil)

	// Modes, config options, models.
	m = e.mark()
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: sid, ModeId: "plan"}); err != nil {
		t.Fatal(err)
	}
	e.waitUpdate(m, "current_mode_update plan", func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && u.CurrentModeUpdate.CurrentModeId == "plan"
	})
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: sid, ModeId: "nope"}); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("unknown mode: %v", err)
	}
	co, err := e.conn.SetSessionConfigOption(e.ctx(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: sid, ConfigId: "model", Value: "sim/sim-think"}})
	if err != nil {
		t.Fatal(err)
	}
	if ids := configIDs(co.ConfigOptions); ids != "mode,model,reasoning" {
		t.Fatalf("config options after sim-think: %s", ids)
	}
	co, err = e.conn.SetSessionConfigOption(e.ctx(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: sid, ConfigId: "reasoning", Value: "high"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := configValue(co.ConfigOptions, "reasoning"); v != "high" {
		t.Fatalf("reasoning %q", v)
	}
	if v := configValue(co.ConfigOptions, "mode"); v != "plan" {
		t.Fatalf("mode %q", v)
	}
	if _, err := e.conn.UnstableSetSessionModel(e.ctx(), acp.UnstableSetSessionModelRequest{SessionId: sid, ModelId: "sim/sim"}); err != nil {
		t.Fatal(err)
	}
	e.waitUpdate(m, "config_option_update with model sim/sim", func(u acp.SessionUpdate) bool {
		return u.ConfigOptionUpdate != nil && configValue(u.ConfigOptionUpdate.ConfigOptions, "model") == "sim/sim"
	})
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: sid, ModeId: "build"}); err != nil {
		t.Fatal(err)
	}

	// The list by cwd: this session, not an agent elsewhere.
	var created protocol.AgentCreateData
	w.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: other}, &created)
	ls, err := e.conn.ListSessions(e.ctx(), acp.ListSessionsRequest{Cwd: acp.Ptr(cwd)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Sessions) != 1 || ls.Sessions[0].SessionId != sid || ls.Sessions[0].Cwd != cwd || ls.Sessions[0].Title == nil || ls.Sessions[0].UpdatedAt == nil {
		t.Fatalf("sessions under %s: %s", cwd, protocol.MustMarshal(ls))
	}
	// An unknown session is "resource not found".
	if _, err := e.conn.ResumeSession(e.ctx(), acp.ResumeSessionRequest{SessionId: "agent-nope", Cwd: cwd}); err == nil || !strings.Contains(err.Error(), "-32002") {
		t.Errorf("resume of an unknown session: %v", err)
	}

	// The editor goes away: the face exits, the agent keeps running.
	_ = e.in.Close()
	if err := e.wait(); err != nil {
		t.Fatalf("shardctl acp after stdin closed: %v\n%s", err, e.stderr())
	}
	var st protocol.AgentListData
	w.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &st)
	running := false
	for _, a := range st.Agents {
		if a.AgentID == string(sid) {
			running = a.RuntimeState == protocol.RuntimeRunning
		}
	}
	if !running || len(runtimePIDs(t, string(sid))) == 0 {
		t.Fatalf("the agent's runtime is not running after the editor closed: %s", protocol.MustMarshal(st))
	}

	// A new face loads the session: the transcript comes back as updates
	// before session/load answers.
	e2 := startEditor(t, d.home)
	e2.initialize()
	m = e2.mark()
	ld, err := e2.conn.LoadSession(e2.ctx(), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/load: %v\n%s", err, e2.stderr())
	}
	if ld.Modes == nil || ld.Modes.CurrentModeId != "build" {
		t.Errorf("modes after load: %+v", ld.Modes)
	}
	replay := e2.updatesSince(m)
	if s := joined(replay, "user"); !strings.Contains(s, "sim: think pondering the file") {
		t.Errorf("replayed user messages %q", s)
	}
	if s := joined(replay, "thought"); !strings.Contains(s, "pondering the file") {
		t.Errorf("replayed thinking %q", s)
	}
	if s := joined(replay, "agent"); !strings.Contains(s, "editing a.txt") {
		t.Errorf("replayed text %q", s)
	}
	diffReplayed := false
	for _, n := range replay {
		if completedWithDiff(path)(n.Update) {
			diffReplayed = true
		}
	}
	if !diffReplayed {
		t.Errorf("the edit was not replayed with its diff: %s", protocol.MustMarshal(replay))
	}
	m = e2.mark()
	if r := e2.await(e2.prompt(sid, "sim: say after load")); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if s := joined(e2.updatesSince(m), "agent"); !strings.Contains(s, "after load") {
		t.Fatalf("text after load %q", s)
	}

	// A third face resumes it: no replay, and it prompts.
	e3 := startEditor(t, d.home)
	e3.initialize()
	m = e3.mark()
	if _, err := e3.conn.ResumeSession(e3.ctx(), acp.ResumeSessionRequest{SessionId: sid, Cwd: cwd}); err != nil {
		t.Fatalf("session/resume: %v", err)
	}
	if got := e3.updatesSince(m); joined(got, "user")+joined(got, "agent") != "" {
		t.Errorf("resume replayed: %s", protocol.MustMarshal(got))
	}
	if r := e3.await(e3.prompt(sid, "sim: say after resume")); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if s := joined(e3.updatesSince(m), "agent"); !strings.Contains(s, "after resume") {
		t.Fatalf("text after resume %q", s)
	}
	// The face never logs prompts or text.
	for _, ed := range []*editor{e, e2, e3} {
		if s := ed.stderr(); strings.Contains(s, "pondering") || strings.Contains(s, "after resume") {
			t.Errorf("the face logged text:\n%s", s)
		}
	}
}

// TestACPFaceWithoutDaemon: with no daemon, initialize fails saying so.
func TestACPFaceWithoutDaemon(t *testing.T) {
	t.Parallel()
	e := startEditor(t, newHome(t))
	// A line the face cannot parse is logged without its content.
	if _, err := io.WriteString(e.in, "{\"jsonrpc\":\"2.0\",\"method\":\"session/prompt\",\"params\":{\"text\":\"secret prompt words\"\n"); err != nil {
		t.Fatal(err)
	}
	_, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err == nil || !strings.Contains(err.Error(), "daemon is not running") {
		t.Fatalf("initialize without a daemon: %v", err)
	}
	if s := e.stderr(); !strings.Contains(s, "failed to parse") || strings.Contains(s, "secret prompt words") {
		t.Fatalf("stderr:\n%s", s)
	}
}

func configIDs(opts []acp.SessionConfigOption) string {
	var ids []string
	for _, o := range opts {
		if o.Select != nil {
			ids = append(ids, string(o.Select.Id))
		}
	}
	return strings.Join(ids, ",")
}

func configValue(opts []acp.SessionConfigOption, id string) string {
	for _, o := range opts {
		if o.Select != nil && string(o.Select.Id) == id {
			return string(o.Select.CurrentValue)
		}
	}
	return ""
}

// TestACPFaceWithACPX drives `shardctl acp` with acpx, a published ACP
// client from npm, as a person would from a shell: a session created for
// the project directory, a prompt that thinks, edits a file (permissions
// approved by acpx's --approve-all) and answers, the sessions listed, and,
// once acpx's session owner (and so the face) has exited, a second prompt
// from a new acpx process that resumes the same agent.
func TestACPFaceWithACPX(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", ".cache", "agents", "node_modules", ".bin", "acpx")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "acpx", err.Error())
	}
	d := startDaemon(t)
	proj := shortTemp(t)
	if err := os.WriteFile(filepath.Join(proj, "a.txt"), []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// acpx keeps its state under $HOME/.acpx: a home of the test's own.
	home := shortTemp(t)
	mark := randomToken(t, "SHARD_ACPX_TEST=acpx")
	t.Cleanup(func() { shardtest.KillEnv(mark, acpWait) })
	agent := shardctlBin + " --home " + d.home + " acp"
	acpx := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--agent", agent, "--ttl", "1"}, args...)...)
		cmd.Dir = proj
		cmd.Env = append(baseEnv(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NO_COLOR=1", mark)
		r := runCmd(t, cmd, "")
		if r.code != 0 {
			t.Fatalf("acpx %q exited %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	// ownerGone waits until acpx's session owner, and the face it runs,
	// have exited (--ttl 1 after the last prompt).
	ownerGone := func() {
		t.Helper()
		eventually(t, acpWait, "acpx's session owner exits", func() bool { return len(procsWithEnv(t, mark)) == 0 })
	}

	r := acpx("sessions", "new")
	lines := strings.Fields(strings.TrimSpace(r.stdout))
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "agent-") {
		t.Fatalf("sessions new printed no agent id:\n%s\n%s", r.stdout, r.stderr)
	}
	sid := lines[len(lines)-1]
	if info := listAgent(t, d, sid); info.Cwd != proj {
		t.Fatalf("the session's agent runs in %q, want %q", info.Cwd, proj)
	}
	ownerGone()

	r = acpx("--approve-all", "sim: think weighing-the-edit\nsim: say hello from shard\nsim: tool edit {\"path\":\"a.txt\",\"old_string\":\"two\",\"new_string\":\"2\"}")
	out := r.stdout + r.stderr
	// acpx prints each streamed thought chunk on a line of its own
	// ("[thinking] weigh", "[thinking] ing-the-edit"), cut wherever the
	// stream was cut: the thought is their concatenation.
	var thought strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "[thinking] "); ok {
			thought.WriteString(strings.TrimSpace(rest))
		}
	}
	if !strings.Contains(thought.String(), "weighing-the-edit") {
		t.Errorf("acpx's thinking %q lacks the thought:\n%s", thought.String(), out)
	}
	for _, want := range []string{"hello from shard", "edit a.txt (completed)", filepath.Join(proj, "a.txt"), "end_turn"} {
		if !strings.Contains(out, want) {
			t.Errorf("acpx's output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "a.txt")); string(b) != "one\n2\n" {
		t.Fatalf("a.txt = %q", b)
	}
	ownerGone()

	// A new acpx process: its new face resumes the same agent.
	r = acpx("sim: say resumed fine")
	out = r.stdout + r.stderr
	if !strings.Contains(out, "resumed fine") || !strings.Contains(out, "session/resume") || !strings.Contains(out, sid) {
		t.Fatalf("the second prompt did not resume %s:\n%s", sid, out)
	}
	if ls := acpx("sessions", "list").stdout; !strings.Contains(ls, sid) || !strings.Contains(ls, proj) {
		t.Fatalf("sessions list lacks %s:\n%s", sid, ls)
	}
	var list protocol.AgentListData
	w := dialWire(t, d)
	w.call(&protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list)
	if len(list.Agents) != 1 {
		t.Fatalf("acpx made %d agents, want the one: %s", len(list.Agents), protocol.MustMarshal(list))
	}
}
