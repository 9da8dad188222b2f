package jobs

import (
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Message is a message of the jobs family: what the coordinator and the job
// actors send each other and themselves (timers included). The marker is
// unexported, so only this file adds to the family. Besides these, the
// coordinator receives *registry.Command (a client's subagent.* or jobs.*
// command the registry forwards) and agent.Injected, and a job actor
// agent.LeaseStarted and agent.LeaseEnded: those are their families'.
type Message interface{ isJobsMessage() }

type (
	// runChanged: a job actor persisted a transition (job is the new record).
	runChanged struct {
		job   store.Job
		runID string
		prev  protocol.RunState
	}
	// jobUpdated: a job actor persisted a change that is not a transition
	// (a stop requested, an escalation stage): the coordinator's index must
	// show it to jobs.list/jobs.show at once.
	jobUpdated struct{ job store.Job }
	// admitReq: a job actor wants to start a run (caps permitting).
	admitReq struct{ jobID, runID string }
	// admitted: the coordinator granted a start.
	admitted struct{ runID string }
	// released: a run holding an admission became terminal.
	released struct{ jobID, runID string }
	// stopReq: cancel runs of the job (all when runIDs is empty); the job
	// actor answers the client.
	stopReq struct {
		cmd    *registry.Command
		runIDs []string
	}
	// finished: the job is terminal; the coordinator ends its actor (see
	// jobActor.finish).
	finished struct{ jobID string }
	// deadline: a run's deadline timer fired.
	deadline struct{ runID string }
	// createDone: the create transaction finished.
	createDone struct {
		cmd      *registry.Command
		job      store.Job
		agents   []store.Agent
		aliases  map[string]string // normalized alias → agent_id, held until now
		existing string
		err      error
	}
	// waitTimeout: a waiter's timer fired.
	waitTimeout struct{ id int }
	// retryReports: time to retry undelivered reports.
	retryReports struct{}
	// retentionTick: time for a retention sweep (Deps.Retention).
	retentionTick struct{}
	// pruneChosen: the store's walk chose these finished jobs to prune
	// (retention; see pruneState for runs and refs).
	pruneChosen struct {
		jobs []string
		runs map[string][]store.Run
		refs map[string][]string
		err  error
	}
	// jobsDeleted: the store deleted these finished jobs (retention); free
	// are their children no stored job names any more.
	jobsDeleted struct {
		ids  []string
		free []string
		err  error
	}
)

func (*runChanged) isJobsMessage()    {}
func (*admitReq) isJobsMessage()      {}
func (*jobUpdated) isJobsMessage()    {}
func (*admitted) isJobsMessage()      {}
func (*released) isJobsMessage()      {}
func (*stopReq) isJobsMessage()       {}
func (*finished) isJobsMessage()      {}
func (*deadline) isJobsMessage()      {}
func (*createDone) isJobsMessage()    {}
func (*waitTimeout) isJobsMessage()   {}
func (*retryReports) isJobsMessage()  {}
func (*retentionTick) isJobsMessage() {}
func (*jobsDeleted) isJobsMessage()   {}
func (*pruneChosen) isJobsMessage()   {}
