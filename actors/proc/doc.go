// Package proc is the actor that owns one Runtime generation: one child
// process speaking the per-agent protocol as JSONL on stdin/stdout.
//
// The actor starts the process in its own process group in *actor.Started,
// feeds stdin from a bounded channel through a writer goroutine, and lets a
// reader goroutine send every stdout record straight to the owning agent
// actor (tagged with the epoch, so records of a superseded process are
// recognisable). It never blocks in Receive. It performs stop actions on
// request (close stdin + SIGTERM, SIGKILL) but decides none: the agent actor
// drives escalation with supervisor.Escalation. When the process is gone —
// and every stdout record has been delivered — the agent receives Exited, and then stops
// the actor.
package proc
