package workspaces

import (
	"slices"
	"sync"
)

// claims are the workspaces subagent runs are using: a run claims its
// workspace when its start asks for the worktree (Materialize, recorded on
// the mailbox as the request arrives) and releases it when it ends
// (Release, from the job actor). Retire refuses busy while a claim is held,
// and materialize makes the worktree only for a claim still held; both
// decide under the repository's lock, so that a retire and a run start
// committed at the same moment never both win: either the retire checked
// first and the run then finds the workspace retired (typed refusal
// "retired", the run fails and never starts), or the claim was there first
// and the retire is refused busy.
//
// The set is in memory on purpose: a restart ends every run that was
// starting or active (jobs.Reconcile), so no claim outlives the daemon.
// It is shared by the actor and its workers (like git.Locks), hence the
// mutex; it is never held across I/O.
type claims struct {
	mu   sync.Mutex
	runs map[string]map[string]string // workspace id → run id → its agent id
}

func newClaims() *claims { return &claims{runs: map[string]map[string]string{}} }

func (c *claims) claim(ws, run, agentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[ws] == nil {
		c.runs[ws] = map[string]string{}
	}
	c.runs[ws][run] = agentID
}

func (c *claims) release(ws, run string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs[ws], run)
	if len(c.runs[ws]) == 0 {
		delete(c.runs, ws)
	}
}

func (c *claims) held(ws, run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.runs[ws][run]
	return ok
}

// of lists the runs holding a claim on ws, sorted, and their agents (in
// the same order; "" for a run that did not name its agent).
func (c *claims) of(ws string) (runs, agents []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for r := range c.runs[ws] {
		runs = append(runs, r)
	}
	slices.Sort(runs)
	for _, r := range runs {
		agents = append(agents, c.runs[ws][r])
	}
	return runs, agents
}
