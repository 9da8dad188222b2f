package wire

import "time"

// The exact option labels of merge decisions. The server acts on them by
// label, so they must be spelled exactly so.
const (
	// OptionMerge merges the task's branch into the base branch.
	OptionMerge = "Merge"
	// OptionRequestChanges sends the answer's text back to the same worker
	// on the same branch.
	OptionRequestChanges = "Request changes"
	// OptionReject abandons the branch.
	OptionReject = "Reject"
)

// The exact option labels of permission decisions.
const (
	// OptionAllowOnce allows this one call.
	OptionAllowOnce = "Allow once"
	// OptionAlwaysAllow allows the scope the decision's context states,
	// for this agent.
	OptionAlwaysAllow = "Always allow for this agent"
	// OptionDeny refuses the call.
	OptionDeny = "Deny"
)

// MergeOptions returns a merge decision's options in the dialect's order
// (the first is the default). Question decisions carry the agent's own
// options instead, possibly none (free text).
func MergeOptions() []string { return []string{OptionMerge, OptionRequestChanges, OptionReject} }

// PermissionOptions returns a permission decision's options in the
// dialect's order (the first is the default).
func PermissionOptions() []string { return []string{OptionAllowOnce, OptionAlwaysAllow, OptionDeny} }

// Fixed texts inside a decision's context.
const (
	// AlwaysAllowCovers starts the line of a permission decision's context
	// that states the scope of OptionAlwaysAllow; the scope follows it.
	AlwaysAllowCovers = `"Always allow for this agent" covers: `
	// MergeRefused starts the last line of a merge decision's context
	// after a refused merge (the decision is open again); the reason
	// follows it.
	MergeRefused = "Merge refused: "
)

// Well-known ids and addressees.
const (
	// User is the person: a Task.CreatedBy, a MemoryEntry.Author, or a
	// FeedItem.To and AgentSay.To.
	User = "user"
	// All addresses everyone: UserMessage.To, FeedItem.To, AgentSay.To.
	All = "all"
	// ScopeShared is the MemoryEntry.Scope of the team's shared memory
	// (entry ids "shared/<slug>").
	ScopeShared = "shared"
)

// Limits and defaults the dialect states.
const (
	// DefaultPort is the dialect's default port on 127.0.0.1.
	DefaultPort = 7878
	// Heartbeat is how often the server pings each connection.
	Heartbeat = 15 * time.Second
	// ActivityMax bounds Agent.Activity, in characters.
	ActivityMax = 48
	// FeedTailMax bounds Snapshot.Feed.
	FeedTailMax = 200
	// LogTailMax bounds each AgentLogs.Entries of a snapshot.
	LogTailMax = 60
)
