package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Command is a typed client → server message that can check itself.
type Command interface {
	Typed
	// Validate reports the first missing or invalid field as an
	// INVALID_REQUEST *Error naming it.
	Validate() error
}

// Scope says which layer a message type belongs to.
type Scope int

// Scopes of command types.
const (
	ScopeUnknown      Scope = iota
	ScopeAgent              // per-agent (§9): routed by agent_id
	ScopeOrchestrator       // daemon-level (§10): handled by the daemon
)

// CommandScope returns the layer of a command type.
func CommandScope(typ string) Scope {
	c := newCommand(typ)
	if c == nil {
		return ScopeUnknown
	}
	if strings.Contains(typ, ".") {
		return ScopeOrchestrator
	}
	return ScopeAgent
}

func newCommand(typ string) Command {
	switch typ {
	case TypePrompt:
		return &Prompt{}
	case TypeSteer:
		return &Steer{}
	case TypeAbort:
		return &Abort{}
	case TypeSetMode:
		return &SetMode{}
	case TypeListModes:
		return &ListModes{}
	case TypeListModels:
		return &ListModels{}
	case TypeSetModel:
		return &SetModel{}
	case TypeListReasoningLevels:
		return &ListReasoningLevels{}
	case TypeSetReasoningLevel:
		return &SetReasoningLevel{}
	case TypeSessionOp:
		return &SessionOp{}
	case TypePermissionResponse:
		return &PermissionResponse{}
	case TypeUIResponse:
		return &UIResponse{}
	case TypeGetSync:
		return &GetSync{}
	case TypeGetImage:
		return &GetImage{}
	case TypeAgentList:
		return &AgentList{}
	case TypeAgentCreate:
		return &AgentCreate{}
	case TypeAgentAttach:
		return &AgentAttach{}
	case TypeAgentDetach:
		return &AgentDetach{}
	case TypeAgentTerminate:
		return &AgentTerminate{}
	case TypeAgentKill:
		return &AgentKill{}
	case TypeAgentRemove:
		return &AgentRemove{}
	case TypeAgentUpdate:
		return &AgentUpdate{}
	case TypeAgentStatus:
		return &AgentStatusCmd{}
	case TypeDaemonShutdown:
		return &DaemonShutdown{}
	case TypeWSTicket:
		return &WSTicket{}
	case TypeWebEnroll:
		return &WebEnroll{}
	case TypeWebSessionsList:
		return &WebSessionsList{}
	case TypeWebSessionsRevoke:
		return &WebSessionsRevoke{}
	case TypeTokenCreate:
		return &TokenCreate{}
	case TypeTokenList:
		return &TokenList{}
	case TypeTokenRevoke:
		return &TokenRevoke{}
	case TypeDaemonStatus:
		return &DaemonStatus{}
	case TypeClusterStatus:
		return &ClusterStatus{}
	case TypeDaemonCheck:
		return &DaemonCheck{}
	case TypeModelsList:
		return &ModelsList{}
	case TypeJobsList:
		return &JobsList{}
	case TypeJobsShow:
		return &JobsShow{}
	case TypeJobsPrune:
		return &JobsPrune{}
	case TypeWorkspaceCreate:
		return &WorkspaceCreate{}
	case TypeWorkspaceAttach:
		return &WorkspaceAttach{}
	case TypeWorkspaceList:
		return &WorkspaceList{}
	case TypeWorkspaceStatus:
		return &WorkspaceStatus{}
	case TypeWorkspaceRetire:
		return &WorkspaceRetire{}
	case TypeWorkspaceDiff:
		return &WorkspaceDiff{}
	case TypeWorkspaceMerge:
		return &WorkspaceMerge{}
	case TypeTeamGoalSubmit:
		return &TeamGoalSubmit{}
	case TypeTeamGoalList:
		return &TeamGoalList{}
	case TypeTeamGoalShow:
		return &TeamGoalShow{}
	case TypeTeamGoalCancel:
		return &TeamGoalCancel{}
	case TypeTeamTaskCreate:
		return &TeamTaskCreate{}
	case TypeTeamTaskAction:
		return &TeamTaskAction{}
	case TypeTeamDecisionList:
		return &TeamDecisionList{}
	case TypeTeamDecisionAnswer:
		return &TeamDecisionAnswer{}
	case TypeTeamMemoryList:
		return &TeamMemoryList{}
	case TypeTeamMemoryPut:
		return &TeamMemoryPut{}
	case TypeTeamMemoryDelete:
		return &TeamMemoryDelete{}
	case TypeTeamFeed:
		return &TeamFeed{}
	case TypeTeamMessage:
		return &TeamMessage{}
	case TypeSubagentCreate:
		return &SubagentCreate{}
	case TypeSubagentWait:
		return &SubagentWait{}
	case TypeSubagentSteer:
		return &SubagentSteer{}
	case TypeSubagentRelaunch:
		return &SubagentRelaunch{}
	case TypeSubagentStatus:
		return &SubagentStatus{}
	case TypeSubagentStop:
		return &SubagentStop{}
	}
	return nil
}

// DecodeHeader parses the envelope of one record: it must be a JSON object
// whose `type` is a non-empty string and whose `id` and `agent_id`, when
// present, are strings. The returned Header holds whatever was readable even
// on error (so a response can still carry the command's id).
func DecodeHeader(rec []byte) (Header, error) {
	var h Header
	rec = bytes.TrimSpace(rec)
	if len(rec) == 0 || rec[0] != '{' {
		return h, Errorf(CodeInvalidRequest, "message must be a JSON object")
	}
	var raw struct {
		ID      headerMember `json:"id"`
		Type    headerMember `json:"type"`
		AgentID headerMember `json:"agent_id"`
	}
	if err := json.Unmarshal(rec, &raw); err != nil {
		return h, Errorf(CodeInvalidRequest, "malformed JSON: %s", jsonErrText(err))
	}
	// An id, agent_id or type over its limit is refused and left out of
	// the Header: the error response echoes the Header's id and type, and
	// must not send a client's megabytes back (nor keep them).
	var idErr, agentErr error
	if raw.ID.set {
		idErr = raw.ID.decode("id", &h.ID, MaxIDLen)
	}
	if raw.AgentID.set {
		agentErr = raw.AgentID.decode("agent_id", &h.AgentID, MaxIDLen)
	}
	if !raw.Type.set || string(raw.Type.raw) == "null" {
		return h, Errorf(CodeInvalidRequest, `field "type": required`)
	}
	if err := raw.Type.decode("type", &h.Type, MaxNameLen); err != nil {
		return h, err
	}
	if h.Type == "" {
		return h, Errorf(CodeInvalidRequest, `field "type": must not be empty`)
	}
	if idErr != nil {
		return h, idErr
	}
	return h, agentErr
}

// headerMember is the JSON text of an envelope member (id, type,
// agent_id), copied only when it is short enough to be a valid one: of a
// longer one only its kind and size are kept (json.Unmarshal hands
// UnmarshalJSON the record's own bytes), so a member of megabytes costs no
// copy.
type headerMember struct {
	set  bool            // the member is present
	raw  json.RawMessage // its JSON text, when size <= maxHeaderMember
	kind byte            // the first byte of its JSON text
	size int             // the length of its JSON text
}

// maxHeaderMember bounds the JSON text a headerMember keeps: the longest
// limit, every byte escaped as \u00XX, in quotes.
const maxHeaderMember = 6*max(MaxIDLen, MaxNameLen) + 2

// UnmarshalJSON implements json.Unmarshaler.
func (m *headerMember) UnmarshalJSON(b []byte) error {
	m.set, m.size = true, len(b)
	if len(b) > 0 {
		m.kind = b[0]
	}
	if len(b) <= maxHeaderMember {
		m.raw = append(m.raw[:0], b...)
	}
	return nil
}

// decode sets dst to the member's string of at most limit bytes: over it,
// dst is left empty and the error names the field and the limit (for a
// string too long to keep, the length of its JSON text, quotes aside).
func (m *headerMember) decode(name string, dst *string, limit int) error {
	if m.raw == nil {
		if m.kind == '"' {
			return overLimit(name, m.size-2, limit, UnitBytes)
		}
		return Errorf(CodeInvalidRequest, "field %q: expected string, got %s", name, jsonKind([]byte{m.kind}))
	}
	var v string
	if err := stringField(name, m.raw, &v); err != nil {
		return err
	}
	if err := maxLen(name, v, limit); err != nil {
		return err
	}
	*dst = v
	return nil
}

func stringField(name string, raw json.RawMessage, dst *string) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return Errorf(CodeInvalidRequest, "field %q: expected string, got %s", name, jsonKind(raw))
	}
	return nil
}

func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// DecodeCommand decodes and validates one client command. Errors are
// INVALID_REQUEST *Error values whose message names the offending field (or
// the unknown type); the Header is returned as far as it could be read. A
// record that is not UTF-8, has a lone surrogate escape or repeats a key is
// refused (strict.go).
func DecodeCommand(rec []byte) (Command, Header, error) {
	h, err := DecodeHeader(rec)
	if err != nil {
		return nil, h, err
	}
	// After DecodeHeader, which proved rec one JSON object (strict.go).
	if err := checkStrict(rec); err != nil {
		return nil, h, err
	}
	cmd := newCommand(h.Type)
	if cmd == nil {
		return nil, h, Errorf(CodeInvalidRequest, "unknown type %q", h.Type)
	}
	if err := json.Unmarshal(rec, cmd); err != nil {
		return nil, h, Errorf(CodeInvalidRequest, "%s", jsonErrText(err))
	}
	if err := headerBounds(h); err != nil {
		return nil, h, err
	}
	if err := cmd.Validate(); err != nil {
		return nil, h, err
	}
	return cmd, h, nil
}

// jsonErrText turns an encoding/json error into a message that names the
// field, e.g. `field "message": expected string, got number`.
func jsonErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(message)"
		}
		return fmt.Sprintf("field %q: expected %s, got %s", field, goKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at offset %d: %s", se.Offset, se.Error())
	}
	return err.Error()
}

func goKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "number"
	}
	return k
}

// invalid builds an INVALID_REQUEST error for a field.
func invalid(field, format string, args ...any) error {
	return &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("field %q: ", field) + fmt.Sprintf(format, args...)}
}

func required(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	return nil
}

func oneOf(field, v string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return invalid(field, "must be one of %s", strings.Join(allowed, ", "))
}

// ---- Validate methods ----

// Validate implements Command.
func (c *Prompt) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if c.Message == "" && len(c.Images) == 0 {
		return invalid("message", "required")
	}
	return oneOf("streaming_behavior", c.StreamingBehavior, BehaviorSteer, BehaviorFollowUp)
}

// Validate implements Command.
func (c *Steer) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if c.Message == "" && len(c.Images) == 0 {
		return invalid("message", "required")
	}
	return nil
}

// Validate implements Command.
func (c *Abort) Validate() error { return nil }

// Validate implements Command.
func (c *SetMode) Validate() error {
	if err := maxLen("mode", c.Mode, MaxNameLen); err != nil {
		return err
	}
	return required("mode", c.Mode)
}

// Validate implements Command.
func (c *ListModes) Validate() error { return nil }

// Validate implements Command.
func (c *ListModels) Validate() error { return nil }

// Validate implements Command.
func (c *SetModel) Validate() error {
	if err := maxLen("model", c.Model, MaxNameLen); err != nil {
		return err
	}
	return required("model", c.Model)
}

// Validate implements Command.
func (c *ListReasoningLevels) Validate() error { return nil }

// Validate implements Command.
func (c *SetReasoningLevel) Validate() error {
	if err := bounds(bound{"model", c.Model, MaxNameLen}, bound{"effort", c.Effort, MaxNameLen}); err != nil {
		return err
	}
	if err := required("model", c.Model); err != nil {
		return err
	}
	return required("effort", c.Effort)
}

// Validate implements Command.
func (c *SessionOp) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := required("op", c.Op); err != nil {
		return err
	}
	if err := oneOf("op", c.Op, SessionOpList, SessionOpCompact, SessionOpFork); err != nil {
		return err
	}
	switch c.Op {
	case SessionOpCompact:
		if c.Args != nil && c.Args.KeepRecentTokens != nil && *c.Args.KeepRecentTokens <= 0 {
			return invalid("args.keep_recent_tokens", "must be a positive integer")
		}
	case SessionOpFork:
		if c.Args == nil || c.Args.FromEntryID == "" {
			return invalid("args.from_entry_id", "required")
		}
	}
	return nil
}

// Validate implements Command.
func (c *PermissionResponse) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := required("request_id", c.RequestID); err != nil {
		return err
	}
	switch {
	case c.ChoiceID != "" && c.Decision != "":
		return invalid("choice_id", "choice_id and decision are mutually exclusive")
	case c.ChoiceID == "" && c.Decision == "":
		return invalid("decision", "one of choice_id or decision is required")
	}
	return oneOf("decision", c.Decision, DecisionAllow, DecisionAllowAlways, DecisionDeny)
}

// Validate implements Command.
func (c *UIResponse) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := required("request_id", c.RequestID); err != nil {
		return err
	}
	v := bytes.TrimSpace(c.Value)
	if len(v) == 0 {
		return invalid("value", "required (a string, an array of strings, or null)")
	}
	switch v[0] {
	case 'n', '"':
		return nil
	case '[':
		var ss []string
		if json.Unmarshal(v, &ss) == nil {
			return nil
		}
	}
	return invalid("value", "expected a string, an array of strings, or null, got %s", jsonKind(v))
}

// Validate implements Command.
func (c *GetSync) Validate() error { return nil }

// Validate implements Command.
func (c *AgentList) Validate() error {
	if err := maxLen("parent_agent_id", c.ParentAgentID, MaxIDLen); err != nil {
		return err
	}
	if c.SinceMs < 0 {
		return invalid("since_ms", "must not be negative")
	}
	return checkPage(CursorAgents, c.Limit, c.Cursor)
}

// Validate implements Command.
func (c *AgentCreate) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := c.refuseManaged(); err != nil {
		return err
	}
	if err := required("cwd", c.Cwd); err != nil {
		return err
	}
	if c.HeadlessPolicy != "" && !ValidHeadlessPolicy(c.HeadlessPolicy) {
		return invalid("headless_policy", "must be one of deny, allow_if_rule_matches, queue")
	}
	if err := validateMCPServers(c.MCPServers); err != nil {
		return err
	}
	return checkMode("mode", c.Mode)
}

// refuseManaged refuses the managed-child manifest fields, which
// docs/protocol.md §10.1 reserves for the daemon ("daemon sets these; clients
// do not pass them"): a client that could set launch_policy would lift
// jobs.max_tasks and jobs.max_depth for every agent below the one it creates,
// and depth or alias would forge a place in a job. The daemon never sends
// agent.create for its own children: the jobs coordinator writes their
// manifests directly. A field counts as given when it is present, even as 0,
// "" or [] (the decoder keeps presence for depth, launch_policy and names).
func (c *AgentCreate) refuseManaged() error {
	for _, f := range [...]struct {
		name  string
		given bool
	}{
		{"system_prompt", c.SystemPrompt != ""},
		{"depth", c.Depth != nil},
		{"launch_policy", c.LaunchPolicy != nil},
		{"alias", c.Alias != ""},
		{"definition_name", c.DefinitionName != ""},
		{"display_name", c.DisplayName != ""},
		{"names", c.Names != nil},
	} {
		if f.given {
			return invalid(f.name, "is set by the daemon for the children it manages; clients must not pass it")
		}
	}
	return nil
}

// Validate implements Command.
func (c *AgentAttach) Validate() error {
	if err := maxLen("role", c.Role, MaxNameLen); err != nil {
		return err
	}
	if err := required("agent_id", c.AgentID); err != nil {
		return err
	}
	return oneOf("role", c.Role, RoleInteractive, RoleObserver)
}

// Validate implements Command.
func (c *AgentDetach) Validate() error { return required("agent_id", c.AgentID) }

// Validate implements Command.
func (c *AgentTerminate) Validate() error { return required("agent_id", c.AgentID) }

// Validate implements Command.
func (c *AgentKill) Validate() error { return required("agent_id", c.AgentID) }

// Validate implements Command.
func (c *AgentStatusCmd) Validate() error { return nil }

// Validate implements Command.
func (c *DaemonShutdown) Validate() error { return nil }

// Validate implements Command.
func (c *WSTicket) Validate() error { return nil }

// Validate implements Command.
func (c *DaemonStatus) Validate() error { return nil }

// Validate implements Command.
func (c *DaemonCheck) Validate() error { return nil }

// Validate implements Command.
func (c *ModelsList) Validate() error { return nil }

// Validate implements Command.
func (c *JobsList) Validate() error {
	if err := maxLen("parent_agent_id", c.ParentAgentID, MaxIDLen); err != nil {
		return err
	}
	if err := checkPage(CursorJobs, c.Limit, c.Cursor); err != nil {
		return err
	}
	return oneOf("state", string(c.State), string(JobQueued), string(JobRunning), string(JobCompleted), string(JobFailed), string(JobCancelled))
}

// Validate implements Command.
func (c *JobsShow) Validate() error {
	if err := maxLen("handle", c.Handle, MaxIDLen); err != nil {
		return err
	}
	return required("handle", c.Handle)
}

// Validate implements Command.
func (c *SubagentCreate) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := required("parent_agent_id", c.ParentAgentID); err != nil {
		return err
	}
	if err := checkMode("mode", c.Mode); err != nil {
		return err
	}
	if err := oneOf("strategy", string(c.Strategy), string(StrategySingle), string(StrategyParallel), string(StrategyChain)); err != nil {
		return err
	}
	if err := oneOf("isolation", string(c.Isolation), string(IsolationNone), string(IsolationWorkspace)); err != nil {
		return err
	}
	if len(c.Tasks) == 0 {
		if c.Task == "" {
			return invalid("task", "required (or tasks for a batch)")
		}
		if c.Name == "" {
			return invalid("name", "required")
		}
		if c.Strategy != "" && c.Strategy != StrategySingle {
			return invalid("strategy", "a single task uses strategy single")
		}
		return nil
	}
	if c.Task != "" || c.Name != "" {
		return invalid("tasks", "give either name/task or tasks, not both")
	}
	if c.Strategy != StrategyParallel && c.Strategy != StrategyChain {
		return invalid("strategy", "required for a batch (parallel or chain)")
	}
	for i, t := range c.Tasks {
		if t.Name == "" {
			return invalid(fmt.Sprintf("tasks[%d].name", i), "required")
		}
		if t.Task == "" {
			return invalid(fmt.Sprintf("tasks[%d].task", i), "required")
		}
	}
	return nil
}

// Validate implements Command.
func (c *SubagentWait) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	if err := required("parent_agent_id", c.ParentAgentID); err != nil {
		return err
	}
	if len(c.Handles) == 0 {
		return invalid("handles", "at least one handle is required")
	}
	for i, h := range c.Handles {
		if h == "" {
			return invalid(fmt.Sprintf("handles[%d]", i), "must not be empty")
		}
	}
	if c.Timeout != nil && *c.Timeout < 0 {
		return invalid("timeout", "must not be negative")
	}
	return oneOf("mode", c.Mode, "any", "all")
}

// Validate implements Command.
func (c *SubagentSteer) Validate() error {
	if err := bounds(bound{"parent_agent_id", c.ParentAgentID, MaxIDLen}, bound{"target", c.Target, MaxIDLen},
		bound{"message", c.Message, MaxTextLen}); err != nil {
		return err
	}
	if err := required("parent_agent_id", c.ParentAgentID); err != nil {
		return err
	}
	if err := required("target", c.Target); err != nil {
		return err
	}
	return required("message", c.Message)
}

// Validate implements Command.
func (c *SubagentRelaunch) Validate() error {
	if err := bounds(bound{"parent_agent_id", c.ParentAgentID, MaxIDLen}, bound{"target", c.Target, MaxIDLen},
		bound{"task", c.Task, MaxTextLen}); err != nil {
		return err
	}
	if err := required("parent_agent_id", c.ParentAgentID); err != nil {
		return err
	}
	if err := required("target", c.Target); err != nil {
		return err
	}
	return required("task", c.Task)
}

// Validate implements Command.
func (c *SubagentStatus) Validate() error {
	if err := c.bounds(); err != nil {
		return err
	}
	return required("parent_agent_id", c.ParentAgentID)
}

// Validate implements Command.
func (c *SubagentStop) Validate() error {
	if err := bounds(bound{"parent_agent_id", c.ParentAgentID, MaxIDLen}, bound{"handle", c.Handle, MaxIDLen}); err != nil {
		return err
	}
	if err := required("parent_agent_id", c.ParentAgentID); err != nil {
		return err
	}
	return required("handle", c.Handle)
}
