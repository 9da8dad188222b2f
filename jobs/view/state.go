package view

import (
	"slices"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// CanTransition reports whether a run may move from one state to another.
func CanTransition(from, to protocol.RunState) bool {
	switch from {
	case protocol.RunQueued:
		return to == protocol.RunStarting || to == protocol.RunCancelled || to == protocol.RunInterrupted
	case protocol.RunStarting:
		return to == protocol.RunActive || to == protocol.RunFailed || to == protocol.RunCancelled ||
			to == protocol.RunTimedOut || to == protocol.RunInterrupted
	case protocol.RunActive:
		return to == protocol.RunCompleted || to == protocol.RunFailed || to == protocol.RunTimedOut ||
			to == protocol.RunCancelled || to == protocol.RunInterrupted
	}
	return false // terminal states have no outgoing transitions
}

// DeriveState computes a job's state from its runs: running while any run
// is starting or active (or some are done and others still queued); queued
// while all are queued; once all are terminal, failed if any failed, timed
// out or was interrupted, else cancelled if any was cancelled, else completed.
func DeriveState(runs []store.Run) protocol.JobState {
	var queued, terminal, failed, cancelled int
	for _, r := range runs {
		switch {
		case r.State == protocol.RunQueued:
			queued++
		case r.State.Terminal():
			terminal++
			switch r.State {
			case protocol.RunFailed, protocol.RunTimedOut, protocol.RunInterrupted:
				failed++
			case protocol.RunCancelled:
				cancelled++
			}
		}
	}
	switch {
	case terminal == len(runs) && failed > 0:
		return protocol.JobFailed
	case terminal == len(runs) && cancelled > 0:
		return protocol.JobCancelled
	case terminal == len(runs):
		return protocol.JobCompleted
	case queued == len(runs):
		return protocol.JobQueued
	}
	return protocol.JobRunning
}

// Terminal reports whether every run of the job is terminal.
func Terminal(j *store.Job) bool {
	for _, r := range j.Runs {
		if !r.State.Terminal() {
			return false
		}
	}
	return true
}

// DisplayName is the one label clients show for a run and its child agent,
// "<task name> · <alias>": every view that names a run (the create answer,
// AgentInfo, subagent.status, subagent_run_changed, jobs.show, a
// relaunch) carries the same string, so a person sees one name everywhere.
func DisplayName(name, alias string) string { return name + " · " + alias }

// RunSnapshot projects a run for the wire. final_text only goes to the
// owning parent (owner); task text never does.
func RunSnapshot(j *store.Job, r *store.Run, owner bool) protocol.RunSnapshot {
	s := protocol.RunSnapshot{
		JobID: j.JobID, RunID: r.RunID, Index: r.Index, Name: r.Name,
		AgentID: r.AgentID, Alias: r.Alias, DefinitionName: r.Name, DisplayName: DisplayName(r.Name, r.Alias),
		State: r.State, Deadline: r.Deadline,
		Usage: r.Usage, Error: r.Error, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Node: r.Node,
	}
	if r.Workspace != nil {
		ws := *r.Workspace
		s.Workspace = &ws
	}
	s.Steers = slices.Clone(r.Steers)
	if owner {
		s.FinalText = r.FinalText
	}
	return s
}

// JobSnapshot projects a job for the wire (task specs omitted).
func JobSnapshot(j *store.Job, owner bool) protocol.JobSnapshot {
	s := protocol.JobSnapshot{
		JobID: j.JobID, ParentAgentID: j.ParentAgentID, Strategy: j.Strategy,
		State: DeriveState(j.Runs), StoppedAt: j.StoppedAt, CreatedAt: j.CreatedAt, EndedAt: j.EndedAt,
		Runs: make([]protocol.RunSnapshot, 0, len(j.Runs)),
	}
	for i := range j.Runs {
		s.Runs = append(s.Runs, RunSnapshot(j, &j.Runs[i], owner))
	}
	if j.Strategy == protocol.StrategyChain {
		for i, r := range j.Runs {
			if !r.State.Terminal() || r.RunID == j.HaltedBy {
				step := i
				s.ChainStep = &step
				break
			}
		}
	}
	return s
}
