package server

import "errors"

// The server's errors. What a client is told goes into the dialect's
// error message as text (the dialect has no codes, docs/agentcraft.md §7).
var (
	// ErrNotLoopback: the listen address is not a loopback one and
	// AllowNonLoopback is off.
	ErrNotLoopback = errors.New("agentcraft server: listen address is not loopback (set agentcraft.allow_non_loopback to allow it)")
	// errNoSocket: the daemon's socket was not given.
	errNoSocket = errors.New("no daemon socket")
	// errNotARepo: repo.add named a path outside a git repository.
	errNotARepo = errors.New("not a git repository")
	// errUnknownRepo: a repoId names no registered repository.
	errUnknownRepo = errors.New("no such repo")
	// errUnknownDecision: a decisionId names no decision.
	errUnknownDecision = errors.New("no such decision")
	// errBadOption: a decision.answer's option is none of the decision's.
	errBadOption = errors.New("no such option")
	// errUnknownWorktree: a diff.request's worktree names none.
	errUnknownWorktree = errors.New("no such worktree")
	// errNoGoal: a message needs a goal and there is none.
	errNoGoal = errors.New("no goal yet")
)

// errBusy: a client sent more messages than wait to be handled.
var errBusy = errors.New("too many messages waiting; slow down")
