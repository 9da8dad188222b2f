package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// removeResult carries agent.remove's commits back to the actor.
type removeResult struct {
	answer  func(protocol.AgentRemoveData, error)
	results []protocol.AgentRemoveResult
	removed map[string]store.Agent // by agent_id, the manifests deleted
}

func (*removeResult) isRegistryMessage() {}

// remove handles agent.remove (a Shard extension, docs/protocol.md). On the
// mailbox it refuses each agent that is live: its runtime is not stopped,
// a client is attached, or a child of it has a runtime that is not stopped.
// The others are marked removing (commands to them are refused from then
// on, so none can start them) and the store deletes them off the mailbox,
// checking in the same transaction that no job that has not ended, no
// undelivered report and no live workspace needs them (persist before
// ack). Back on the mailbox the removed agents are forgotten and
// agent_removed is broadcast; their actors are stopped and their session
// directories deleted before the response goes out.
func (r *Actor) remove(c actor.Context, cmd *Command) {
	r.removeIDs(c, cmd.Cmd.(*protocol.AgentRemove).AgentIDs, func(data protocol.AgentRemoveData, err error) {
		if err != nil {
			fail(cmd, err)
			return
		}
		reply(cmd, data)
	})
}

// removeIDs is agent.remove of ids, answered through answer (called once,
// from any goroutine): the client's command, or RemoveAgents.
func (r *Actor) removeIDs(c actor.Context, ids []string, answer func(protocol.AgentRemoveData, error)) {
	if r.draining {
		answer(protocol.AgentRemoveData{}, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
		return
	}
	results := make([]protocol.AgentRemoveResult, len(ids))
	var todo []int
	seen := map[string]bool{}
	for i, id := range ids {
		results[i].AgentID = id
		if seen[id] { // named twice: judged once, the repeat shares nothing
			results[i].Error, results[i].Kind, results[i].Reason = protocol.CodeConflict, protocol.RemoveBusy, "named twice in one request"
			continue
		}
		seen[id] = true
		// An agent without an actor gets one (from its manifest): the
		// removal then goes as for any other, and no command can start
		// it meanwhile.
		e, err := r.served(c, id)
		if err != nil {
			results[i].Error, results[i].Reason = protocol.CodeOf(err), "the agent could not be read"
			continue
		}
		if e == nil {
			// Another node's agent is UNSUPPORTED naming its node
			// (notHere), as any command for it.
			perr := protocol.AsError(r.notHere(id))
			results[i].Error, results[i].Reason = perr.Code, perr.Message
			continue
		}
		if kind, reason := r.live(e); kind != "" {
			results[i].Error, results[i].Kind, results[i].Reason = protocol.CodeConflict, kind, reason
			continue
		}
		e.removing = true
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		answer(protocol.AgentRemoveData{Results: results}, nil)
		return
	}
	sys, self, st := c.ActorSystem(), c.Self(), r.deps.Store
	started := r.deps.Group.Go(func() {
		removed := map[string]store.Agent{}
		for _, i := range todo {
			m, err := st.DeleteAgent(results[i].AgentID)
			var inUse *store.InUseError
			switch {
			case err == nil:
				removed[m.AgentID] = m
				results[i].Removed = true
			case errors.As(err, &inUse):
				results[i].Error, results[i].Kind, results[i].Reason = protocol.CodeConflict, inUse.Kind, inUse.Reason
			case errors.Is(err, store.ErrNotFound):
				results[i].Error, results[i].Reason = protocol.CodeNotFound, "no agent "+results[i].AgentID
			default:
				results[i].Error, results[i].Reason = protocol.CodeInternal, "the store could not delete the agent"
			}
		}
		sys.Root.Send(self, &removeResult{answer: answer, results: results, removed: removed})
	})
	if !started {
		for _, i := range todo {
			r.agents[results[i].AgentID].removing = false
		}
		answer(protocol.AgentRemoveData{}, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// live says why an agent may not be removed while it runs, or "".
func (r *Actor) live(e *entry) (kind, reason string) {
	if e.removing {
		return protocol.RemoveBusy, "a removal of it is in progress"
	}
	if s := e.info.RuntimeState; s != protocol.RuntimeStopped && s != protocol.RuntimeFailed {
		return protocol.RemoveRunning, fmt.Sprintf("its runtime is %s (terminate or kill it first)", s)
	}
	if e.attachments > 0 {
		return protocol.RemoveAttached, fmt.Sprintf("%d client(s) attached", e.attachments)
	}
	for _, ch := range r.agents {
		if ch.m.ParentAgentID != e.m.AgentID {
			continue
		}
		if s := ch.info.RuntimeState; s != protocol.RuntimeStopped && s != protocol.RuntimeFailed {
			return protocol.RemoveChildrenAlive, fmt.Sprintf("child %s is %s", ch.m.AgentID, s)
		}
	}
	return "", ""
}

// onRemoved forgets what the store deleted and finishes the removal.
func (r *Actor) onRemoved(c actor.Context, res *removeResult) {
	var pids []*actor.PID
	var dirs, logs []string
	for _, rr := range res.results {
		e := r.agents[rr.AgentID]
		if e == nil || !e.removing {
			continue
		}
		e.removing = false
		m, ok := res.removed[rr.AgentID]
		if !ok {
			// Refused by the store: it stays served, and may go idle.
			if e.gone {
				r.passivated(c, e)
			} else {
				r.considerIdle(c, e)
			}
			continue
		}
		r.forget(rr.AgentID) // before the stop, so Terminated does not respawn it
		delete(r.epochs, rr.AgentID)
		r.deps.Metrics.AgentState(e.info.RuntimeState, "")
		if !e.gone {
			pids = append(pids, e.pid)
		}
		// Its stderr log and the log's rotated files go with it.
		if rt := r.deps.Agent.Runtime; rt.LogDir != "" {
			logs = append(logs, filepath.Join(rt.LogDir, "agents", m.AgentID+".log"))
		}
		// Its session directory (an adopted fork's is under its source's
		// forks/); never a path outside sessions/.
		if dir, ok := m.SessionPath(r.deps.Agent.Runtime.SessionsDir); ok && (m.SessionDir != "" || sessionIDPattern.MatchString(m.SessionID)) {
			dirs = append(dirs, dir)
		}
		r.deps.Logger.Info("agent removed", "agent_id", m.AgentID)
		r.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentRemoved{
			Header: protocol.Header{Type: protocol.TypeAgentRemoved, AgentID: m.AgentID}, SessionID: m.SessionID}))
	}
	sys, log, logBackups := c.ActorSystem(), r.deps.Logger, r.deps.Agent.Runtime.LogBackups
	st, sessionsDir := r.deps.Store, r.deps.Agent.Runtime.SessionsDir
	data := protocol.AgentRemoveData{Results: res.results}
	finish := func() {
		for _, pid := range pids {
			_ = sys.Root.StopFuture(pid).Wait() // the future times out by itself (10 s)
		}
		// An agent still stored may have adopted a fork that lives under
		// a removed agent's directory (docs/protocol.md §10.1): that fork
		// stays. The store's index of forks finds them.
		var keep []string
		dirs := dirs
		for _, d := range dirs {
			rel, err := filepath.Rel(sessionsDir, d)
			if err != nil {
				continue
			}
			forks, err := st.SessionDirsUnder(rel)
			if err != nil {
				log.Error("registry: list adopted forks; session directories kept", "err", err)
				dirs = nil // rather than delete a fork in use
				break
			}
			for _, f := range forks {
				keep = append(keep, filepath.Join(sessionsDir, f))
			}
		}
		for _, d := range dirs {
			if err := removeKeeping(d, keep); err != nil {
				log.Error("registry: delete session directory", "err", err)
			}
		}
		for _, l := range logs {
			// After the stops: a stopped runtime's log copy has ended.
			if err := logfile.Remove(l, logBackups); err != nil {
				log.Error("registry: delete agent log", "err", err)
			}
		}
		res.answer(data, nil)
	}
	if !r.deps.Group.Go(finish) {
		for _, pid := range pids {
			c.Stop(pid)
		}
		res.answer(data, nil) // the records are gone; the directories stay for a later prune by hand
	}
}

// removeKeeping removes dir and everything in it but the directories in
// keep (and the directories on the way to them).
func removeKeeping(dir string, keep []string) error {
	var inside []string
	for _, k := range keep {
		if rel, err := filepath.Rel(dir, k); err == nil && filepath.IsLocal(rel) {
			if rel == "." {
				return nil // dir itself is kept
			}
			inside = append(inside, k)
		}
	}
	if len(inside) == 0 {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := removeKeeping(filepath.Join(dir, e.Name()), inside); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
