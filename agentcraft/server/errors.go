package server

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

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
	// errUnknownAgent: a name or id names no agent of the team (worded as
	// the dialect's example error).
	errUnknownAgent = errors.New("no agent named")
)

// echoMax bounds what an error message repeats of a value the client sent
// (docs/agentcraft.md §9 C15).
const echoMax = 64

// echo quotes v for an error message, cut to echoMax bytes on a rune
// boundary.
func echo(v string) string {
	if len(v) > echoMax {
		cut := echoMax
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return strconv.Quote(v)
}

// errBusy: a client sent more messages than wait to be handled.
var errBusy = errors.New("too many messages waiting; slow down")
