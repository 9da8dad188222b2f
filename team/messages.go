package team

import "github.com/shard-dev/shard/store"

// Message is a message of the team coordinator's family.
type Message interface{ isTeamMessage() }

// Ready tells the coordinator the daemon serves clients (its link works):
// it reconciles the open goals (docs/protocol.md §10.4, restarts) and
// starts scheduling. The daemon sends it once the gateway serves; team.*
// commands are answered before it, but nothing is started.
type Ready struct{}

// kick asks for a scheduling pass.
type kick struct{}

// picked carries the ready tasks a scheduling pass found; the actor
// follows as many as workers are free (the follower starts each).
type picked struct{ tasks []store.Task }

// followEnded: the goroutine following a task's run ended (the task left
// doing, or the coordinator stops).
type followEnded struct {
	taskID string
	gen    uint64
}

// recovered carries the doing tasks the startup reconciliation found: each
// is followed again (its run, interrupted by the restart, ends it blocked).
type recovered struct{ taskIDs []string }

func (*Ready) isTeamMessage()       {}
func (*kick) isTeamMessage()        {}
func (*picked) isTeamMessage()      {}
func (*followEnded) isTeamMessage() {}
func (*recovered) isTeamMessage()   {}

// followTask: a task is doing again (Request changes relaunched its
// worker); the actor follows its new run.
type followTask struct{ taskID string }

func (*followTask) isTeamMessage() {}
