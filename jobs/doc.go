// Package jobs runs subagent jobs (docs/protocol.md §10.3, §11.2): a
// coordinator actor that accepts subagent.* commands, resolves handles and
// aliases, admits runs under the global and per-parent caps, keeps waiters,
// broadcasts subagent_run_changed and delivers completion reports; and one
// job actor per nonterminal job that owns its record and drives its runs.
//
// Run lifecycle (every arrow a compare-and-set in one bbolt transaction,
// which the store may share with other concurrent writes: group commit):
//
//	queued ──► starting ──► active ──► completed | failed | timed_out | cancelled
//	   │           │           │
//	   └───────────┴───────────┴──► cancelled (stop) · interrupted (daemon restart)
//
// The coordinator is the registry's sibling under the root: the registry
// forwards it subagent.* and jobs.* commands (*registry.Command) and routes
// its leases and reports to agent actors (agent.Route). Its state is split
// by responsibility: the job index (index.go: the live jobs in memory, a
// small LRU of finished ones, every other job read from the store on
// demand) and the alias allocator (alias.go) are pure and unit-tested; waiters.go, reports.go and
// commands.go hold the coordinator's handlers; messages.go the family's
// sealed messages. Its timers run on an injected clock and its goroutines
// in the daemon's xsync.Group.
//
// With isolation "workspace" (isolation.go) each run works in a git
// worktree of its own that the workspaces actor plans before the job
// commit (the records go into the job's transaction), makes when the run
// starts and measures when it ends (the diff stat goes into the report).
//
// A job's state is derived from its runs. Nothing is replayed after a crash:
// runs that were starting or active become interrupted, later chain steps are
// cancelled, and the parent may relaunch the durable child explicitly.
package jobs
