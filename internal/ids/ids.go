package ids

import (
	"strings"

	"github.com/oklog/ulid/v2"
)

// The prefixes Shard uses. New accepts any prefix; these name the record
// kinds that exist today.
const (
	Agent   = "agent" // a durable Agent identity
	Session = "sess"  // a session transcript
	Job     = "job"   // a subagent job
	Run     = "run"   // one run of a job
	// Workspace is a git-worktree workspace.
	Workspace = "workspace"
	// The records of a team (store/team.go).
	Goal     = "goal"     // what the person asked a team for
	Task     = "task"     // one card of a goal's task board
	Decision = "decision" // a question, permission or merge waiting on the person
	Memory   = "memory"   // one markdown memory entry
	Feed     = "feed"     // one item of a goal's activity feed (ids sort by time)
)

// New returns a fresh id: prefix, "-", then a lowercase ULID whose time part
// is the current time in milliseconds. Ids minted in later milliseconds sort
// after earlier ones. New is safe for concurrent use.
func New(prefix string) string {
	return prefix + "-" + strings.ToLower(ulid.Make().String())
}

// HasPrefix reports whether id carries the given type prefix followed by the
// dash separator and a non-empty remainder. HasPrefix("agent-01j…", "agent")
// is true; HasPrefix("agentx-01j…", "agent") and HasPrefix("agent-", "agent")
// are false.
func HasPrefix(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	return ok && rest != ""
}
