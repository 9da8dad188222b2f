package acpface

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// MetaWorkspace is the session/new _meta key (a boolean) that asks for a
// workspace-isolated agent, as Options.Workspace does for every session.
const MetaWorkspace = "shard.dev/workspace"

// Options configure a face: which daemon it fronts and how the agents it
// creates are made.
type Options struct {
	// Socket is the daemon's unix socket ($SHARD_HOME/daemon.sock).
	Socket string
	// DialTimeout bounds connecting to the daemon and its hello.
	DialTimeout time.Duration
	// Runtime, Provider, Model and Mode are agent.create's fields for the
	// agents session/new creates ("" is the daemon's default).
	Runtime, Provider, Model, Mode string
	// Workspace makes session/new create each agent in a workspace of its
	// own (workspace.create: a git worktree on a new branch of the
	// repository at the session's cwd) instead of in the cwd itself.
	Workspace bool
	// Version is what initialize reports as the agent's version.
	Version string
	// Log receives the face's diagnostics (stderr: stdout is the ACP
	// stream). It never gets prompts, message text or tool arguments.
	Log *slog.Logger
}

// Face is one ACP connection to an editor, fronting the daemon. It
// implements the SDK's Agent (and its loader and model extensions).
type Face struct {
	opt   Options
	log   *slog.Logger
	asc   *acp.AgentSideConnection
	base  context.Context // ends with the editor's connection
	ready chan struct{}   // closed once asc is set

	mu       sync.Mutex
	conn     *client.Conn
	sessions map[string]*session
	prompts  map[string]*session // sent prompts by command id, until answered
	promptN  int
}

// nextPromptID is a command id for a prompt, apart from the client's own
// ids ("c-<n>").
func (f *Face) nextPromptID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promptN++
	return fmt.Sprintf("acp-prompt-%d", f.promptN)
}

// watchPrompt routes the response to prompt id to s; unwatchPrompt stops it.
func (f *Face) watchPrompt(id string, s *session) {
	f.mu.Lock()
	f.prompts[id] = s
	f.mu.Unlock()
}

func (f *Face) unwatchPrompt(id string) {
	f.mu.Lock()
	delete(f.prompts, id)
	f.mu.Unlock()
}

var (
	_ acp.Agent       = (*Face)(nil)
	_ acp.AgentLoader = (*Face)(nil)
)

// Serve runs the face on the editor's stdio (in: what the editor writes,
// out: what it reads) until the editor closes its end or ctx ends. It
// then closes its daemon connection, which detaches it from every agent:
// the agents keep running (it never terminates or kills one). Serve owns
// its process: it sets slog's default logger (see below).
func Serve(ctx context.Context, opt Options, in io.Reader, out io.Writer) error {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 5 * time.Second
	}
	base, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &Face{opt: opt, log: opt.Log, base: base, ready: make(chan struct{}), sessions: map[string]*session{}, prompts: map[string]*session{}}
	// The SDK logs through slog's default logger unless SetLogger is
	// called, and SetLogger races with the reader the connection has
	// already started: the face, which owns its process, sets the default
	// before the connection exists instead.
	slog.SetDefault(slog.New(quiet{opt.Log.Handler()}))
	f.asc = acp.NewAgentSideConnection(f, out, in)
	close(f.ready)
	select {
	case <-f.asc.Done():
	case <-ctx.Done():
	}
	cancel()
	f.mu.Lock()
	conn := f.conn
	f.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	return nil
}

// quiet is the SDK's log handler without the "raw" attribute, the whole
// line of a message it could not parse: it may hold a prompt's text.
type quiet struct{ slog.Handler }

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "raw" {
			out.AddAttrs(a)
		}
		return true
	})
	return q.Handler.Handle(ctx, out)
}

func (q quiet) WithAttrs(as []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(as)} }
func (q quiet) WithGroup(name string) slog.Handler    { return quiet{q.Handler.WithGroup(name)} }

// daemon returns the connection to the daemon, dialling it the first time
// (and again after it was lost).
func (f *Face) daemon(ctx context.Context) (*client.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		return f.conn, nil
	}
	dctx, cancel := context.WithTimeout(ctx, f.opt.DialTimeout)
	defer cancel()
	conn, err := client.Dial(dctx, f.opt.Socket)
	if err != nil {
		f.log.Error("cannot reach the shard daemon", "socket", f.opt.Socket, "err", err)
		return nil, &acp.RequestError{Code: rpcInternal,
			Message: fmt.Sprintf("the shard daemon is not running (cannot connect to %s); start it with `shardd`", f.opt.Socket),
			Data:    map[string]any{"error": err.Error()}}
	}
	f.conn = conn
	go f.pump(conn)
	return conn, nil
}

// pump routes the daemon's events to the sessions, in order, until the
// connection ends; then every open session fails what waits on it and is
// forgotten (a later session/load attaches again on a new connection).
func (f *Face) pump(conn *client.Conn) {
	for ev := range conn.Events() {
		if r, ok := ev.Msg.(*protocol.Response); ok {
			f.mu.Lock()
			s := f.prompts[r.ID]
			f.mu.Unlock()
			if s != nil {
				s.onPromptResponse(r)
			}
			continue
		}
		id := ev.Msg.Head().AgentID
		f.mu.Lock()
		s := f.sessions[id]
		f.mu.Unlock()
		if s != nil {
			s.handle(ev.Msg)
		}
	}
	f.mu.Lock()
	if f.conn == conn {
		f.conn = nil
	}
	lost := f.sessions
	f.sessions = map[string]*session{}
	f.mu.Unlock()
	if f.base.Err() == nil {
		f.log.Error("the connection to the shard daemon ended", "err", conn.Err())
	}
	for _, s := range lost {
		s.fail(errors.New("shard: the connection to the daemon ended"))
	}
}

// session returns the open session id.
func (f *Face) session(id acp.SessionId) (*session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[string(id)]
	if s == nil {
		return nil, unknownSession(id)
	}
	return s, nil
}

// update sends one session/update to the editor.
func (f *Face) update(id string, u acp.SessionUpdate) {
	<-f.ready
	if err := f.asc.SessionUpdate(f.base, acp.SessionNotification{SessionId: acp.SessionId(id), Update: u}); err != nil {
		f.log.Debug("session/update not sent", "session", id, "err", err)
	}
}

// Initialize answers the editor's handshake with what the face supports,
// after making sure the daemon answers: an editor learns at once that
// shardd is not running.
func (f *Face) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	if _, err := f.daemon(ctx); err != nil {
		return acp.InitializeResponse{}, err
	}
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "shard", Title: acp.Ptr("Shard"), Version: cmp.Or(f.opt.Version, "dev")},
		AuthMethods:     []acp.AuthMethod{},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: true,
			// Images go to the agent with the prompt; a model that takes
			// none refuses them (UNSUPPORTED, an invalid-params error).
			PromptCapabilities: acp.PromptCapabilities{Image: true, EmbeddedContext: true},
			// agent.create's mcp_servers take stdio and streamable HTTP.
			McpCapabilities: acp.McpCapabilities{Http: true},
			SessionCapabilities: acp.SessionCapabilities{
				List:   &acp.SessionListCapabilities{},
				Resume: &acp.SessionResumeCapabilities{},
				Close:  &acp.SessionCloseCapabilities{},
			},
		},
	}, nil
}

// Authenticate is never needed: the daemon's socket is the access control
// (docs/protocol.md §4.2).
func (f *Face) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession creates a durable agent in the session's cwd (or in a
// workspace of its own) and attaches to it; the sessionId is its agent_id.
func (f *Face) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, invalidParams("cwd must be an absolute path")
	}
	conn, err := f.daemon(ctx)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	var id string
	if ws, _ := p.Meta[MetaWorkspace].(bool); ws || f.opt.Workspace {
		id, err = f.createInWorkspace(ctx, conn, p)
	} else {
		id, err = f.create(ctx, conn, p)
	}
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	st, err := f.open(ctx, id, false)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(id), Modes: st.modes(), Models: st.models(), ConfigOptions: st.configOptions()}, nil
}

// create is agent.create in the cwd. The editor's MCP servers go along as
// mcp_servers; a profile that refuses them (not the reference runtime)
// gets the agent without them, and stderr says so.
func (f *Face) create(ctx context.Context, conn *client.Conn, p acp.NewSessionRequest) (string, error) {
	servers, skipped := mcpServers(p.McpServers)
	if len(skipped) > 0 {
		f.log.Warn("MCP servers over SSE or ACP are not passed to Shard agents", "servers", skipped)
	}
	cmd := &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: p.Cwd,
		Runtime: f.opt.Runtime, Provider: f.opt.Provider, Model: f.opt.Model, Mode: f.opt.Mode, MCPServers: servers}
	var data protocol.AgentCreateData
	err := conn.Call(ctx, cmd, &data)
	if err != nil && len(servers) > 0 && protocol.CodeOf(err) == protocol.CodeInvalidRequest && strings.Contains(err.Error(), `"mcp_servers"`) {
		f.log.Warn("the runtime profile takes no MCP servers; the editor's are ignored", "profile", cmp.Or(f.opt.Runtime, "shard"), "servers", slices.Sorted(maps.Keys(servers)))
		cmd.Header.ID, cmd.MCPServers = "", nil
		err = conn.Call(ctx, cmd, &data)
	}
	if err != nil {
		return "", rpcError(err)
	}
	f.log.Info("agent created", "agent_id", data.AgentID)
	return data.AgentID, nil
}

// createInWorkspace is workspace.create at the cwd's repository: a fresh
// agent in a git worktree of its own. workspace.create has no runtime
// profile nor MCP servers (docs/protocol.md §10.1a): a --profile is
// refused, the editor's servers are ignored with a log line.
func (f *Face) createInWorkspace(ctx context.Context, conn *client.Conn, p acp.NewSessionRequest) (string, error) {
	if f.opt.Runtime != "" {
		return "", invalidParams("a workspace session runs on the default runtime profile; drop --profile or the workspace")
	}
	if len(p.McpServers) > 0 {
		f.log.Warn("MCP servers are not passed to workspace agents", "servers", len(p.McpServers))
	}
	cmd := &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: p.Cwd,
		Provider: f.opt.Provider, Model: f.opt.Model, Mode: f.opt.Mode}
	var data protocol.WorkspaceCreateData
	if err := conn.Call(ctx, cmd, &data); err != nil {
		return "", rpcError(err)
	}
	f.log.Info("agent created in a workspace", "agent_id", data.AgentID, "workspace_id", data.Workspace.WorkspaceID)
	return data.AgentID, nil
}

// LoadSession attaches to the agent and replays its live window as
// session/updates before answering.
func (f *Face) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if len(p.McpServers) > 0 {
		f.log.Info("session/load keeps the agent's own MCP servers; the editor's are ignored", "servers", len(p.McpServers))
	}
	st, err := f.open(ctx, string(p.SessionId), true)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	return acp.LoadSessionResponse{Modes: st.modes(), Models: st.models(), ConfigOptions: st.configOptions()}, nil
}

// ResumeSession attaches to the agent without replaying anything.
func (f *Face) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	st, err := f.open(ctx, string(p.SessionId), false)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	return acp.ResumeSessionResponse{Modes: st.modes(), Models: st.models(), ConfigOptions: st.configOptions()}, nil
}

// CloseSession cancels the session's turn, if one runs, and detaches from
// the agent, which stays (durable, restored on demand).
func (f *Face) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	s, err := f.session(p.SessionId)
	if err != nil {
		return acp.CloseSessionResponse{}, err
	}
	if s.cancel(ctx) {
		s.waitTurn(ctx)
	}
	f.mu.Lock()
	if f.sessions[s.id] == s {
		delete(f.sessions, s.id)
	}
	f.mu.Unlock()
	s.fail(errors.New("the session was closed"))
	if err := s.conn.Call(ctx, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: s.id}}, nil); err != nil {
		return acp.CloseSessionResponse{}, rpcError(err)
	}
	return acp.CloseSessionResponse{}, nil
}

// open attaches to agent id as a session of this face, waits for its sync
// (replayed first when replay is set) and reads its catalogs.
func (f *Face) open(ctx context.Context, id string, replay bool) (*session, error) {
	conn, err := f.daemon(ctx)
	if err != nil {
		return nil, err
	}
	s := newSession(f, conn, id, replay)
	f.mu.Lock()
	old := f.sessions[id]
	f.sessions[id] = s
	f.mu.Unlock()
	if old != nil {
		old.fail(errors.New("the session was opened again"))
		_ = conn.Call(ctx, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}, nil)
	}
	var data protocol.AgentAttachData
	if err := conn.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, &data); err != nil {
		f.forget(s)
		s.fail(err)
		return nil, rpcError(err)
	}
	s.mu.Lock()
	s.cwd, s.title = data.Info.Cwd, data.Info.Title
	s.mu.Unlock()
	close(s.attached)
	select {
	case <-s.synced:
	case <-s.gone:
		return nil, rpcError(s.failure())
	case <-ctx.Done():
		f.forget(s)
		s.fail(ctx.Err())
		return nil, rpcError(ctx.Err())
	}
	s.loadCatalogs(ctx)
	f.log.Info("session open", "agent_id", id, "replayed", replay)
	return s, nil
}

// forget drops s from the open sessions.
func (f *Face) forget(s *session) {
	f.mu.Lock()
	if f.sessions[s.id] == s {
		delete(f.sessions, s.id)
	}
	f.mu.Unlock()
}

// ListSessions lists the daemon's top-level agents whose cwd is the given
// cwd or below it, and those of the workspaces of the repository there;
// without a cwd, every top-level agent. updatedAt is the agent's creation
// time: AgentInfo carries no later one. One page: the cursor is ignored.
func (f *Face) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	conn, err := f.daemon(ctx)
	if err != nil {
		return acp.ListSessionsResponse{}, err
	}
	var list protocol.AgentListData
	if err := conn.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		return acp.ListSessionsResponse{}, rpcError(err)
	}
	inWorkspace := map[string]bool{}
	cwd := ""
	if p.Cwd != nil && *p.Cwd != "" {
		cwd = filepath.Clean(*p.Cwd)
		var ws protocol.WorkspaceListData
		// A cwd outside any repository has no workspaces: the refusal is
		// not an error of the list.
		if err := conn.Call(ctx, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, Cwd: cwd}, &ws); err == nil {
			for _, w := range ws.Workspaces {
				inWorkspace[w.WorkspaceID] = true
			}
		}
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, a := range list.Agents {
		if a.ParentAgentID != "" {
			continue
		}
		if cwd != "" && !inWorkspace[a.WorkspaceID] && !under(filepath.Clean(a.Cwd), cwd) {
			continue
		}
		info := acp.SessionInfo{SessionId: acp.SessionId(a.AgentID), Cwd: a.Cwd,
			UpdatedAt: acp.Ptr(time.UnixMilli(a.CreatedAt).UTC().Format(time.RFC3339))}
		if t := cmp.Or(a.Title, a.DisplayName, a.Name); t != "" {
			info.Title = acp.Ptr(t)
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	if p == dir {
		return true
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Prompt prompts the agent and streams its turn; it answers when the turn
// ends.
func (f *Face) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := f.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text, images, err := promptMessage(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return s.prompt(text, images)
}

// Cancel aborts the session's turn; its session/prompt answers cancelled.
func (f *Face) Cancel(ctx context.Context, p acp.CancelNotification) error {
	s, err := f.session(p.SessionId)
	if err != nil {
		return err
	}
	s.cancel(f.base)
	return nil
}

// SetSessionMode switches the agent's mode (set_mode).
func (f *Face) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	s, err := f.session(p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	if err := s.setMode(ctx, string(p.ModeId)); err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	return acp.SetSessionModeResponse{}, nil
}

// UnstableSetSessionModel selects the agent's model (set_model).
func (f *Face) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	s, err := f.session(p.SessionId)
	if err != nil {
		return acp.UnstableSetSessionModelResponse{}, err
	}
	if err := s.setModel(ctx, string(p.ModelId)); err != nil {
		return acp.UnstableSetSessionModelResponse{}, err
	}
	return acp.UnstableSetSessionModelResponse{}, nil
}

// SetSessionConfigOption sets the mode, the model or the reasoning level.
func (f *Face) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, invalidParams("Shard's config options are selects")
	}
	s, err := f.session(p.ValueId.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	v := string(p.ValueId.Value)
	switch p.ValueId.ConfigId {
	case configMode:
		err = s.setMode(ctx, v)
	case configModel:
		err = s.setModel(ctx, v)
	case configReasoning:
		err = s.setReasoning(ctx, v)
	default:
		err = &acp.RequestError{Code: rpcResourceNotFound, Message: fmt.Sprintf("no config option %q", p.ValueId.ConfigId)}
	}
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	s.loadCatalogs(ctx)
	return acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
}
