// Package workspaces is the workspace actor (docs/protocol.md §10.1a): the
// one actor that owns every workspace record — a git worktree on a branch
// of its own that the daemon created for its agents — and answers the
// workspace.* commands the registry forwards to it.
//
// The mailbox never blocks: each command's git calls and store commits run
// in a goroutine of the daemon's xsync.Group, serialized per repository
// (git common dir) by git.Locks, because a create is several git steps
// plus durable records, which git's own locks do not cover. The goroutine
// reports back with a message; the actor then asks the registry to serve
// any new agent (registry.Adopt), answers the client, and broadcasts the
// workspace_* events, in that order, each after the record it describes is
// durable.
//
// Create writes the record in state creating before git makes anything,
// then the worktree, copies Deps.CopyFiles into it and runs
// Deps.SetupCommand, then writes the record as active, then the agent
// manifest with its binding (store.CreateWorkspaceAgent). A failure after the
// record rolls back only what is still exactly what the create made and
// retires the record with a tombstone saying what happened (or, when the
// worktree cannot be removed, keeps the record as conflict pointing at
// it); startup reconciliation does the same for a creating record a crash
// left, finishes or rolls back a retiring one, marks an active record
// whose worktree or repository vanished as missing, and sweeps unrecorded
// worktrees under the root only when provably its own and empty of work
// (reconcile.go). Deps.Failpoint lets tests stop at every Step between
// git and store steps, as a SIGKILL would. The daemon's shutdown is
// treated the same way: the actor's stop cancels the work in flight,
// killing its git and setup processes instead of awaiting them, rolls
// nothing back on the strength of a killed git, answers the commands cut
// short CONFLICT and waits only for their goroutines to return
// (inflight.go).
//
// Retire is safe by default: it refuses a workspace with a busy or live
// agent (asked of the registry) and everything git.CheckRetire refuses,
// deletes the branch only with a merge proof (delete_if_merged) or an
// explicit confirmation (delete_confirmed), and always keeps a tombstone
// with the branch and its last head.
//
// Choices (the protocol leaves them open; docs/protocol.md §13): a detached
// main checkout with no integration_target is refused as base_ref_unknown;
// retiring a missing workspace only forgets the record; a retire whose
// CheckRetire finds the worktree or repository gone marks an active record
// missing and refuses missing_authority, so a retry forgets it; a retire of a
// retired workspace is CONFLICT without refusal data; workspace.list with a
// cwd outside any repository is refused not_a_repository, and its filter
// compares git common dirs (the same from the main checkout and from every
// worktree); workspace.merge (an extension) merges, squashes or rebases into
// the integration target through git.Client.Merge, which refuses before
// anything changes; nothing-to-merge, a missing committer identity and a
// target that moved meanwhile are CONFLICT without refusal data; the live
// check knows runtimes, turns and attached clients (the registry's AgentInfo
// and the attachment counts agents report) and subagent runs in flight (asked
// of the jobs coordinator: queued, starting or active runs of the workspace's
// agents are busy); a failed create keeps its record, retired, with
// ConflictReason saying what was undone. Isolated subagent runs
// (isolation.go) plan, make and measure workspaces for the jobs coordinator.
package workspaces
