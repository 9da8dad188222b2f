package jobs

import (
	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Command is a subagent.* command routed to the coordinator by the registry.
type Command struct {
	Client *agent.Client
	Header protocol.Header
	Cmd    protocol.Command
}

// ToAgent asks the registry to deliver Msg to an agent actor, keeping the
// sender (so replies such as agent.Injected come back).
type ToAgent = agent.Route

// Adopt asks the registry to serve newly committed child Agents.
type Adopt struct{ Agents []store.Agent }

// Messages between the coordinator and job actors.
type (
	// runChanged: a job actor persisted a transition (job is the new record).
	runChanged struct {
		job   store.Job
		runID string
		prev  protocol.RunState
	}
	// admitReq: a job actor wants to start a run (caps permitting).
	admitReq struct{ jobID, runID string }
	// admitted: the coordinator granted a start.
	admitted struct{ runID string }
	// released: a run holding an admission became terminal.
	released struct{ jobID, runID string }
	// stopReq: cancel runs of the job (all when runIDs is empty); the job
	// actor answers the client.
	stopReq struct {
		cmd    *Command
		runIDs []string
	}
	// deadline: a run's deadline timer fired.
	deadline struct{ runID string }
	// createDone: the create transaction finished.
	createDone struct {
		cmd      *Command
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
)
