package workspaces

// Step names a point between two durable steps (a git step or a store
// commit) of create or retire. Deps.Failpoint is called at each, so that
// tests can stop the work there as a SIGKILL would and check that startup
// reconciliation leaves no untracked worktree, no lost branch and no record
// pointing at nothing.
type Step string

// The steps of create, in order.
const (
	// StepCreateRecorded: the record is durable in state creating; git has
	// made nothing yet.
	StepCreateRecorded Step = "create.recorded"
	// StepCreateWorktree: git made the branch and the worktree.
	StepCreateWorktree Step = "create.worktree"
	// StepCreateSetup: copy_files and the setup command ran.
	StepCreateSetup Step = "create.setup"
	// StepCreateToken: the token is in the worktree's admin dir; the record
	// is still creating.
	StepCreateToken Step = "create.token"
	// StepCreateActive: the record is active; its agent is not recorded.
	StepCreateActive Step = "create.active"
	// StepCreateAgent: the agent is recorded; nothing is answered yet.
	StepCreateAgent Step = "create.agent"
)

// The steps of retire, in order.
const (
	// StepRetireRecorded: the record is durable in state retiring; git has
	// removed nothing yet.
	StepRetireRecorded Step = "retire.recorded"
	// StepRetireWorktree: git removed the worktree; the branch is as it was.
	StepRetireWorktree Step = "retire.worktree"
	// StepRetireBranch: the branch is deleted (or kept); the record is still
	// retiring.
	StepRetireBranch Step = "retire.branch"
)

// CreateSteps lists the steps of create in order.
func CreateSteps() []Step {
	return []Step{StepCreateRecorded, StepCreateWorktree, StepCreateSetup, StepCreateToken, StepCreateActive, StepCreateAgent}
}

// RetireSteps lists the steps of retire in order.
func RetireSteps() []Step {
	return []Step{StepRetireRecorded, StepRetireWorktree, StepRetireBranch}
}

// step calls Deps.Failpoint, if a test set one.
func (w *worker) step(s Step) {
	if w.deps.Failpoint != nil {
		w.deps.Failpoint(s)
	}
}
