// Package jobs runs subagent jobs (spec §10.3, §11.2): a coordinator actor
// that accepts subagent.* commands, resolves handles and aliases, admits runs
// under the global and per-parent caps, keeps waiters, broadcasts
// subagent_run_changed and delivers completion reports; and one job actor per
// nonterminal job that owns its record and drives its runs.
//
// Run lifecycle (every arrow a compare-and-set in one bbolt transaction,
// which the store may share with other concurrent writes: group commit):
//
//	queued ──► starting ──► active ──► completed | failed | timed_out | cancelled
//	   │           │           │
//	   └───────────┴───────────┴──► cancelled (stop) · interrupted (daemon restart)
//
// A job's state is derived from its runs. Nothing is replayed after a crash:
// runs that were starting or active become interrupted, later chain steps are
// cancelled, and the parent may relaunch the durable child explicitly.
package jobs
