// Package team is the team coordinator (docs/protocol.md §10.4): the actor,
// a sibling of the registry, the jobs coordinator and the workspace actor
// under the daemon's root, that answers every team.* command and runs the
// goals a person gives the team.
//
// It owns no record in memory: goals, tasks, decisions, memory and the feed
// are the store's (store/team*.go), each committed before it is answered or
// announced (team_* events, to every connection). What the actor owns is
// the work in flight: which tasks have a worker it follows (at most
// team.max_workers), and the scheduling pass.
//
// Its effects on the rest of the daemon — starting the lead, prompting it,
// subagent runs of the lead for the workers, merging and retiring their
// workspaces — go through Link, a client of the daemon's own unix socket,
// so they take exactly the path, checks and records a client's commands
// take. Every call runs in a goroutine of the daemon's group and reports
// back to the actor as a message; nothing blocks the mailbox.
//
// A goal's life:
//
//	team.goal.submit ─▶ goal planning ─▶ lead started (or reused) and prompted
//	team.task.create ─▶ tasks todo; goal active
//	task ready, a worker free ─▶ subagent.create of the lead, isolation workspace ─▶ doing
//	run completed ─▶ worker's changes committed, CI, diff stat ─▶ review + merge decision
//	  Merge ─▶ workspace.merge, workspace.retire delete_if_merged ─▶ done
//	  Request changes ─▶ subagent.relaunch of the same worker ─▶ doing
//	  Reject ─▶ workspace.retire delete_confirmed ─▶ cancelled (dependents blocked)
//	run failed, cancelled or interrupted ─▶ blocked (retry: todo again)
//	no task todo, doing, review or blocked, one done ─▶ goal done
package team
