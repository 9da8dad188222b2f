package store

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// Agent is the durable manifest of one Agent: its identity, where it runs
// and how it was launched. It lives in the "agents" bucket under AgentID.
// The JSON field names are the stored format; add fields with omitempty and
// never rename one.
type Agent struct {
	AgentID   string   `json:"agent_id"`           // required; the key; never changes
	SessionID string   `json:"session_id"`         // required; the transcript's session
	Cwd       string   `json:"cwd"`                // required; the runtime's working directory
	Name      string   `json:"name,omitempty"`     // optional human name
	Model     string   `json:"model,omitempty"`    // model override; "" = config default
	Provider  string   `json:"provider,omitempty"` // the provider it runs on, resolved at create; "" = stored before providers were resolved (the default)
	Mode      string   `json:"mode,omitempty"`     // runtime mode at launch
	Tools     []string `json:"tools,omitempty"`    // tool allow-list; nil = runtime default
	Skills    []string `json:"skills,omitempty"`   // skills the runtime loads; nil = none
	// MCPServers are the agent's own MCP servers (agent.create's
	// mcp_servers, or its parent's), over its profile's by name
	// (docs/protocol.md §10.1). Their env and headers may hold secrets:
	// AgentInfo shows only the names.
	MCPServers     map[string]protocol.MCPServer `json:"mcp_servers,omitempty"`
	SystemPrompt   string                        `json:"system_prompt,omitempty"`   // delegated system prompt of a managed child
	HeadlessPolicy string                        `json:"headless_policy,omitempty"` // override of headless.policy
	ParentAgentID  string                        `json:"parent_agent_id,omitempty"` // set for subagents
	CreatedAt      int64                         `json:"created_at"`                // epoch milliseconds
	Depth          int                           `json:"depth,omitempty"`           // subagent nesting depth; 0 = top level
	LaunchPolicy   *LaunchPolicy                 `json:"launch_policy,omitempty"`   // nil = no subagent limits recorded
	Alias          string                        `json:"alias,omitempty"`           // parent-scoped friendly name
	DefinitionName string                        `json:"definition_name,omitempty"` // agent definition it was made from
	DisplayName    string                        `json:"display_name,omitempty"`    // name shown in clients
	WorkspaceID    string                        `json:"workspace_id,omitempty"`    // the workspace it works in
	Runtime        string                        `json:"runtime,omitempty"`         // runtime profile; "" = the default ("shard")
	// SessionDir is where the session's directory is, relative to the
	// daemon's sessions directory, when it is not <session_id>: an adopted
	// fork lives under its source's (<source>/forks/<fork_id>, see
	// docs/protocol.md §9.2 session_op fork). Read it with SessionPath.
	SessionDir string `json:"session_dir,omitempty"`
	// Usage is the Agent's usage totals over every turn so far
	// (AgentInfo.usage), so that they outlive the daemon; nil before its
	// first turn that reported usage.
	Usage *Usage `json:"usage,omitempty"`
	// Title is the name a person reads when nobody named the Agent
	// (AgentInfo.title): automatic from its first accepted prompt, or set
	// with agent.update. Titled records that a title was given, even an
	// empty one: the automatic title is given once and never replaces one
	// set by hand.
	Title  string `json:"title,omitempty"`
	Titled bool   `json:"titled,omitempty"`
}

// Usage is the usage totals of an Agent: token counts and cost summed over
// its turns, the context size and model of the last. Turns counts the
// turns summed: a write of older totals (fewer turns) must not replace
// newer ones (see UpdateAgent callers).
type Usage struct {
	Input         int64   `json:"input"`
	Output        int64   `json:"output"`
	CacheRead     int64   `json:"cache_read,omitempty"`
	CacheWrite    int64   `json:"cache_write,omitempty"`
	Cost          float64 `json:"cost,omitempty"`
	ContextTokens int64   `json:"context_tokens,omitempty"`
	Model         string  `json:"model,omitempty"`
	Turns         int64   `json:"turns"`
}

// SessionPath is the session directory of the Agent under sessionsDir:
// SessionDir when set, else <session_id>. ok is false for a record whose
// path would leave sessionsDir (absolute, or a ".." component), which a
// caller must never touch.
func (a *Agent) SessionPath(sessionsDir string) (path string, ok bool) {
	rel := a.SessionDir
	if rel == "" {
		rel = a.SessionID
	}
	if rel == "" || !filepath.IsLocal(rel) {
		return "", false
	}
	return filepath.Join(sessionsDir, rel), true
}

// LaunchPolicy bounds the subagents an Agent may launch.
type LaunchPolicy struct {
	MaxTasks int `json:"max_tasks"` // limit on subagent tasks
	MaxDepth int `json:"max_depth"` // limit on subagent nesting depth
}

// validate reports a manifest missing a required field.
func (a *Agent) validate() error {
	switch {
	case a.AgentID == "":
		return fmt.Errorf("%w: agent has no agent_id", ErrInvalid)
	case a.SessionID == "":
		return fmt.Errorf("%w: agent %q has no session_id", ErrInvalid, a.AgentID)
	case a.Cwd == "":
		return fmt.Errorf("%w: agent %q has no cwd", ErrInvalid, a.AgentID)
	}
	return nil
}

// CreateAgent stores a new manifest. It fails with ErrInvalid if AgentID,
// SessionID or Cwd is empty and with ErrExists if the id is taken.
func (s *Store) CreateAgent(a Agent) error {
	if err := a.validate(); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		taken, err := exists(tx, bucketAgents, a.AgentID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: agent %q", ErrExists, a.AgentID)
		}
		return putAgent(tx, &a)
	})
	return wrapOp(err, "create agent %q", a.AgentID)
}

// GetAgent returns the manifest for id, or an error wrapping ErrNotFound.
func (s *Store) GetAgent(id string) (Agent, error) {
	var a Agent
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx, bucketAgents, id, &a)
		if err == nil && !found {
			err = fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		return err
	})
	if err != nil {
		return Agent{}, wrapOp(err, "get agent %q", id)
	}
	return a, nil
}

// ListAgents returns every manifest, oldest first (by CreatedAt, then
// AgentID). It returns an empty, non-nil slice when there are none.
func (s *Store) ListAgents() ([]Agent, error) {
	var out []Agent
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[Agent](tx, bucketAgents)
		return err
	})
	if err != nil {
		return nil, wrapOp(err, "list agents")
	}
	slices.SortFunc(out, func(a, b Agent) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.AgentID, b.AgentID))
	})
	return out, nil
}

// UpdateAgent reads the manifest for id, lets fn modify it, and writes the
// result, all in one transaction, so concurrent updates never lose each
// other's changes. If fn returns an error nothing is written and that error
// is returned (wrapped). The result must keep the same AgentID and its
// required fields (ErrInvalid). A missing id is ErrNotFound. fn runs while
// the write transaction is open: it must be quick and must not call back
// into the Store; it may run more than once (a group-commit retry, on a
// fresh copy of the manifest).
func (s *Store) UpdateAgent(id string, fn func(*Agent) error) error {
	err := s.update(func(tx *bolt.Tx) error {
		var a Agent
		found, err := getJSON(tx, bucketAgents, id, &a)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		if err := fn(&a); err != nil {
			return err
		}
		if a.AgentID != id {
			return fmt.Errorf("%w: agent_id of %q may not change (to %q)", ErrInvalid, id, a.AgentID)
		}
		if err := a.validate(); err != nil {
			return err
		}
		return putAgent(tx, &a)
	})
	return wrapOp(err, "update agent %q", id)
}
