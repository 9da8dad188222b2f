// Package actorref keeps a stopped actor's memory from outliving it
// through the PIDs other actors still hold.
//
// A protoactor PID caches the process it resolved to, and that process
// holds the actor's mailbox, context and the actor itself. The cache is
// dropped only when the PID is next used after the actor died. Many holders
// never use a PID again: a watched actor keeps its watchers' PIDs (and
// protoactor's PIDSet leaves a removed PID behind in its backing array), a
// map entry outlives the actor it names. Each of them would keep the
// whole stopped actor, a connection's with its transport buffers, alive
// (the soak once found every closed connection kept so).
package actorref

import "github.com/asynkron/protoactor-go/actor"

// released is the message Release sends to the stopped actor's own PID. It
// reaches the dead-letter process, which is told not to log it.
type released struct{}

// IgnoreDeadLetterLogging keeps released out of the dead-letter log.
func (released) IgnoreDeadLetterLogging() {}

// Release drops the process cached in c's own PID, which every holder of
// that PID shares. Call it when the actor receives *actor.Stopped: by then
// protoactor has removed the actor from its registry and marked the process
// dead, so resolving the PID once more clears the cache and finds nothing
// to cache instead. Later sends to the PID reach dead letters, as before.
func Release(c actor.Context) {
	c.Send(c.Self(), released{})
}
