package registry

// agent.create: validating and preparing a new agent (a fork of another
// session included), committing it, then serving it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// create validates agent.create, reserves the session id, and does the
// filesystem checks and the store commit off the mailbox.
func (r *Actor) create(c actor.Context, cmd *Command) {
	req := cmd.Cmd.(*protocol.AgentCreate)
	if r.draining {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
		return
	}
	if !filepath.IsAbs(req.Cwd) {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": must be an absolute path`))
		return
	}
	// Another node's name was forwarded there by the gateway; one that
	// reaches the registry names no node it can reach (docs/protocol.md
	// §10.1).
	if req.Node != "" && req.Node != r.deps.Agent.Node {
		if r.deps.Agent.Node == "" {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "node": this daemon is not clustered`))
		} else {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "node": %q is not a node this daemon forwards to`, req.Node))
		}
		return
	}
	if !r.deps.Agent.Runtime.KnownProfile(req.Runtime) {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "runtime": no runtime profile %q is configured`, req.Runtime))
		return
	}
	if err := r.deps.Agent.Runtime.CheckMCP(req.Runtime, req.MCPServers); err != nil {
		fail(cmd, err)
		return
	}
	if err := r.deps.Agent.Runtime.CheckTools(req.Runtime, protocol.WithoutMCPTools(req.Tools, req.MCPServers), req.Skills); err != nil {
		fail(cmd, err)
		return
	}
	if req.ParentAgentID != "" {
		if _, found, err := r.infoOf(req.ParentAgentID); err != nil || !found {
			fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no parent agent %s", req.ParentAgentID))
			return
		}
	}
	// The manifest names what runs: the provider and model resolved
	// against the configured ones, or NOT_FOUND before anything is stored
	// (docs/protocol.md §13, providers).
	prov, model, err := r.deps.Agent.Models.ResolveCreate(req.Runtime, req.Provider, req.Model)
	if err != nil {
		fail(cmd, err)
		return
	}
	m := store.Agent{
		AgentID:        ids.New("agent"),
		SessionID:      req.SessionID,
		Cwd:            req.Cwd,
		Name:           req.Name,
		Model:          model,
		Provider:       prov,
		Mode:           req.Mode,
		Tools:          req.Tools,
		Skills:         req.Skills,
		MCPServers:     req.MCPServers,
		HeadlessPolicy: req.HeadlessPolicy,
		ParentAgentID:  req.ParentAgentID,
		CreatedAt:      r.deps.Clock.Now().UnixMilli(),
		Runtime:        req.Runtime,
		// The managed-child fields (depth, launch_policy, alias, …) are never
		// copied from a client: Validate refuses them (docs/protocol.md
		// §10.1), and the jobs coordinator writes its children's manifests
		// itself.
	}
	if m.Mode == "" {
		m.Mode = r.deps.DefaultMode
	}
	adopt := m.SessionID != ""
	if adopt {
		if !sessionIDPattern.MatchString(m.SessionID) {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "session_id": not a session id`))
			return
		}
		// Adopted by an agent being created, or by a stored one (live or
		// not: the store's session index has them all).
		_, taken := r.reserved[m.SessionID]
		if !taken {
			var err error
			if _, taken, err = r.deps.Store.SessionAdopted(m.SessionID); err != nil {
				fail(cmd, protocol.Errorf(protocol.CodeInternal, "the store could not be read"))
				return
			}
		}
		if taken {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "session is already adopted"))
			return
		}
	} else {
		m.SessionID = ids.New("sess")
	}
	r.reserved[m.SessionID] = m.AgentID // until the commit resolves

	sys, self := c.ActorSystem(), c.Self()
	st, sessionsDir, rc := r.deps.Store, r.deps.Agent.Runtime.SessionsDir, r.deps.Agent.Runtime
	started := r.deps.Group.Go(func() {
		err := prepare(&m, adopt, sessionsDir)
		if err == nil {
			// The skills are looked up where the runtime will: in the
			// canonical cwd and the Shard home.
			err = rc.CheckSkills(m.Runtime, m.Cwd, m.Skills)
		}
		if err == nil {
			// Commit before acknowledge: an acknowledged agent survives a
			// crash.
			if cerr := st.CreateAgent(m); cerr != nil {
				err = fmt.Errorf("store agent manifest: %w", cerr)
			}
		}
		sys.Root.Send(self, &createResult{cmd: cmd, m: m, err: err})
	})
	if !started {
		delete(r.reserved, m.SessionID)
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// prepare canonicalizes the cwd and checks an adopted session.
func prepare(m *store.Agent, adopt bool, sessionsDir string) error {
	cwd, err := filepath.EvalSymlinks(m.Cwd)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": %s does not exist`, m.Cwd)
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": %s is not a directory`, m.Cwd)
	}
	m.Cwd = filepath.Clean(cwd)
	if !adopt {
		return nil
	}
	f, err := os.Open(filepath.Join(sessionsDir, m.SessionID, sessionFile))
	if errors.Is(err, os.ErrNotExist) {
		// Not a top-level session: maybe a fork (docs/protocol.md §9.2
		// session_op fork), whose directory stays where the fork wrote it.
		if rel, ok := findFork(sessionsDir, m.SessionID); ok {
			m.SessionDir = rel
			f, err = os.Open(filepath.Join(sessionsDir, rel, sessionFile))
		}
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeNotFound, "no session %s", m.SessionID)
	}
	defer f.Close()
	rd := protocol.NewReader(f, 0)
	for {
		line, err := rd.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return protocol.Errorf(protocol.CodeSessionCorrupt, "session %s cannot be read", m.SessionID)
		}
		if !json.Valid(line) {
			return protocol.Errorf(protocol.CodeSessionCorrupt, "session %s cannot be restored", m.SessionID)
		}
	}
}

// sessionFile is a session directory's transcript; forksDir the
// subdirectory session_op fork writes a session's forks into, each in a
// directory of its own (the runtime's layout, runtime/refagent).
const (
	sessionFile = "session.jsonl"
	forksDir    = "forks"
	// maxForkDepth bounds the search for a fork of a fork of …
	maxForkDepth = 32
)

// findFork looks for the fork whose session id is id under every session
// in sessionsDir (forks of forks included) and returns its directory
// relative to sessionsDir. A fork is recognized by its transcript's first
// row, the checkpoint carrying the fork's session id; the transcript is
// never written here. Unreadable directories are skipped.
func findFork(sessionsDir, id string) (string, bool) {
	tops, err := os.ReadDir(sessionsDir)
	if err != nil {
		return "", false
	}
	var search func(rel string, depth int) (string, bool)
	search = func(rel string, depth int) (string, bool) {
		if depth > maxForkDepth {
			return "", false
		}
		forks, err := os.ReadDir(filepath.Join(sessionsDir, rel, forksDir))
		if err != nil {
			return "", false
		}
		for _, d := range forks {
			if !d.IsDir() || !sessionIDPattern.MatchString(d.Name()) {
				continue
			}
			fork := filepath.Join(rel, forksDir, d.Name())
			if forkSessionID(filepath.Join(sessionsDir, fork, sessionFile)) == id {
				return fork, true
			}
			if found, ok := search(fork, depth+1); ok {
				return found, true
			}
		}
		return "", false
	}
	for _, d := range tops {
		if !d.IsDir() || !sessionIDPattern.MatchString(d.Name()) {
			continue
		}
		if found, ok := search(d.Name(), 1); ok {
			return found, true
		}
	}
	return "", false
}

// forkSessionID is the session id a fork's transcript at path names in
// its first row (the fork checkpoint), or "".
func forkSessionID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := protocol.NewReader(f, 0).Next()
	if err != nil {
		return ""
	}
	var row struct {
		Type         string `json:"type"`
		ArtifactKind string `json:"artifactKind"`
		SessionID    string `json:"sessionId"`
	}
	if json.Unmarshal(line, &row) != nil || row.Type != "checkpoint" || row.ArtifactKind != "fork" {
		return ""
	}
	return row.SessionID
}

func (r *Actor) onCreated(c actor.Context, res *createResult) {
	delete(r.reserved, res.m.SessionID) // the store's index has it now, if committed
	if res.err != nil {
		if protocol.CodeOf(res.err) == protocol.CodeInternal {
			r.deps.Logger.Error("registry: agent.create failed", "err", res.err)
		}
		fail(res.cmd, res.err)
		return
	}
	e := r.spawn(c, res.m)
	if e == nil {
		fail(res.cmd, protocol.Errorf(protocol.CodeInternal, "agent actor could not be started"))
		return
	}
	r.deps.Logger.Info("agent created", "agent_id", res.m.AgentID)
	r.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentSpawned{
		Header: protocol.Header{Type: protocol.TypeAgentSpawned, AgentID: res.m.AgentID},
		Info:   e.info,
	}))
	// The agent starts its first runtime and answers once it is ready (or
	// with RUNTIME_START_FAILED, keeping the identity for a retry).
	c.Send(e.pid, &agent.Request{Client: res.cmd.Client, Header: res.cmd.Header, Cmd: res.cmd.Cmd, Raw: res.cmd.Raw})
}
