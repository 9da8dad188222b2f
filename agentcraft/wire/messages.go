package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Version is the value of every message's "v" and of hello's "protocol":
// the one version of the dialect this package speaks.
const Version = 1

// Type is a message's "type": it names the message and decides which Go
// type its payload decodes into.
type Type string

// The server (Foreman -> Mod) message types.
const (
	TypeSnapshot       Type = "snapshot"
	TypeAgentUpsert    Type = "agent.upsert"
	TypeAgentLog       Type = "agent.log"
	TypeAgentSay       Type = "agent.say"
	TypeTaskUpsert     Type = "task.upsert"
	TypeDecisionUpsert Type = "decision.upsert"
	TypeRepoUpsert     Type = "repo.upsert"
	TypeMemoryUpsert   Type = "memory.upsert"
	TypeGoalUpsert     Type = "goal.upsert"
	TypeFeedAdd        Type = "feed.add"
	TypeDiff           Type = "diff"
	TypeNotify         Type = "notify"
	TypeForemanStatus  Type = "foreman.status"
	TypeAck            Type = "ack"
	TypeError          Type = "error"
)

// The client (Mod -> Foreman) message types.
const (
	TypeHello          Type = "hello"
	TypeGoalSubmit     Type = "goal.submit"
	TypeUserMessage    Type = "user.message"
	TypeDecisionAnswer Type = "decision.answer"
	TypeTaskAction     Type = "task.action"
	TypeAgentAction    Type = "agent.action"
	TypeDiffRequest    Type = "diff.request"
	TypeRepoAdd        Type = "repo.add"
)

// A ServerMessage is one the server sends (Foreman -> Mod). Its MarshalJSON
// produces the whole message, envelope included; Encode is the one way the
// server should turn it into a frame.
type ServerMessage interface {
	json.Marshaler
	// MessageType is the message's "type".
	MessageType() Type
	isServer()
}

// A ClientMessage is one a client sends (Mod -> Foreman). DecodeClient
// returns one; its MarshalJSON lets a Go client send it.
type ClientMessage interface {
	json.Marshaler
	// MessageType is the message's "type".
	MessageType() Type
	// CorrelationID is the message's "id", or "" if it had none: a
	// message with an id is answered with an ack whose Re is that id.
	CorrelationID() string
	isClient()
}

// envelope encodes body (a struct without a MarshalJSON of its own) and
// prefixes its fields with "v" and "type", which every message carries.
func envelope(t Type, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("agentcraft wire: encode %s: %w", t, err)
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + len(t) + 20)
	buf.WriteString(`{"v":1,"type":`)
	tb, _ := json.Marshal(string(t)) // a string always encodes
	buf.Write(tb)
	if len(b) > 2 { // body is an object: "{}" or "{...}"
		buf.WriteByte(',')
		buf.Write(b[1:])
	} else {
		buf.WriteByte('}')
	}
	return buf.Bytes(), nil
}

// Snapshot is the full state, sent in reply to every hello; the client
// rebuilds its whole view from it. Every list is always encoded ([] when
// empty).
type Snapshot struct {
	// ID is the optional "id" every message may carry. Choice: the dialect
	// lists it on server messages too, but a server has nothing to
	// correlate; Shard leaves it empty on what it sends.
	ID      string        `json:"id,omitempty"`
	Foreman ForemanStatus `json:"foreman"`
	Agents  []Agent       `json:"agents"`
	Tasks   []Task        `json:"tasks"`
	// Decisions are the open decisions plus the most recent answered ones.
	Decisions []Decision    `json:"decisions"`
	Repos     []Repo        `json:"repos"`
	Memory    []MemoryEntry `json:"memory"`
	// Goal is the current (latest) goal, absent when there is none.
	Goal *Goal `json:"goal,omitempty"`
	// Goals are all goals, oldest first.
	Goals []Goal `json:"goals"`
	// Feed are the most recent feed items, oldest first (at most FeedTailMax).
	Feed []FeedItem `json:"feed"`
	// Logs is the recent log tail per agent (at most LogTailMax entries each).
	Logs []AgentLogs `json:"logs"`
}

// AgentUpsert says an agent was created or changed; replace it by Agent.ID.
type AgentUpsert struct {
	// ID: see Snapshot.ID.
	ID    string `json:"id,omitempty"`
	Agent Agent  `json:"agent"`
}

// AgentLog carries new log lines for an agent monitor, to append to a
// bounded tail.
type AgentLog struct {
	// ID: see Snapshot.ID.
	ID      string     `json:"id,omitempty"`
	AgentID string     `json:"agentId"`
	Entries []LogEntry `json:"entries"`
}

// AgentSay is a speech bubble above an agent, also mirrored to the feed.
type AgentSay struct {
	// ID: see Snapshot.ID.
	ID      string `json:"id,omitempty"`
	AgentID string `json:"agentId"`
	Text    string `json:"text"`
	// To is an agent id, User or All; omitted when said to the room.
	To string `json:"to,omitempty"`
	TS int64  `json:"ts"`
}

// TaskUpsert says a task was created or changed; replace it by Task.ID.
type TaskUpsert struct {
	// ID: see Snapshot.ID.
	ID   string `json:"id,omitempty"`
	Task Task   `json:"task"`
}

// DecisionUpsert says a decision was opened, answered or cancelled; replace
// it by Decision.ID.
type DecisionUpsert struct {
	// ID: see Snapshot.ID.
	ID       string   `json:"id,omitempty"`
	Decision Decision `json:"decision"`
}

// RepoUpsert says a repo was added or changed (worktrees, CI, head, dirty);
// replace it by Repo.ID.
type RepoUpsert struct {
	// ID: see Snapshot.ID.
	ID   string `json:"id,omitempty"`
	Repo Repo   `json:"repo"`
}

// MemoryUpsert says a memory entry was written; replace it by Entry.ID.
type MemoryUpsert struct {
	// ID: see Snapshot.ID.
	ID    string      `json:"id,omitempty"`
	Entry MemoryEntry `json:"entry"`
}

// GoalUpsert says a goal was created or its progress or status changed;
// replace it by Goal.ID. The latest goal is the current one.
type GoalUpsert struct {
	// ID: see Snapshot.ID.
	ID   string `json:"id,omitempty"`
	Goal Goal   `json:"goal"`
}

// FeedAdd appends one item to the activity feed.
type FeedAdd struct {
	// ID: see Snapshot.ID.
	ID   string   `json:"id,omitempty"`
	Item FeedItem `json:"item"`
}

// DiffStats totals a Diff.
type DiffStats struct {
	Files     int `json:"files"`
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
}

// Diff answers a diff.request, to the requesting client only: the
// structured unified diff of a worktree against its base, uncommitted
// changes included.
type Diff struct {
	// ID: see Snapshot.ID.
	ID string `json:"id,omitempty"`
	// RequestID is the diff.request's RequestID.
	RequestID string `json:"requestId"`
	RepoID    string `json:"repoId"`
	Worktree  string `json:"worktree"`
	Base      string `json:"base,omitempty"`
	Branch    string `json:"branch,omitempty"`
	// Files is always encoded, [] when nothing changed or on error.
	Files []DiffFile `json:"files"`
	Stats DiffStats  `json:"stats"`
	// Truncated is true if very large files or hunks were cut.
	Truncated bool `json:"truncated"`
	// Error says why there is no diff. Choice: a failed diff is still a
	// diff message (Files [] and Stats zero) with Error set, since the
	// dialect gives diff an error field.
	Error string `json:"error,omitempty"`
}

// Notify is a toast or banner for the player; NotifyNeedUser means a
// decision is waiting.
type Notify struct {
	// ID: see Snapshot.ID.
	ID         string      `json:"id,omitempty"`
	Level      NotifyLevel `json:"level"`
	Text       string      `json:"text"`
	DecisionID string      `json:"decisionId,omitempty"`
	TS         int64       `json:"ts"`
}

// ForemanStatusMsg says the backend or auth status changed (the banner).
// It is named apart from ForemanStatus, the entity it carries.
type ForemanStatusMsg struct {
	// ID: see Snapshot.ID.
	ID     string        `json:"id,omitempty"`
	Status ForemanStatus `json:"status"`
}

// Ack answers any client message that carried an id.
type Ack struct {
	// ID: see Snapshot.ID.
	ID string `json:"id,omitempty"`
	// Re is the id of the client message acknowledged.
	Re string `json:"re"`
	OK bool   `json:"ok"`
	// Error says why the message failed (OK false).
	Error string `json:"error,omitempty"`
	// Result carries what the message made, e.g. {"goalId": ...} for
	// goal.submit, {"repoId": ...} for repo.add. Choice: an empty map is
	// omitted like a nil one.
	Result map[string]any `json:"result,omitempty"`
}

// Error says a client message was invalid or failed. A message that had an
// id also gets a failed Ack (see ErrorReplies).
type Error struct {
	// ID: see Snapshot.ID.
	ID      string `json:"id,omitempty"`
	Message string `json:"message"`
	// Re is the id of the client message, when it had one that could be read.
	Re string `json:"re,omitempty"`
}

// Hello is the first message after connecting; the server replies with a
// Snapshot, then streams upserts.
type Hello struct {
	// ID is the client's correlation id, answered with an ack.
	ID         string `json:"id,omitempty"`
	ModVersion string `json:"modVersion"`
	// Protocol must be Version (the dialect types it as the literal 1).
	Protocol int `json:"protocol"`
	// Client is informational: "mod", "cli", ...
	Client string `json:"client,omitempty"`
}

// GoalSubmit is a new goal for the lead.
type GoalSubmit struct {
	// ID is the client's correlation id, answered with an ack.
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
	// RepoID defaults to the only or most recently added repo.
	RepoID string `json:"repoId,omitempty"`
}

// UserMessage is a message from the person to an agent or to everyone.
type UserMessage struct {
	// ID is the client's correlation id, answered with an ack.
	ID string `json:"id,omitempty"`
	// To is an agent id or All. With All, a leading "@name" in Text routes
	// it to that agent (the server's rule, not this package's).
	To   string `json:"to"`
	Text string `json:"text"`
}

// DecisionAnswerMsg answers an open decision. For merge decisions
// OptionMerge merges, OptionRequestChanges sends Text back to the worker
// and OptionReject abandons the branch. It is named apart from
// DecisionAnswer, the entity a decision records.
type DecisionAnswerMsg struct {
	// ID is the client's correlation id, answered with an ack.
	ID         string `json:"id,omitempty"`
	DecisionID string `json:"decisionId"`
	// Option is a label (preferred) or a 0-based index into
	// Decision.Options; nil when absent (a free-text answer).
	Option *OptionRef `json:"option,omitempty"`
	// Text is the free-text answer or the feedback of "Request changes".
	Text string `json:"text,omitempty"`
}

// OptionRef is decision.answer's option, which is either a label or a
// 0-based index into Decision.Options. Exactly one of its forms is set:
// IsIndex tells which.
type OptionRef struct {
	// Label is the option's label when IsIndex is false.
	Label string
	// Index is the 0-based index into Decision.Options when IsIndex is true.
	Index int
	// IsIndex tells an index (a JSON integer) from a label (a JSON string).
	IsIndex bool
}

// LabelOption is an OptionRef naming a label.
func LabelOption(label string) *OptionRef { return &OptionRef{Label: label} }

// IndexOption is an OptionRef naming a 0-based index.
func IndexOption(i int) *OptionRef { return &OptionRef{Index: i, IsIndex: true} }

// Resolve returns the label o names among options: the label itself if it
// is one of them, or the option at the index. ok is false if o names none.
func (o OptionRef) Resolve(options []string) (label string, ok bool) {
	if o.IsIndex {
		if o.Index < 0 || o.Index >= len(options) {
			return "", false
		}
		return options[o.Index], true
	}
	for _, opt := range options {
		if opt == o.Label {
			return opt, true
		}
	}
	return "", false
}

// MarshalJSON encodes o as a JSON string or integer.
func (o OptionRef) MarshalJSON() ([]byte, error) {
	if o.IsIndex {
		return strconv.AppendInt(nil, int64(o.Index), 10), nil
	}
	return json.Marshal(o.Label)
}

// UnmarshalJSON reads a JSON string or a non-negative integer. Choice: a
// number with a fraction or exponent, or a negative index, is rejected
// (*json.UnmarshalTypeError, so DecodeClient reports CodeWrongType).
func (o *OptionRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*o = OptionRef{Label: s}
		return nil
	}
	i, err := strconv.Atoi(string(b))
	if err != nil || i < 0 {
		return &json.UnmarshalTypeError{Value: "option " + string(b), Type: optionType}
	}
	*o = OptionRef{Index: i, IsIndex: true}
	return nil
}

// TaskActionMsg steers a task from the Task Wall. It is named apart from
// TaskAction, the enum of its action.
type TaskActionMsg struct {
	// ID is the client's correlation id, answered with an ack.
	ID     string     `json:"id,omitempty"`
	TaskID string     `json:"taskId"`
	Action TaskAction `json:"action"`
	// Arg is the agent id for reassign, the priority for prioritize
	// (default: bump to top). Choice: it is a JSON string for every action,
	// as the dialect types it, so a priority is sent as "5", not 5.
	Arg string `json:"arg,omitempty"`
}

// AgentActionMsg pauses, resumes or stops an agent, or spawns (activates)
// an off-shift worker. It is named apart from AgentAction, the enum of its
// action.
type AgentActionMsg struct {
	// ID is the client's correlation id, answered with an ack.
	ID      string      `json:"id,omitempty"`
	AgentID string      `json:"agentId"`
	Action  AgentAction `json:"action"`
	// Arg is, for spawn, an optional task id to assign to the agent.
	Arg string `json:"arg,omitempty"`
}

// DiffRequest asks for the structured diff of a worktree; it is answered
// with a Diff of the same RequestID.
type DiffRequest struct {
	// ID is the client's correlation id, answered with an ack.
	ID        string `json:"id,omitempty"`
	RequestID string `json:"requestId"`
	RepoID    string `json:"repoId"`
	// Worktree is a worktree id (e.g. "kit-t2"); an agent id resolves to
	// that agent's current worktree (the server's rule).
	Worktree string `json:"worktree"`
}

// RepoAdd registers a local git repository by path.
type RepoAdd struct {
	// ID is the client's correlation id, answered with an ack.
	ID   string `json:"id,omitempty"`
	Path string `json:"path"`
}
